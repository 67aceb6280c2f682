"""A baseline with metrics this run lacks: a retrieval-only run gates on a judged baseline over the metrics both
have (and the reverse), saying which were left out; the judge's invariants apply only when both runs judged."""

from __future__ import annotations

from typing import Any

import pytest
from known_failures_project import project, run, write_state

from pytest_rageval.gate.invariants import setting_differences


def test_judge_invariants_apply_only_when_both_runs_judged() -> None:
    judged: dict[str, Any] = {
        "k": 5,
        "judge": {"name": "lexical", "model": "lexical-heuristic", "prompt_version": "lex8", "temperature": 0},
    }
    unjudged = {"k": 5, "judge": {"name": "none", "model": None, "prompt_version": None, "temperature": None}}
    assert setting_differences(judged, unjudged) == setting_differences(unjudged, judged) == []
    other = {"k": 3, "judge": {**judged["judge"], "model": "gpt-4o"}}
    assert setting_differences(judged, other) == [
        "k differs: baseline 5 vs this run 3",
        "judge model differs: baseline lexical-heuristic vs this run gpt-4o",
    ]


@pytest.mark.parametrize(
    ("baseline_args", "run_args"),
    [
        (["--rageval-judge=lexical"], ["--rageval-retrieval-only"]),
        (["--rageval-retrieval-only"], ["--rageval-judge=lexical"]),
    ],
    ids=["judged-baseline", "retrieval-only-baseline"],
)
def test_a_run_gates_on_a_baseline_with_other_metrics(
    pytester: pytest.Pytester, baseline_args: list[str], run_args: list[str]
) -> None:
    project(pytester)
    write_state(pytester.path, {})  # every case finds its gold first
    run(pytester, "--rageval-update-baseline", *baseline_args)
    same = run(pytester, *run_args)
    out = same.stdout.str()
    assert "baseline refused" not in out and "judge model differs" not in out, out
    same.stdout.fnmatch_lines(["baseline: no regression", "  not compared: groundedness_avg (*"])
    write_state(pytester.path, {"c20": 2, "c21": 2, "c22": 2, "top_k": 1})  # recall lost on 3 of 30 cases
    worse = run(pytester, *run_args)
    assert worse.ret == 1
    worse.stdout.fnmatch_lines(["baseline: REGRESSION", "*recall_at_k_avg: 1.000 → 0.900*REGRESSED"])
