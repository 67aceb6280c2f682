"""Time to first token and latency as thresholds, in metrics.json's latency block and in the gate (lower is better)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_rageval.evaluation.schema import EvalCase
from pytest_rageval.evaluation.thresholds import (
    ThresholdConfig,
    ThresholdError,
    coerce_threshold,
    find_misses,
    parse_cli_thresholds,
    parse_threshold_table,
    resolve_thresholds,
)
from pytest_rageval.gate.aggregate import aggregate
from pytest_rageval.gate.compare import compare
from pytest_rageval.gate.gated_values import comparable_values, lower_is_better


def test_ttft_and_latency_are_maximums_everywhere_a_threshold_is_set() -> None:
    assert parse_cli_thresholds(["ttft_ms=800", "latency_ms=2000"]) == {"ttft_ms": 800.0, "latency_ms": 2000.0}
    assert parse_threshold_table({"ttft_ms": 500, "chat": {"ttft_ms": 300}}, "[tool.rageval.thresholds]") == (
        {"ttft_ms": 500.0},
        {"chat": {"ttft_ms": 300.0}},
    )
    case = EvalCase.model_validate({"id": "c", "question": "q", "thresholds": {"ttft_ms": 250}})
    assert resolve_thresholds(case, ThresholdConfig.empty(), judge=False)["ttft_ms"] == 250.0
    (miss,) = find_misses({"ttft_ms": 812.5, "latency_ms": 900.0}, {"ttft_ms": 250.0, "latency_ms": 1000.0})
    assert miss.describe() == "ttft_ms = 812.5 (needs <= 250)"
    assert find_misses({"ttft_ms": 250.0}, {"ttft_ms": 250.0}) == []
    assert find_misses({"latency_ms": 5.0}, {"ttft_ms": 250.0}) == []  # an answer that did not stream: not measured
    with pytest.raises(ThresholdError, match="threshold of 'ttft_ms' must be a finite number, got 'fast'"):
        coerce_threshold("ttft_ms", "fast", "line 3 thresholds")


def _record(cid: str, **metrics: Any) -> dict[str, Any]:
    return {
        "key": f"s.jsonl::{cid}",
        "test_case_id": cid,
        "category": "c",
        "tags": [],
        "answerable": True,
        "outcome": "passed",
        "metrics": {"recall_at_k": 1, **metrics},
    }


def _run(*records: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": "r", "eval_set_hash": "a" * 64, "complete": True, **aggregate(list(records))}


def test_ttft_percentiles_appear_only_when_some_answer_streamed() -> None:
    plain = _run(_record("a", latency_ms=100.0), _record("b", latency_ms=300.0))
    assert set(plain["aggregate_metrics"]["latency"]) == {"p50_ms", "p95_ms", "total_ms"}
    mixed = _run(
        _record("a", latency_ms=100.0, ttft_ms=20.0),
        _record("b", latency_ms=300.0),
        _record("c", latency_ms=500.0, ttft_ms=60.0),
    )
    latency = mixed["aggregate_metrics"]["latency"]
    assert (latency["ttft_p50_ms"], latency["ttft_p95_ms"]) == (40.0, 58.0)
    assert comparable_values(mixed)["ttft_p95_ms"] == 58.0 and "ttft_p95_ms" not in comparable_values(plain)


def test_a_slower_first_token_regresses_the_gate_when_it_has_a_tolerance() -> None:
    base = _run(*(_record(f"c{i}", latency_ms=400.0, ttft_ms=100.0) for i in range(4)))
    new = _run(*(_record(f"c{i}", latency_ms=400.0, ttft_ms=250.0) for i in range(4)))
    assert {"ttft_p50_ms", "ttft_p95_ms"} <= lower_is_better()
    assert not compare(base, new).regressed  # no tolerance by default: reported, not gated
    comparison = compare(base, new, tolerances={"ttft_p95_ms": 100.0})
    (ttft,) = [d for d in comparison.deltas if d.name == "ttft_p95_ms"]
    assert (ttft.old, ttft.new, ttft.delta, ttft.regressed) == (100.0, 250.0, 150.0, True)
    assert not compare(new, base, tolerances={"ttft_p95_ms": 100.0}).regressed  # faster is never a regression
