"""A line's ``marks`` cannot stop collection: a name pytest would refuse (``_x``), one that names no marker
(``__class__``) or one of 10,000 characters is that line's error item, and every other line runs."""

from __future__ import annotations

import json

import pytest

RAG = "def ask(question, params):\n    return {'answer': 'A.', 'retrieved_chunks': [{'rel_path': 'a.md', 'text': 'A.'}]}\n"
GOOD = [
    {"id": f"good{i}", "question": f"q{i}?", "gold_supports": [{"rel_path": "a.md"}], "marks": ["smoke"]}
    for i in range(2)
]
BAD = {
    "_x": "'_x' is no marker name (letters, digits and _, starting with a letter)",
    "__class__": "'__class__' is no marker name",
    "m" * 10_000: "a marker name of 10000 characters ('mmmmmmmmmmmmmmmmmmmm'...; at most 100)",
}


def test_a_mark_pytest_would_refuse_is_that_lines_error(pytester: pytest.Pytester, xdist: list[str]) -> None:
    pytester.makepyfile(rag=RAG)
    lines = [*GOOD, *({"id": f"bad{i}", "question": "q?", "marks": [name]} for i, name in enumerate(BAD))]
    lines.append({"id": "longest", "question": "q?", "marks": ["m" * 100]})
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(line) for line in lines) + "\n"})
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess(
        "--rageval",
        "--rageval-judge=none",
        "--rageval-target=rag:ask",
        "-p",
        "no:cacheprovider",
        "--strict-markers",
        *xdist,
    )
    result.assert_outcomes(passed=len(GOOD) + 1, errors=len(BAD))
    out = result.stdout.str()
    for number, problem in enumerate(BAD.values(), start=len(GOOD) + 1):
        assert (
            f"eval_sets/s.jsonl:{number}: field 'marks[0]': " in out
            or f"eval_sets/s.jsonl:{number}: field 'marks'" in out
        ), out[-3000:]
        assert problem in out, problem
    assert "Traceback" not in out and "INTERNALERROR" not in out + result.stderr.str()
