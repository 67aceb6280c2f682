"""Trends continue across eval-set edits: one series, each edit a mark, each run compared with the one before on
the cases both share unchanged."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest
from known_failures_project import newest_run, project, run, write_state


def add_line(pytester: pytest.Pytester, line: dict[str, Any]) -> None:
    path = pytester.path / "eval_sets" / "set.jsonl"
    path.write_text(path.read_text().rstrip("\n") + "\n" + json.dumps(line) + "\n")


def test_five_runs_with_two_edits_draw_one_trend_with_two_marks(pytester: pytest.Pytester) -> None:
    project(pytester)
    write_state(pytester.path, {})
    gold = [{"rel_path": "docs/a.md"}]
    for n in range(5):
        if n == 2:
            add_line(pytester, {"id": "added", "question": "added", "gold_supports": gold})  # edit 1: a case added
        if n == 4:  # edit 2: a case changed (its question) and the gold of c20 moved down
            path = pytester.path / "eval_sets" / "set.jsonl"
            path.write_text(path.read_text().replace('"question": "c05"', '"question": "c05 reworded"'))
            write_state(pytester.path, {"c20": 2})
        assert run(pytester, "-o", "rageval_baseline=").ret == 0
    history = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "history", "results"],
        capture_output=True,
        text=True,
        cwd=pytester.path,
    )
    assert history.returncode == 0, history.stderr
    out = history.stdout
    assert len(re.findall(r"^eval set ", out, re.M)) == 1, out
    assert re.search(r"^eval set \w+ \(eval_sets/set.jsonl\): 5 runs, 2 eval-set edits \(marked ~\)$", out, re.M), out
    marks = [line for line in out.splitlines() if line.startswith("~ ")]
    assert marks[0].startswith("~ eval set edited: 1 added, 0 changed, 0 removed (30 cases unchanged)")
    assert marks[1].startswith(
        "~ eval set edited: 0 added, 1 changed, 0 removed (30 cases unchanged); vs the run before on them: "
    )
    assert "mrr_avg -0.017" in marks[1]  # c20's gold at rank 2, over the 30 unchanged cases
    html = (newest_run(pytester.path) / "report.html").read_text()
    trends = html[html.index('id="trends"') :]
    charts = re.findall(r'<div class="chart">.*?</svg></div>', trends, re.S)
    assert charts and all(chart.count("<polyline") == 1 and chart.count('<g class="edit">') == 2 for chart in charts)
    assert "5 runs of eval set" in trends and "2 eval-set edits marked" in trends and "of other eval sets" not in trends
    assert "eval set edited: 0 added, 1 changed, 0 removed (30 cases unchanged)" in trends
    assert "vs the run before on 30 unchanged cases: -0.017" in trends
