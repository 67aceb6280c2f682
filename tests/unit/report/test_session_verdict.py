"""One verdict: the terminal's last line, the CI summary's headline and report.html's header state the session's
exit status and its parts, and never say "passed" of a session that exits non-zero."""

from __future__ import annotations

import itertools
import re

import pytest
from known_failures_project import FAILING, newest_run, project, run, write_state

from pytest_rageval.report.session_verdict import session_verdict


def test_the_parts_of_a_verdict() -> None:
    metrics = {"failed": 3, "errors": 0, "known_failures": 14}
    assert (
        session_verdict(metrics, 1, "passed").text == "FAILED (exit 1): 3 new failures, 14 known failures, gate passed"
    )
    failed = session_verdict({"failed": 0}, 1, "failed", "regression: mrr_avg 1.000 → 0.500")
    assert failed.text == "FAILED (exit 1): 0 new failures, gate FAILED"
    assert failed.line == "FAILED (exit 1): 0 new failures, gate FAILED: regression: mrr_avg 1.000 → 0.500"
    assert (
        session_verdict({"failed": 0, "known_failures": 1}, 0, "passed").text
        == "passed: 0 new failures, 1 known failure, gate passed"
    )
    assert session_verdict({"failed": 0}, 0, "not gated").text == "passed: 0 failed"
    assert (
        session_verdict({"failed": 0}, 1, "not gated").text
        == "FAILED (exit 1): 0 failed, exit status 1 (outside the eval cases)"
    )


@pytest.mark.slow
def test_every_combination_states_the_exit_status_everywhere(pytester: pytest.Pytester) -> None:
    """Cases fail or not x the gate passes or fails x known failures allowed or not: the last line, the CI summary
    and report.html agree with the exit status."""
    project(pytester)
    pytester.makepyprojecttoml("[tool.rageval.gate]\nmrr_avg = 0.03\n")
    assert run(pytester, "--rageval-update-baseline").ret == 1
    for n, (cases_fail, gate_fails, known) in enumerate(itertools.product((False, True), repeat=3)):
        ranks = {case: 2 for case in FAILING}
        if cases_fail:
            ranks["c10"] = 2  # passed in the baseline, fails now (mrr_avg -0.017: within the tolerance)
        if gate_fails:
            ranks.update({"c20": 3, "c21": 3})  # no threshold on their mrr: only the gate sees the drop (-0.044)
        write_state(pytester.path, ranks)
        mode = "allow" if known else "fail"
        result = run(pytester, f"--rageval-summary-md=s{n}.md", "-o", f"rageval_known_failures={mode}")
        expected = 1 if cases_fail or gate_fails or not known else 0
        assert result.ret == expected, (cases_fail, gate_fails, known, result.stdout.str())
        word = "passed" if expected == 0 else f"FAILED (exit {expected})"
        last = result.stdout.lines[-1]
        assert re.match(rf"^=+ rageval {re.escape(word)}: ", last), last
        headline = (pytester.path / f"s{n}.md").read_text().splitlines()[0]
        assert headline.startswith(f"## pytest-rageval: {'✅' if expected == 0 else '❌'} {word}: "), headline
        html = (newest_run(pytester.path) / "report.html").read_text()
        assert f">session {word}</span>" in html
        for text in (last, headline):
            assert ("gate FAILED" in text) == gate_fails
            assert ("known failure" in text) == known
            assert (f"{1 if cases_fail else 0} new failure" if known else f"{10 + cases_fail} failed") in text
        if expected:
            assert "session passed" not in html and "rageval passed" not in result.stdout.str()
