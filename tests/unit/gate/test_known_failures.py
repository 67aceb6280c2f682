"""Known failures: with a baseline, a case that failed there and fails now the same way is an xfail, not a regression."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from known_failures_project import FAILING, newest_run, project, run, write_state


def artifacts(root: Path, name: str) -> dict[str, Any]:
    """The counts every artifact states: metrics.json, JUnit XML, report.html, the CI summary."""
    folder = newest_run(root)
    metrics = json.loads((folder / "metrics.json").read_text())
    suite = ET.parse(root / f"{name}.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    xfailed = sum(
        1 for case in suite.iter("testcase") for skip in case.iter("skipped") if skip.get("type") == "pytest.xfail"
    )
    html = (folder / "report.html").read_text()
    summary = (root / f"{name}.md").read_text()
    return {
        "metrics": metrics,
        "junit_failures": int(suite.get("failures", -1)),
        "junit_xfailed": xfailed,
        "html": html,
        "summary": summary,
    }


def test_known_failures_pass_unchanged_and_fail_when_worse_new_or_fixed_named(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    project(pytester)
    base = run(pytester, "--rageval-update-baseline", *xdist)
    assert base.ret == 1  # the baseline run itself fails its 10 cases
    assert json.loads((pytester.path / "baseline" / "metrics.json").read_text())["failed"] == 10

    same = run(pytester, "--junitxml=same.xml", "--rageval-summary-md=same.md", *xdist)
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines(["*10 known failures: failed in the baseline the same way*", "*20 passed, 10 xfailed*"])
    baseline_id = json.loads((pytester.path / "baseline" / "metrics.json").read_text())["run_id"]
    seen = artifacts(pytester.path, "same")
    metrics = seen["metrics"]
    assert (metrics["known_failures"], metrics["fixed_since_baseline"], metrics["xfailed"], metrics["failed"]) == (
        10,
        0,
        10,
        0,
    )
    assert (seen["junit_failures"], seen["junit_xfailed"]) == (0, 10)
    assert re.search(r"known failures</th>.*?<td[^>]*>10</td>", seen["html"], re.S) or ">10<" in seen["html"]
    assert seen["html"].count('data-outcome="known failure"') == 10
    assert "10 known failures" in seen["summary"]
    assert metrics["cases"]["eval_sets/set.jsonl::c03"]["known_failure"] is True
    assert metrics["cases"]["eval_sets/set.jsonl::c03"]["missed"] == ["mrr"]
    results = [json.loads(line) for line in (newest_run(pytester.path) / "results.jsonl").read_text().splitlines()]
    reason = next(r["since_baseline"]["text"] for r in results if r["test_case_id"] == "c03")
    assert reason == f"known failure since {baseline_id}: mrr = 0.5 (needs >= 1)"

    # c00 got worse (rank 3), c10 fails anew, c01 is fixed (rank 1)
    write_state(pytester.path, {**{case: 2 for case in FAILING}, "c00": 3, "c10": 2, "c01": 1})
    moved = run(pytester, "--junitxml=moved.xml", "--rageval-summary-md=moved.md", *xdist)
    assert moved.ret == 1
    moved.stdout.fnmatch_lines(["*FAILED*c00*", "*FAILED*c10*"])
    moved.stdout.fnmatch_lines(["*since the baseline: failed in * too, and got worse: mrr 0.500 → 0.333*"])
    moved.stdout.fnmatch_lines(
        ["*8 known failures*", "*1 fixed since the baseline (failed there, pass now):*", "  eval_sets/set.jsonl::c01"]
    )
    seen = artifacts(pytester.path, "moved")
    metrics = seen["metrics"]
    assert (metrics["known_failures"], metrics["fixed_since_baseline"], metrics["failed"], metrics["passed"]) == (
        8,
        1,
        2,
        20,
    )
    assert (seen["junit_failures"], seen["junit_xfailed"]) == (2, 8)
    assert seen["html"].count('data-outcome="known failure"') == 8
    assert "fixed since baseline" in seen["html"] and "8 known failures, 1 fixed since baseline" in seen["summary"]


def test_known_failures_fail_restores_every_miss(pytester: pytest.Pytester) -> None:
    project(pytester, ini="rageval_known_failures = fail\n")
    assert run(pytester, "--rageval-update-baseline").ret == 1
    same = run(pytester)
    assert same.ret == 1
    same.stdout.fnmatch_lines(["*10 failed, 20 passed*"])
    metrics = json.loads((newest_run(pytester.path) / "metrics.json").read_text())
    assert (metrics["known_failures"], metrics["failed"]) == (0, 10)


def test_a_bad_known_failures_setting_is_one_line(pytester: pytest.Pytester) -> None:
    project(pytester, ini="rageval_known_failures = maybe\n")
    result = run(pytester)
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*rageval_known_failures: must be allow or fail, got 'maybe'*"])


def test_a_lower_is_better_miss_is_known_while_it_rises_no_further() -> None:
    from pytest_rageval.gate.known import BaselineFailures, known_verdict

    entry = {
        "outcome": "failed",
        "definition": "d1",
        "metrics": {"latency_ms": 150.0, "mrr": 1.0},
        "missed": ["latency_ms"],
    }
    baseline = BaselineFailures.from_metrics(
        {"run_id": "base-1", "cases": {"s::a": entry, "s::ok": {"outcome": "passed"}}}
    )

    def record(latency: float, *, definition: str = "d1", error: object = None, key: str = "s::a") -> dict[str, Any]:
        misses = [{"metric": "latency_ms", "value": latency, "threshold": 100, "op": "<="}] if latency > 100 else []
        return {
            "key": key,
            "definition": definition,
            "thresholds": {"latency_ms": 100},
            "metrics": {"latency_ms": latency},
            "misses": misses,
            "error": error,
        }

    known = known_verdict(baseline, record(140.0))
    assert known is not None and (known.kind, known.text) == (
        "known",
        "known failure since base-1: latency_ms = 140 (needs <= 100)",
    )
    worse = known_verdict(baseline, record(160.0))
    assert worse is not None and (worse.kind, worse.text) == (
        "worse",
        "failed in base-1 too, and got worse: latency_ms 150.000 → 160.000",
    )
    fixed = known_verdict(baseline, record(90.0))
    assert fixed is not None and fixed.kind == "fixed"
    assert known_verdict(baseline, record(140.0, definition="d2")) is None  # changed: compared with nothing
    assert known_verdict(baseline, record(140.0, error={"kind": "timeout"})) is None
    assert known_verdict(baseline, record(140.0, key="s::ok")) is None  # passed in the baseline: a new failure
