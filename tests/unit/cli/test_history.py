"""`rageval history`: full column names, a description for every argument, and `--metric`'s ASCII sparkline."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_rageval.cli import build_parser
from pytest_rageval.report.sparkline import LEVELS, MISSING, aggregate_key, scale_of, sparkline


def test_the_sparkline_is_drawn_on_the_metric_s_own_scale() -> None:
    assert sparkline([0.0, 0.5, 1.0], (0.0, 1.0)) == LEVELS[0] + LEVELS[4] + LEVELS[-1]
    # a 0.05 dip near the top stays near the top (not min-to-max, which would draw a collapse)
    assert sparkline([0.90, 0.85, 0.90], (0.0, 1.0)) == LEVELS[7] + LEVELS[6] + LEVELS[7]
    assert sparkline([None, "high", float("nan"), True], (0.0, 1.0)) == MISSING * 4
    assert sparkline([-3, 9], (0.0, 1.0)) == LEVELS[0] + LEVELS[-1]  # clamped to the axis
    assert sparkline([2.5], (0.0, 5.0)) == LEVELS[4]


def test_a_metric_is_named_by_its_aggregate_or_its_own_name() -> None:
    assert aggregate_key("mrr") == aggregate_key("mrr_avg") == "mrr_avg"
    assert aggregate_key("scope_miss") == "scope_miss_rate"
    assert aggregate_key("abstention_accuracy") == "abstention_accuracy"
    assert aggregate_key("nonsense") is None
    assert scale_of("correctness_avg") == (0.0, 5.0) and scale_of("mrr_avg") == (0.0, 1.0)


pytestmark = pytest.mark.e2e  # most tests here run the rageval command


def _runs(folder: Path, values: list[object]) -> None:
    for number, mrr in enumerate(values):
        run = folder / f"2026010{number}-000000-aaaaa{number}"
        run.mkdir(parents=True)
        metrics = {
            "run_id": run.name,
            "timestamp": f"2026-01-0{number + 1}T0{number}:30:00.125Z",
            "eval_set_hash": "e" * 64,
            "git_commit": f"abc123{number}" + "f" * 33,
            "eval_set_files": {"eval_sets/s.jsonl": "x"},
            "passed": 1,
            "total_tests": 1,
            "aggregate_metrics": {"mrr_avg": mrr, "abstention_accuracy": 1.0},
        }
        (run / "metrics.json").write_text(json.dumps(metrics))


def rageval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_history_prints_full_column_names_and_the_sparkline(tmp_path: Path) -> None:
    _runs(tmp_path, [0.8, None, 0.75, 0.8])
    result = rageval("history", str(tmp_path), "--metric", "mrr")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = [h.strip() for h in lines[1].split("  ") if h.strip()]
    assert header[:7] == [
        "run_id",
        "made (UTC), commit",
        "recall_at_k_avg",
        "mrr_avg",
        "groundedness_avg",
        "correctness_avg",
        "abstention_accuracy",
    ]
    # each run says when it was made (UTC) and from which commit, as far as its metrics.json says
    assert lines[2].split()[:4] == ["20260100-000000-aaaaa0", "2026-01-01", "00:30", "abc1230"]
    assert lines[5].split()[:4] == ["20260103-000000-aaaaa3", "2026-01-04", "03:30", "abc1233"]
    assert lines[-1] == f"mrr_avg [0..1] |{LEVELS[6]}{MISSING}{LEVELS[6]}{LEVELS[6]}| oldest 0.800, newest 0.800"


def test_an_unknown_metric_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    _runs(tmp_path, [0.8])
    result = rageval("history", str(tmp_path), "--metric", "mrrr")
    assert result.returncode == 2
    assert "rageval: --metric mrrr: unknown metric (did you mean 'mrr'?)" in result.stderr
    assert "Traceback" not in result.stderr


def _commands() -> dict[str, Any]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert isinstance(sub, argparse._SubParsersAction)
    return dict(sub.choices)


def test_every_command_is_checked() -> None:
    assert {"compare", "report", "judge", "merge", "history", "label"} <= set(_commands())


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_argument_says_what_it_is(command: str) -> None:
    parser = _commands()[command]
    bare = [a.option_strings or [a.dest] for a in parser._actions if a.dest != "help" and not a.help]
    assert bare == []
