"""report.html shows a long chunk's whole text in a <details> when the run stored it, else says it has 200."""

from __future__ import annotations

import json

import pytest

TARGET = """
LONG = "start <b>bold</b> " + "word " * 100 + "THE-END"


def ask(question, params):
    gold = {"chunk_id": "g", "rel_path": "docs/a.md", "heading_path": "# A", "text": LONG, "rank": 1}
    return {"answer": "An answer.", "references": [gold], "debug": {"retrieved_chunks": [gold]}}
"""


@pytest.mark.parametrize("full", [False, True], ids=["200-stored", "full-text"])
def test_a_long_chunk_is_whole_in_a_details_only_when_stored(pytester: pytest.Pytester, full: bool) -> None:
    pytester.makepyfile(rag_target=TARGET)
    pytester.makefile(
        ".jsonl",
        **{
            "eval_sets/s": json.dumps({"id": "c", "question": "q", "gold_supports": [{"rel_path": "docs/a.md"}]}) + "\n"
        },
    )
    args = ["--rageval", "--rageval-judge=none", "--rageval-target=rag_target:ask", "-p", "no:cacheprovider"]
    result = pytester.runpytest_subprocess(*args, *(["--rageval-store-full-text"] if full else []))
    assert result.ret == 0, result.stdout.str()
    html = next(pytester.path.glob("results/2*/report.html")).read_text()
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html  # escaped either way
    if full:
        assert '<details class="full-text"><summary>whole chunk (525 characters)</summary>' in html
        assert "THE-END" in html and "first 200 characters stored" not in html
    else:
        assert "THE-END" not in html and '<details class="full-text">' not in html
        assert "(first 200 characters stored; --rageval-store-full-text keeps the whole chunk)" in html
