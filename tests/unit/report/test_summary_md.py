"""The CI summary (``--rageval-summary-md``, ``$GITHUB_STEP_SUMMARY``): verdict, regressed metrics, flipped cases."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk
from needs import need_module

from pytest_rageval.gate.compare import Comparison, MetricDelta
from pytest_rageval.report.markdown import MAX_CASES, md_text, report_href, summary_markdown

HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "a|b",
    "`x`",
    "[x](javascript:alert(1))",
    "**bold** _it_ ~s~ $x$",
    "line\nbreak & <b>",
]
METRICS = {"total_tests": 4, "passed": 2, "failed": 2, "errors": 0, "skipped": 1}


def regressed(name: str = "mrr_avg") -> MetricDelta:
    return MetricDelta(name, 1.0, 0.5, -0.5, 0.05, True, ci_low=-0.75, ci_high=-0.25, n_shared=4)


def comparison(to_fail: list[str], to_pass: list[str], *deltas: MetricDelta) -> Comparison:
    kept = MetricDelta("recall_at_k_avg", 1.0, 1.0, 0.0, 0.05, False, ci_low=0.0, ci_high=0.0, n_shared=4)
    return Comparison(
        deltas=[*deltas, kept],
        flipped_to_fail=to_fail,
        flipped_to_pass=to_pass,
        shared_cases=4,
        baseline_cases=4,
        current_cases=4,
    )


def render(comp: Comparison | None, **kwargs: object) -> str:
    args: dict[str, Any] = {
        "anchors": {},
        "report": "report.html",
        "gate_failed": False,
        "gate_reason": "",
        "notes": [],
    }
    args.update(kwargs)
    return summary_markdown(METRICS, comp, **args)


def test_a_regression_names_the_metric_with_its_interval_and_links_the_flipped_cases() -> None:
    comp = comparison(["s.jsonl::drop"], ["s.jsonl::fix"], regressed())
    text = render(
        comp,
        anchors={"s.jsonl::drop": "case-0", "s.jsonl::fix": "case-r3"},
        gate_failed=True,
        gate_reason=comp.reason(),
        notes=[comp.reason(), "results/latest not moved"],
    )
    lines = text.splitlines()
    assert lines[0] == "## pytest-rageval: ❌ gate FAILED"
    assert lines[2] == r"regression: mrr\_avg 1.000 → 0.500 (-0.500, tolerance 0.050)"
    assert "4 cases: 2 passed, 2 failed, 0 errors, 1 skipped." in lines
    assert "compared on 4 shared cases of 4 in the baseline and 4 in this run." in lines
    assert r"| mrr\_avg | 1.000 → 0.500 | -0.500 | -0.750 .. -0.250 | 0.050 | 4 |" in lines
    assert "recall" not in text  # only the regressed metrics have a row
    drop, fix = (
        lines.index(r"- [s.jsonl::drop](report.html#case-0)"),
        lines.index(r"- [s.jsonl::fix](report.html#case-r3)"),
    )
    assert (
        lines.index("**Flipped from pass to fail (1)**") < drop < lines.index("**Flipped from fail to pass (1)**") < fix
    )
    assert (
        lines.count(r"regression: mrr\_avg 1.000 → 0.500 (-0.500, tolerance 0.050)") == 1
    )  # the reason is not a note again
    assert "- results/latest not moved" in lines
    assert lines[-1] == "Report: [report.html](report.html)"


def test_long_flip_lists_are_cut_and_a_case_without_an_anchor_is_not_linked() -> None:
    keys = [f"s.jsonl::c{i}" for i in range(MAX_CASES + 7)]
    text = render(comparison(keys, [], regressed()), anchors={keys[0]: "case-0"})
    assert "- [s.jsonl::c0](report.html#case-0)" in text
    assert "- s.jsonl::c1\n" in text and f"s.jsonl::c{MAX_CASES}\n" not in text
    assert "- and 7 more" in text
    assert "](" not in render(comparison(keys, [], regressed()), anchors={keys[0]: "case-0"}, report=None)


def test_without_a_baseline_and_when_the_gate_passed() -> None:
    text = render(None, notes=["baseline updated: baseline/metrics.json"])
    assert text.startswith("## pytest-rageval: no baseline compared\n")
    assert "|" not in text and "Flipped" not in text
    assert "- baseline updated: baseline/metrics.json" in text
    passed = render(comparison([], []))
    assert passed.startswith("## pytest-rageval: ✅ gate passed\n") and "No metric regressed." in passed
    allowed = render(comparison(["s.jsonl::a"], [], regressed()))
    assert allowed.startswith("## pytest-rageval: ⚠️ regressions allowed\n")


def test_text_from_outside_makes_no_html_link_or_table_cell() -> None:
    comp = comparison(HOSTILE, HOSTILE, *(regressed(name) for name in HOSTILE))
    anchors = {key: f"case-{i}" for i, key in enumerate(HOSTILE)}
    text = render(comp, anchors=anchors, gate_failed=True, gate_reason=HOSTILE[0], notes=HOSTILE)
    assert "<" not in text and ">" not in text  # no tag at all: GitHub renders HTML in step summaries
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    links = re.findall(r"(?<!\\)\[(.*?)(?<!\\)\]\((.*?)\)", text)
    assert [target for _, target in links] == [
        *[f"report.html#case-{i}" for i in range(len(HOSTILE))] * 2,
        "report.html",
    ]
    assert "javascript" not in "".join(target for _, target in links)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "1.000 → 0.500" in line]
    assert len(rows) == len(HOSTILE) and all(len(re.findall(r"(?<!\\)\|", row)) == 7 for row in rows)
    assert not re.search(r"(?<!\\)[`*_~$]", text.replace("**Flipped", "").replace("**Notes**", "").replace(")**", ""))
    assert md_text("line\nbreak") == "line break" and md_text("a\x1b[2Jb") == r"a\\x1b\[2Jb"


def test_report_href_is_relative_to_the_summary_or_to_the_current_folder(tmp_path: Path) -> None:
    report = tmp_path / "results" / "run 1" / "report.html"
    assert report_href(report, report.parent / "summary.md", tmp_path) == "report.html"
    assert report_href(report, tmp_path / "results" / "s.md", tmp_path / "x") == "run 1/report.html"
    assert report_href(report, Path("/elsewhere/step_summary"), tmp_path) == "results/run 1/report.html"
    assert report_href(report, Path("/elsewhere/step_summary"), Path("/other")) == report.as_posix()
    text = render(None, report="results/run 1/report.html")
    assert text.endswith("Report: [results/run 1/report.html](results/run%201/report.html)\n")


# -- end to end -----------------------------------------------------------------------------------

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}
HOSTILE_ID = "<img src=x onerror=alert(1)>"


class System:
    """Serves gold to the cases named in ``gold``; the others get an unrelated chunk (recall 0: they fail)."""

    def __init__(self, gold: set[str]) -> None:
        self.gold = gold

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        case = body["question"].removeprefix("q-")
        hit = chunk("docs/a.md", "# A", 1) if case in self.gold else chunk("docs/b.md", "# B", 1)
        return answer("An answer.", [hit], references=[hit])


def run_twice(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[pytest.RunResult, Path]:
    """A baseline where ``fix`` fails, then a run where ``drop`` and the hostile id fail and ``fix`` passes."""
    ids = ["keep", "drop", "fix", HOSTILE_ID]
    lines = [json.dumps({"id": i, "question": f"q-{i}", "gold_supports": [GOLD]}) for i in ids]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(lines) + "\n"})
    system = System({"keep", "drop", HOSTILE_ID})
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    with AskServer(system) as server:
        common = [
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "-p",
            "no:cacheprovider",
            "--rageval-baseline=base.json",
            *args,
        ]
        pytester.runpytest(*common, "--rageval-update-baseline")
        step = pytester.path / "gh" / "step_summary"
        step.parent.mkdir()
        step.write_text("earlier step\n")
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
        system.gold = {"keep", "fix"}
        result = pytester.runpytest(*common, "--rageval-summary-md=out.md")
    return result, step


def test_a_ci_run_writes_the_summary_naming_regressions_and_flipped_cases(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, step = run_twice(pytester, monkeypatch)
    assert result.ret == 1, result.stdout.str()
    text = (pytester.path / "out.md").read_text()
    assert step.read_text() == "earlier step\n" + text  # appended, as GitHub's step summary expects
    run = (pytester.path / "results" / "latest").read_text().strip()
    assert text.startswith(
        "## pytest-rageval: ❌ FAILED (exit 1): 2 new failures, 1 fixed since the baseline, gate FAILED\n"
    ), text
    assert re.search(
        r"^\| mrr\\_avg \| 0\.750 → 0\.500 \| -0\.250 \| -1\.000 \.\. \+0\.500 \| 0\.050 \| 4 \|$", text, re.M
    ), text
    report = (pytester.path / "results" / run / "report.html").read_text()
    flipped = {}
    for title in ("pass to fail", "fail to pass"):
        section = text.split(f"**Flipped from {title}")[1].split("\n\n")[1]
        flipped[title] = re.findall(rf"^- \[(.*)\]\(results/{run}/report\.html#(case-[fr]?\d+)\)$", section, re.M)
    escaped_hostile = r"eval\_sets/s.jsonl::&lt;img src=x onerror=alert(1)&gt;"
    assert sorted(name for name, _ in flipped["pass to fail"]) == sorted([r"eval\_sets/s.jsonl::drop", escaped_hostile])
    assert [name for name, _ in flipped["fail to pass"]] == [r"eval\_sets/s.jsonl::fix"]
    for name, anchor in flipped["pass to fail"] + flipped["fail to pass"]:  # each link lands on that case's card
        card = re.search(rf'<details class="case [^"]*" id="{anchor}"[^>]*><summary>(.*?)</summary>', report)
        assert card is not None, anchor
        key = name.replace("\\", "").replace("&lt;", "<").replace("&gt;", ">")
        assert html.escape(key, quote=False) in card.group(1)
    assert text.endswith(f"Report: [results/{run}/report.html](results/{run}/report.html)\n")


def test_no_summary_without_the_option_or_the_variable_nor_when_no_case_ran(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(
        ".jsonl", **{"eval_sets/s": json.dumps({"id": "c1", "question": "q-c1", "gold_supports": [GOLD]}) + "\n"}
    )
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    with AskServer(System({"c1"})) as server:
        common = ["--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-p", "no:cacheprovider"]
        assert pytester.runpytest(*common).ret == 0
        assert not list(pytester.path.rglob("*.md"))
        step = pytester.path / "step_summary"
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
        nothing = pytester.runpytest(*common, "-k", "no-such-case", "--rageval-summary-md=out.md")
        assert nothing.ret == pytest.ExitCode.NO_TESTS_COLLECTED
        assert not step.exists() and not (pytester.path / "out.md").exists()
        (pytester.path / "afile").write_text("")
        unwritable = pytester.runpytest(*common, "--rageval-summary-md=afile/out.md")
    assert unwritable.ret == 0  # a summary that cannot be written is a note, not a failed run
    unwritable.stdout.fnmatch_lines(["*summary not written: cannot write */afile/out.md: *"])
    assert step.read_text().startswith("## pytest-rageval: ✅ passed: 0 failed\n")


def test_the_summary_and_the_terminal_mask_secrets_in_the_gate_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(
        ".jsonl", **{"eval_sets/s": json.dumps({"id": "c1", "question": "q-c1", "gold_supports": [GOLD]}) + "\n"}
    )
    pytester.makeini("[pytest]\nrageval_headers =\n    X-Api-Key: ${RAG_KEY}\n")
    monkeypatch.setenv("RAG_KEY", "s3cr3t-key")
    baseline = {"aggregate_metrics": {"mrr_avg": "http://u:hunter22@h/?token=tok9876", "recall_at_k_avg": "s3cr3t-key"}}
    (pytester.path / "base.json").write_text(json.dumps(baseline))
    with AskServer(System({"c1"})) as server:
        result = pytester.runpytest(
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "-p",
            "no:cacheprovider",
            "--rageval-baseline=base.json",
            "--rageval-summary-md=out.md",
        )
    assert result.ret == 1
    text = (pytester.path / "out.md").read_text()
    assert (
        text.startswith("## pytest-rageval: ❌ FAILED (exit 1): 0 new failures, gate FAILED\n")
        and "baseline refused" in text
    )
    assert "mrr\\_avg is" in text and "recall\\_at\\_k\\_avg is" in text
    assert "hunter22" not in text and "tok9876" not in text and "s3cr3t-key" not in text
    shown = result.stdout.str() + result.stderr.str()
    assert (
        "baseline refused" in shown
        and "rageval FAILED (exit 1): 0 new failures, gate FAILED: baseline refused" in shown
    )
    assert "hunter22" not in shown and "tok9876" not in shown and "s3cr3t-key" not in shown


AUTOLINKED = [
    "see https://evil.example/x",
    "www.evil.example",
    "mail admin@evil.example",
    "c0[target=http://rag.internal:8080/ask]",
]


def test_bare_urls_www_names_and_addresses_become_no_link_on_github() -> None:
    cmarkgfm = need_module("cmarkgfm")  # GitHub's own Markdown renderer
    comp = comparison(AUTOLINKED, AUTOLINKED, *(regressed(name) for name in AUTOLINKED))
    text = render(comp, gate_failed=True, gate_reason=AUTOLINKED[0], notes=AUTOLINKED)
    page = cmarkgfm.github_flavored_markdown_to_html(text)
    assert re.findall(r'<a href="([^"]*)"', page) == ["report.html"]
    shown = html.unescape(re.sub(r"<[^>]+>", "", page)).replace("\u2060", "")
    for value in AUTOLINKED:
        assert value in shown  # the text reads as it was


def test_a_step_summary_that_is_no_regular_file_is_a_note_not_a_hang(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(
        ".jsonl", **{"eval_sets/s": json.dumps({"id": "c1", "question": "q-c1", "gold_supports": [GOLD]}) + "\n"}
    )
    fifo = pytester.path / "fifo"
    os.mkfifo(fifo)  # nobody reads it: an append would block forever
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fifo))
    with AskServer(System({"c1"})) as server:
        result = pytester.runpytest_subprocess(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-p", "no:cacheprovider", timeout=120
        )
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"*summary not written: cannot write {fifo}: not a regular file*"])
