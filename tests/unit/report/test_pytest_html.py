"""pytest-html glue: per-case extras, the summary's aggregate table, xdist, and running without pytest-html."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any, cast

import pytest
from ask_server import AskServer, answer, chunk
from browser import dump_dom
from needs import need_module

need_module("pytest_html")

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}
PAYLOAD = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
CASES = [
    {"id": "good", "question": "What is A?", "gold_supports": [GOLD]},
    {
        "id": "bad",
        "question": "Where is the gold <b>chunk</b>?",
        "reference_answer": "In docs/a.md.",
        "expected_key_facts": ["gold is in docs/a.md"],
        "gold_supports": [GOLD],
        "thresholds": {"mrr": 1},
    },
    {"id": "boom", "question": "Explode please", "gold_supports": [GOLD]},
]


class System:
    """Gold on top for 'good'; second with a script answer for 'bad'; a body that is not JSON for 'boom'."""

    def __init__(self) -> None:
        self.good_rank = 1

    def __call__(self, body: dict[str, Any]) -> Any:
        question = str(body.get("question"))
        gold = chunk("docs/a.md", "# A > ## Part", 1, text="gold text")
        other = chunk("docs/b.md", "# B", 1, text="other text")
        if question.startswith("Explode"):
            return 200, "kaputt, not JSON"
        if question.startswith("Where"):
            gold["rank"], other["rank"] = 2, 1
            return answer(PAYLOAD, [other, gold])
        if self.good_rank == 2:
            gold["rank"], other["rank"] = 2, 1
            return answer("A is a letter.", [other, gold])
        other["rank"] = 2
        return answer("A is a letter.", [gold, other])


def write_set(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in CASES) + "\n"})


def report_tests(page: str) -> dict[str, list[dict[str, Any]]]:
    """pytest-html 4's test data: JSON in the ``data-jsonblob`` attribute."""
    match = re.search(r'data-jsonblob="([^"]*)"', page)
    assert match, "no data-jsonblob in report.html"
    return cast("dict[str, list[dict[str, Any]]]", json.loads(html.unescape(match.group(1)))["tests"])


def extras_html(tests: dict[str, list[dict[str, Any]]], case_id: str) -> str:
    """The HTML extras of one case (every phase's entry carries them; take the distinct ones)."""
    key = f"eval_sets/s.jsonl::{case_id}"
    contents: list[str] = []
    for entry in tests[key]:
        for extra in entry["extras"]:
            if extra["format_type"] == "html" and extra["content"] not in contents:
                contents.append(extra["content"])
    assert len(contents) == 1, contents
    return contents[0]


def run_dir(root: Path) -> Path:
    return root / "results" / (root / "results" / "latest").read_text().strip()


def check_page(root: Path) -> str:
    page = (root / "report.html").read_text(encoding="utf-8")
    assert PAYLOAD not in page
    tests = report_tests(page)

    bad = extras_html(tests, "bad")
    assert "Where is the gold &lt;b&gt;chunk&lt;/b&gt;?" in bad and "<b>chunk" not in bad
    assert "In docs/a.md." in bad and "gold is in docs/a.md" in bad  # expected answer and key facts
    assert ESCAPED in bad and PAYLOAD not in bad  # the answer, as text
    missed = re.search(
        r'<tr class="miss"><td><code>mrr</code></td><td class="num">0\.500</td>'
        r'<td class="num">&gt;=</td><td class="num">1\.000</td>',
        bad,
    )
    assert missed, bad  # the missed metric, its value, op and threshold
    retrieved = bad[bad.index("Retrieved chunks") :]
    assert retrieved.index("docs/b.md") < retrieved.index("docs/a.md")  # retrieved chunks in rank order ...
    assert re.search(
        r'<tr class="gold"><td class="num">2</td><td><span class="badge b-gold">gold</span></td>'
        r'<td class="mono">docs/a.md</td>',
        bad,
    )  # ... gold marked

    boom = extras_html(tests, "boom")
    assert "Error: <code>invalid_response</code>" in boom, boom
    good = extras_html(tests, "good")
    assert "What is A?" in good and 'class="miss"' not in good

    summary = page[page.index('id="rageval-summary"') :]
    summary = summary[: summary.index("</div>")]
    assert "<code>recall_at_k_avg</code>" in summary and "<code>mrr_avg</code>" in summary
    assert str(run_dir(root) / "report.html") in summary
    assert ".rageval .b-gold{" in page  # the scoped styles, once
    return page


def test_extras_and_summary(pytester: pytest.Pytester, xdist: list[str]) -> None:
    write_set(pytester)
    with AskServer(System()) as server:
        result = pytester.runpytest(
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "--html=report.html",
            "--self-contained-html",
            *xdist,
        )
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert "INTERNALERROR" not in result.stdout.str()
    check_page(pytester.path)


def test_summary_shows_baseline_deltas(pytester: pytest.Pytester) -> None:
    write_set(pytester)
    system = System()
    with AskServer(system) as server:
        base = ["--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "--rageval-baseline=base.json"]
        assert pytester.runpytest(*base, "--rageval-update-baseline").ret == 1  # 'bad' and 'boom' fail
        system.good_rank = 2
        result = pytester.runpytest(*base, "--html=report.html", "--self-contained-html")
    result.stdout.fnmatch_lines(["*REGRESSION*"])
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    summary = page[page.index('id="rageval-summary"') :]
    summary = summary[: summary.index("</div>")]
    row = re.search(r'<tr class="regressed"><td><code>mrr_avg</code></td>(.*?)</tr>', summary)
    assert row, summary
    assert "REGRESSED" in row.group(1) and "-0.250" in row.group(1)  # mrr 1 -> 0.5 on one of two scored cases
    assert "baseline: <strong>REGRESSION</strong>" in summary


def test_extras_show_judge_verdicts(pytester: pytest.Pytester) -> None:
    write_set(pytester)
    with AskServer(System()) as server:
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=lexical", f"--rageval-target={server.url}", "--html=report.html"
        )
    judge_line = [line for line in result.stdout.lines if line.startswith("judge: lexical")]
    assert (
        len(judge_line) == 1 and "tokens" not in judge_line[0] and "$" not in judge_line[0]
    )  # no zero spend on the terminal
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    bad = extras_html(report_tests(page), "bad")
    verdicts = bad[bad.index("<h4>Judge verdicts</h4>") :]
    assert (
        "<code>groundedness</code> score <strong>0.000</strong>" in verdicts and "claims share" in verdicts
    )  # score, reasoning
    assert f"unsupported claims:</div><ul><li>{ESCAPED}</li></ul>" in verdicts and PAYLOAD not in page
    assert (
        "prompt_tokens" not in verdicts and "cost_usd" not in verdicts
    )  # the heuristic judge spends nothing: no zeros
    assert "raw" not in verdicts and "{&quot;" not in verdicts  # its raw numbers: no JSON dump (it parsed)
    assert "judge_cost_usd" not in bad


def test_runs_without_pytest_html(pytester: pytest.Pytester) -> None:
    write_set(pytester)
    with AskServer(System()) as server:
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-p", "no:html"
        )
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert "INTERNALERROR" not in result.stdout.str() and "Traceback" not in result.stdout.str()
    assert (run_dir(pytester.path) / "report.html").exists()


def test_without_html_option_nothing_is_rendered(pytester: pytest.Pytester) -> None:
    """pytest-html loaded but no --html: no extras are built (pytest keeps every report to the end)."""
    write_set(pytester)
    pytester.makeconftest(
        "seen = []\n"
        "def pytest_runtest_logreport(report):\n"
        "    if report.when == 'call' or report.failed:\n"
        "        seen.append(len(getattr(report, 'extras', [])))\n"
        "def pytest_sessionfinish(session):\n"
        "    print('EXTRAS', seen)\n"
    )
    with AskServer(System()) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-s")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*EXTRAS [[]0, 0, 0[]]*"])


@pytest.mark.usefixtures("needs_chromium")
def test_headless_browser_shows_payload_as_text(pytester: pytest.Pytester, tmp_path: Path) -> None:
    write_set(pytester)
    with AskServer(System()) as server:
        pytester.runpytest(
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "--html=report.html",
            "--self-contained-html",
        )
    page = pytester.path / "report.html"
    dom = dump_dom(page, tmp_path / "profile")
    assert 'class="rageval"' in dom  # app.js inserted the extras
    assert ESCAPED in dom and PAYLOAD not in dom  # serialised back as text, i.e. parsed as text
    assert "<b>chunk</b>" not in dom


HTML_IDS = [
    "<img src=x onerror=document.body.setAttribute('data-pwned','img')>",
    "<script>document.body.setAttribute('data-pwned','script')</script>",
]


@pytest.mark.usefixtures("needs_chromium")
def test_headless_browser_shows_html_case_ids_as_text(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """pytest-html 4.2 puts the test id into its results table as HTML; the plugin escapes it (EscapedTestIds)."""
    cases = [{"id": case_id, "question": "What is A?", "gold_supports": [GOLD]} for case_id in HTML_IDS]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in cases) + "\n"})
    with AskServer(System()) as server:
        result = pytester.runpytest(
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "--html=report.html",
            "--self-contained-html",
        )
    result.assert_outcomes(passed=2)
    dom = dump_dom(pytester.path / "report.html", tmp_path / "profile")
    assert 'data-pwned="' not in dom  # neither the onerror handler nor the script ran (they would set it on <body>)
    for case_id in HTML_IDS:
        assert f'<td class="col-testId">eval_sets/s.jsonl::{html.escape(case_id, quote=False)}</td>' in dom
    assert '<img src="x"' not in dom and "<script>document" not in dom  # no element was made from an id
