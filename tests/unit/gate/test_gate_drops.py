"""The cases behind a drop: for each regressed metric the gate names the cases that moved it most, flipped or not."""

from __future__ import annotations

import json
from typing import Any

import pytest
from known_failures_project import newest_run, project, run, write_state

from pytest_rageval.gate.compare import compare
from pytest_rageval.gate.comparison_text import drop_lines


def test_the_largest_drops_are_named_worst_first_and_at_most_ten() -> None:
    def metrics(values: dict[str, float]) -> dict[str, Any]:
        cases = {k: {"outcome": "passed", "metrics": {"mrr": v}, "answerable": True} for k, v in values.items()}
        return {"aggregate_metrics": {"mrr_avg": sum(values.values()) / len(values)}, "cases": cases}

    keys = [f"s.jsonl::c{i:02d}" for i in range(14)]
    base = metrics(dict.fromkeys(keys, 1.0))
    new = metrics({k: (0.5 if i < 12 else 0.0) if i else 1.0 for i, k in enumerate(keys)})
    delta = next(d for d in compare(base, new).deltas if d.name == "mrr_avg")
    assert delta.regressed
    assert [d["case"] for d in delta.largest_drops] == [keys[12], keys[13], *keys[1:9]]  # c00 did not move
    assert drop_lines(delta)[1] == f"    {keys[12]}: 1.000 → 0.000"


def test_top_k_cut_names_the_already_failing_cases_that_lost_recall(pytester: pytest.Pytester) -> None:
    """top_k 4 -> 1 in the system: c00 and c01 (gold at rank 2, already failing on mrr) lose recall; nothing flips,
    and yet the gate names them under recall_at_k_avg in the terminal, report.html and the CI summary."""
    project(pytester)
    write_state(pytester.path, {"c00": 2, "c01": 2})
    assert run(pytester, "--rageval-update-baseline").ret == 1
    write_state(pytester.path, {"c00": 2, "c01": 2, "top_k": 1})
    cut = run(pytester, "--rageval-summary-md=s.md")
    assert cut.ret == 1
    cut.stdout.fnmatch_lines(
        [
            "*recall_at_k_avg: 1.000 → 0.933*REGRESSED",
            "    cases that moved recall_at_k_avg most (2, largest drop first):",
            "      eval_sets/set.jsonl::c00: 1.000 → 0.000",
            "      eval_sets/set.jsonl::c01: 1.000 → 0.000",
        ]
    )
    assert "flipped from pass to fail" not in cut.stdout.str()
    folder = newest_run(pytester.path)
    html = (folder / "report.html").read_text()
    verdict = html[html.index('id="verdict"') : html.index('id="flipped"') if 'id="flipped"' in html else None]
    assert "Cases that moved <code>recall_at_k_avg</code> most" in verdict
    assert "<code>eval_sets/set.jsonl::c00</code> 1.000 &rarr; 0.000" in verdict
    summary = (pytester.path / "s.md").read_text()
    assert (
        "Cases that moved recall\\_at\\_k\\_avg most:" in summary
        and "- eval\\_sets/set.jsonl::c01: 1.000 → 0.000" in summary
    )
    drops = json.loads((folder / "metrics.json").read_text())["comparison"]["deltas"]
    recall = next(d for d in drops if d["name"] == "recall_at_k_avg")
    assert [d["case"] for d in recall["largest_drops"]] == ["eval_sets/set.jsonl::c00", "eval_sets/set.jsonl::c01"]
