"""aggregate.py: CaseRecords -> metrics.json aggregates, with hand-computed numbers."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from typing import Any

from pytest_rageval import safejson
from pytest_rageval.evaluation import registry
from pytest_rageval.gate.aggregate import Aggregator, aggregate, percentile

SCALAR_KEYS = [
    *registry.aggregates("avg"),
    *registry.aggregates("rate"),
    "abstention_accuracy",
    "hallucination_rate_unanswerable",
    "false_abstention_rate",
]


def assert_close(actual: Any, expected: Any, path: str = "") -> None:
    """Deep equality; floats compared with a tiny tolerance."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        assert set(actual) == set(expected), f"{path}: keys {sorted(set(actual) ^ set(expected))}"
        for key in expected:
            assert_close(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, float):
        assert isinstance(actual, (int, float)) and not isinstance(actual, bool), f"{path}: {actual!r}"
        assert math.isclose(actual, expected, rel_tol=1e-12, abs_tol=1e-12), f"{path}: {actual!r} != {expected!r}"
    else:
        assert actual == expected and type(actual) is type(expected), f"{path}: {actual!r} != {expected!r}"


def group(n: int, passed: int, failed: int, errors: int, **values: float) -> dict[str, Any]:
    """A by_* entry: every scalar None unless given."""
    out: dict[str, Any] = {key: None for key in SCALAR_KEYS}
    out.update(values)
    out.update(n=n, passed=passed, failed=failed, errors=errors)
    return out


def rec(
    key: str, outcome: str, answerable: bool = True, category: str = "factual", tags: Iterable[str] = (), **extra: Any
) -> dict[str, Any]:
    record = {
        "key": f"s.jsonl::{key}",
        "test_case_id": key,
        "file": "s.jsonl",
        "line": 1,
        "category": category,
        "tags": list(tags),
        "answerable": answerable,
        "outcome": outcome,
        "metrics": {},
        "error": None,
        "judge_cache": {"hits": 0, "misses": 0},
        "cost": {"judge_tokens": 0, "judge_cost_usd": 0.0},
    }
    record.update(extra)
    return record


def records() -> list[dict[str, Any]]:
    retrieval_null = dict.fromkeys(
        ["recall_at_k", "recall_all_at_k", "mrr", "precision_at_k", "ndcg_at_k", "scope_miss", "attribution_hit"]
    )
    return [
        rec(
            "a1",
            "passed",
            tags=["work"],
            judge_attempted=["groundedness", "correctness"],
            judge_cache={"hits": 1, "misses": 1},
            cost={"judge_tokens": 100, "judge_cost_usd": 0.001},
            metrics={
                "recall_at_k": 1,
                "recall_all_at_k": 1,
                "mrr": 1.0,
                "precision_at_k": 0.4,
                "ndcg_at_k": 1.0,
                "scope_miss": 0,
                "attribution_hit": 1,
                "conflict_rule": None,
                "abstained": False,
                "false_abstention": 0,
                "groundedness": 4,
                "correctness": 5,
                "faithfulness": None,
                "latency_ms": 100.0,
            },
        ),
        rec(
            "a2",
            "xfailed",
            tags=["work", "hard", "work"],
            judge_attempted=["groundedness", "correctness"],
            judge_cache={"hits": 0, "misses": 2},
            cost={"judge_tokens": 50, "judge_cost_usd": 0.0005},
            metrics={
                "recall_at_k": 0,
                "recall_all_at_k": 0,
                "mrr": 0.0,
                "precision_at_k": 0.0,
                "ndcg_at_k": 0.0,
                "scope_miss": 1,
                "attribution_hit": 0,
                "abstained": False,
                "false_abstention": 0,
                "groundedness": 2,
                "correctness": None,
                "latency_ms": 200.0,
            },
        ),
        # no judge_attempted: the non-null judge metric counts as attempted and scored
        rec(
            "a3",
            "passed",
            category="multi_hop",
            tags=["personal"],
            flaky=True,
            runs=3,
            judge_cache={"hits": 2, "misses": 0},
            metrics={
                "recall_at_k": 1,
                "recall_all_at_k": 0,
                "mrr": 0.5,
                "precision_at_k": 0.2,
                "ndcg_at_k": 0.5,
                "scope_miss": None,
                "attribution_hit": 1,
                "conflict_rule": 1,
                "abstained": True,
                "false_abstention": 1,
                "groundedness": None,
                "correctness": 1,
                "latency_ms": 300.0,
            },
        ),
        rec(
            "u1",
            "xpassed",
            answerable=False,
            category="general",
            tags=["work"],
            judge_attempted=[],
            metrics={
                **retrieval_null,
                "abstained": True,
                "groundedness": None,
                "correctness": None,
                "latency_ms": 400.0,
            },
        ),
        rec(
            "u2",
            "failed",
            answerable=False,
            category="general",
            empty_response=True,
            judge_attempted=["groundedness"],
            metrics={**retrieval_null, "abstained": False, "groundedness": 1, "latency_ms": 500.0},
        ),
        # errored: left out of averages and latency, counted in error/timeout rates and coverage attempts
        rec(
            "e1",
            "error",
            tags=["work"],
            error={"kind": "timeout", "message": "read timed out"},
            judge_attempted=["groundedness", "correctness"],
            cost={"judge_tokens": 10, "judge_cost_usd": 0.0001},
            metrics={"recall_at_k": 0, "mrr": 0.0, "abstained": True, "latency_ms": 60000.0},
        ),
        rec(
            "e2",
            "error",
            answerable=False,
            category="general",
            error={"kind": "http", "message": "500"},
            metrics={"abstained": True},
        ),
        # skipped: counts only in skipped (and cases)
        rec(
            "sk",
            "skipped",
            tags=["work"],
            judge_attempted=["groundedness"],
            metrics={"recall_at_k": 0, "mrr": 0.0, "latency_ms": 1.0},
        ),
        # an invalid eval-set line: only invalid_lines
        rec(
            "line9",
            "error",
            invalid_line=True,
            error={"kind": "other", "message": "bad line"},
            judge_cache={"hits": 5, "misses": 5},
            cost={"judge_tokens": 999, "judge_cost_usd": 9.0},
            metrics={"recall_at_k": 0},
        ),
        # scored but without latency, not tagged
        rec("u3", "passed", answerable=False, category="adversarial", metrics={"abstained": True}),
    ]


EXPECTED_AGGREGATE = {
    "recall_at_k_avg": 2 / 3,
    "recall_all_at_k_avg": 1 / 3,
    "mrr_avg": 0.5,
    "precision_at_k_avg": 0.2,
    "ndcg_at_k_avg": 0.5,
    "groundedness_avg": 7 / 3,
    "correctness_avg": 3.0,
    "faithfulness_avg": None,
    "relevancy_avg": None,
    "completeness_avg": None,
    "reasoning_quality_avg": None,
    "scope_miss_rate": 0.5,
    "attribution_hit_rate": 2 / 3,
    "conflict_rule_rate": 1.0,
    "abstention_accuracy": 2 / 3,
    "hallucination_rate_unanswerable": 1 / 3,
    "false_abstention_rate": 1 / 3,
    "latency": {"p50_ms": 300.0, "p95_ms": 480.0, "total_ms": 1500.0},
    "cost": {"judge_total_tokens": 160, "judge_total_usd": 0.0016},
    "operational_metrics": {"error_rate": 0.25, "timeout_rate": 0.125, "empty_response_rate": 0.125},
    "judge_cache": {"hits": 3, "misses": 3},
    "judge_coverage": {
        "correctness": {"scored": 2, "attempted": 4, "coverage": 0.5},
        "groundedness": {"scored": 3, "attempted": 4, "coverage": 0.75},
    },
}


def test_counts() -> None:
    result = aggregate(records())
    counts = {
        key: result[key]
        for key in (
            "total_tests",
            "passed",
            "failed",
            "errors",
            "skipped",
            "xfailed",
            "xpassed",
            "invalid_lines",
            "answerable_tests",
            "unanswerable_tests",
            "flaky",
        )
    }
    assert counts == {
        "total_tests": 6,  # passed 3 + failed 1 + errors 2 (xfailed and xpassed are their own counts, as in pytest)
        "passed": 3,  # a1, a3, u3
        "failed": 1,  # u2
        "errors": 2,  # e1, e2 (not the invalid line)
        "skipped": 1,
        "xfailed": 1,
        "xpassed": 1,
        "invalid_lines": 1,
        "answerable_tests": 4,  # a1, a2, a3, e1
        "unanswerable_tests": 4,  # u1, u2, u3, e2
        "flaky": 1,
    }


def test_aggregate_metrics_every_key() -> None:
    # every metric of the registry has its aggregate; one added later (no record here has it) is null
    added = {
        key: None
        for key in (*registry.aggregates("avg"), *registry.aggregates("rate"))
        if key not in EXPECTED_AGGREGATE
    }
    assert_close(aggregate(records())["aggregate_metrics"], {**EXPECTED_AGGREGATE, **added})


def test_result_keys() -> None:
    assert list(aggregate(records())) == [
        "aggregate_metrics",
        "by_tag",
        "by_category",
        "by_answerable",
        "total_tests",
        "passed",
        "failed",
        "errors",
        "skipped",
        "xfailed",
        "xpassed",
        "invalid_lines",
        "known_failures",
        "fixed_since_baseline",
        "answerable_tests",
        "unanswerable_tests",
        "flaky",
        "repeats",
        "judge_coverage",
        "cases",
    ]
    result = aggregate(records())
    assert (
        result["judge_coverage"]
        == result["aggregate_metrics"]["judge_coverage"]
        == EXPECTED_AGGREGATE["judge_coverage"]
    )


def test_by_answerable() -> None:
    result = aggregate(records())["by_answerable"]
    assert_close(
        result,
        {
            "answerable": group(
                4,
                2,
                0,
                1,
                xfailed=1,
                recall_at_k_avg=2 / 3,
                recall_all_at_k_avg=1 / 3,
                mrr_avg=0.5,
                precision_at_k_avg=0.2,
                ndcg_at_k_avg=0.5,
                groundedness_avg=3.0,
                correctness_avg=3.0,
                scope_miss_rate=0.5,
                attribution_hit_rate=2 / 3,
                conflict_rule_rate=1.0,
                false_abstention_rate=1 / 3,
            ),
            "unanswerable": group(
                4,
                1,
                1,
                1,
                xpassed=1,
                groundedness_avg=1.0,
                abstention_accuracy=2 / 3,
                hallucination_rate_unanswerable=1 / 3,
            ),
        },
    )


def test_by_category() -> None:
    result = aggregate(records())["by_category"]
    assert list(result) == ["adversarial", "factual", "general", "multi_hop"]
    assert_close(
        result,
        {
            "factual": group(
                3,
                1,
                0,
                1,
                xfailed=1,
                recall_at_k_avg=0.5,
                recall_all_at_k_avg=0.5,
                mrr_avg=0.5,
                precision_at_k_avg=0.2,
                ndcg_at_k_avg=0.5,
                groundedness_avg=3.0,
                correctness_avg=5.0,
                scope_miss_rate=0.5,
                attribution_hit_rate=0.5,
                false_abstention_rate=0.0,
            ),
            "multi_hop": group(
                1,
                1,
                0,
                0,
                recall_at_k_avg=1.0,
                recall_all_at_k_avg=0.0,
                mrr_avg=0.5,
                precision_at_k_avg=0.2,
                ndcg_at_k_avg=0.5,
                correctness_avg=1.0,
                attribution_hit_rate=1.0,
                conflict_rule_rate=1.0,
                false_abstention_rate=1.0,
            ),
            "general": group(
                3,
                0,
                1,
                1,
                xpassed=1,
                groundedness_avg=1.0,
                abstention_accuracy=0.5,
                hallucination_rate_unanswerable=0.5,
            ),
            "adversarial": group(1, 1, 0, 0, abstention_accuracy=1.0, hallucination_rate_unanswerable=0.0),
        },
    )


def test_by_tag() -> None:
    result = aggregate(records())["by_tag"]
    assert list(result) == ["hard", "personal", "work"]
    assert_close(
        result["work"],
        group(
            4,
            1,
            0,
            1,
            xfailed=1,
            xpassed=1,
            recall_at_k_avg=0.5,
            recall_all_at_k_avg=0.5,
            mrr_avg=0.5,
            precision_at_k_avg=0.2,
            ndcg_at_k_avg=0.5,
            groundedness_avg=3.0,
            correctness_avg=5.0,
            scope_miss_rate=0.5,
            attribution_hit_rate=0.5,
            abstention_accuracy=1.0,
            hallucination_rate_unanswerable=0.0,
            false_abstention_rate=0.0,
        ),
    )
    # "work" listed twice on a2 counts once
    assert_close(
        result["hard"],
        group(
            1,
            0,
            0,
            0,
            xfailed=1,
            recall_at_k_avg=0.0,
            recall_all_at_k_avg=0.0,
            mrr_avg=0.0,
            precision_at_k_avg=0.0,
            ndcg_at_k_avg=0.0,
            groundedness_avg=2.0,
            scope_miss_rate=1.0,
            attribution_hit_rate=0.0,
            false_abstention_rate=0.0,
        ),
    )
    assert result["personal"]["n"] == 1 and result["personal"]["false_abstention_rate"] == 1.0


def test_cases() -> None:
    cases = aggregate(records())["cases"]
    assert list(cases) == sorted(cases)
    assert set(cases) == {f"s.jsonl::{k}" for k in ("a1", "a2", "a3", "u1", "u2", "u3", "e1", "e2", "sk")}
    assert cases["s.jsonl::e1"] == {
        "outcome": "error",
        "metrics": {"recall_at_k": 0, "mrr": 0.0, "abstained": True, "latency_ms": 60000.0},
        "category": "factual",
        "tags": ["work"],
        "answerable": True,
        "test_case_id": "e1",
        "error_kind": "timeout",  # the gate pairs timeout and empty-response rates per case
    }
    assert cases["s.jsonl::u2"]["empty_response"] is True and "empty_response" not in cases["s.jsonl::a1"]
    assert "error_kind" not in cases["s.jsonl::a1"]
    assert cases["s.jsonl::a2"]["outcome"] == "xfailed"
    assert cases["s.jsonl::u1"]["answerable"] is False


def test_errored_cases_left_out_of_averages_but_in_error_rate() -> None:
    result = aggregate(
        [
            rec("a", "passed", metrics={"recall_at_k": 1, "mrr": 1.0, "abstained": True}),
            rec("b", "error", metrics={"recall_at_k": 0, "mrr": 0.0, "abstained": True}),
        ]
    )
    agg = result["aggregate_metrics"]
    assert agg["recall_at_k_avg"] == 1.0 and agg["mrr_avg"] == 1.0
    assert agg["operational_metrics"]["error_rate"] == 0.5
    # false abstention: abstained answerable / answerable cases that did not error
    assert agg["false_abstention_rate"] == 1.0
    assert result["by_answerable"]["answerable"]["errors"] == 1


def test_false_abstention_denominator() -> None:
    result = aggregate(
        [
            rec("a", "passed", metrics={"abstained": False}),
            rec("b", "failed", metrics={"abstained": True}),
            rec("c", "passed", metrics={"abstained": False}),
            rec("d", "passed", metrics={"abstained": False}),
            rec("e", "error", metrics={"abstained": True}),
            rec("f", "skipped", metrics={"abstained": True}),
            rec("u", "passed", answerable=False, metrics={"abstained": True}),
        ]
    )
    assert result["aggregate_metrics"]["false_abstention_rate"] == 0.25
    assert result["aggregate_metrics"]["abstention_accuracy"] == 1.0
    assert result["aggregate_metrics"]["hallucination_rate_unanswerable"] == 0.0


def test_no_applicable_case_is_none() -> None:
    result = aggregate([rec("u", "passed", answerable=False, metrics={"abstained": None, "latency_ms": None})])
    agg = result["aggregate_metrics"]
    for key in SCALAR_KEYS:
        assert agg[key] is None, key
    assert agg["latency"] == {"p50_ms": None, "p95_ms": None, "total_ms": None}
    assert agg["judge_coverage"] == {}
    assert agg["operational_metrics"] == {"error_rate": 0.0, "timeout_rate": 0.0, "empty_response_rate": 0.0}


def test_empty_run() -> None:
    result = Aggregator().result()
    assert result["total_tests"] == 0 and result["cases"] == {}
    assert result["by_tag"] == {} and result["by_category"] == {}
    assert result["by_answerable"]["answerable"] == group(0, 0, 0, 0)
    agg = result["aggregate_metrics"]
    assert agg["operational_metrics"] == {"error_rate": None, "timeout_rate": None, "empty_response_rate": None}
    assert agg["cost"] == {"judge_total_tokens": 0, "judge_total_usd": 0.0}
    assert agg["judge_cache"] == {"hits": 0, "misses": 0}
    assert all(agg[key] is None for key in SCALAR_KEYS)


def test_only_invalid_lines() -> None:
    result = aggregate([rec("line1", "error", invalid_line=True), rec("line2", "error", invalid_line=True)])
    assert result["invalid_lines"] == 2
    assert result["total_tests"] == 0 and result["errors"] == 0 and result["cases"] == {}


def test_same_numbers_in_any_order() -> None:
    rng = random.Random(7)
    many = []
    for i in range(300):
        many.append(
            rec(
                f"c{i}",
                rng.choice(["passed", "failed", "error"]),
                answerable=rng.random() < 0.8,
                tags=rng.sample(["x", "y", "z"], 2),
                metrics={
                    "mrr": rng.choice([0.0, 1 / 3, 0.1, 0.7]),
                    "groundedness": rng.random() * 5,
                    "abstained": rng.random() < 0.3,
                    "latency_ms": rng.random() * 1e3,
                },
                cost={"judge_tokens": 3, "judge_cost_usd": rng.random() / 1000},
            )
        )
    first = aggregate(many)
    for _ in range(3):
        rng.shuffle(many)
        assert aggregate(many) == first


def test_latency_falls_back_to_latency_block() -> None:
    result = aggregate([rec("a", "passed", metrics={}, latency={"total_ms": 42.0})])
    assert result["aggregate_metrics"]["latency"] == {"p50_ms": 42.0, "p95_ms": 42.0, "total_ms": 42.0}


def test_percentile_linear() -> None:
    values = [100.0, 200.0, 300.0, 400.0, 500.0]
    assert percentile(values, 50) == 300.0
    assert percentile(values, 95) == 480.0
    assert percentile(values, 0) == 100.0 and percentile(values, 100) == 500.0
    assert percentile([1.0, 2.0], 25) == 1.25
    assert percentile([], 50) is None


def test_coverage_counts_each_verdict_under_the_metric_it_feeds() -> None:
    # The abstention classifier feeds `abstained`, the acknowledge_both check `conflict_rule`.
    result = aggregate(
        [
            rec(
                "ack",
                "passed",
                judge_attempted=["abstention", "groundedness", "correctness", "conflict_ack"],
                metrics={"abstained": False, "groundedness": 4, "correctness": 4, "conflict_rule": 1},
            ),
            rec(
                "mars",
                "passed",
                answerable=False,
                judge_attempted=["abstention"],
                metrics={"abstained": True, "groundedness": None, "correctness": None},
            ),
            rec("down", "error", judge_attempted=["abstention", "groundedness"], metrics={"abstained": False}),
        ]
    )
    assert result["judge_coverage"] == {
        "abstained": {"scored": 2, "attempted": 3, "coverage": 2 / 3},
        "conflict_rule": {"scored": 1, "attempted": 1, "coverage": 1.0},
        "correctness": {"scored": 1, "attempted": 1, "coverage": 1.0},
        "groundedness": {"scored": 1, "attempted": 2, "coverage": 0.5},
    }


def test_coverage_without_an_attempt_list_counts_the_verdicts_held_under_their_metric() -> None:
    # A record cut short before it listed its attempts (a later run failed) still holds its verdicts, by verdict
    # name: the abstention classifier's counts under abstained, like every other path (before: nothing counted).
    verdict = {"score": None, "label": True, "reasoning": ""}
    result = aggregate(
        [
            rec(
                "cut",
                "error",
                answerable=False,
                error={"kind": "http", "message": "400"},
                judge={"abstention": verdict, "groundedness": {"score": 4.0, "reasoning": ""}},
                metrics={},
            ),
            rec(
                "old", "passed", metrics={"groundedness": 4, "abstained": False}
            ),  # no verdicts stored: the scored metric
        ]
    )
    assert result["judge_coverage"] == {
        "abstained": {"scored": 0, "attempted": 1, "coverage": 0.0},
        "groundedness": {"scored": 1, "attempted": 2, "coverage": 0.5},
    }


def test_a_repeated_case_that_mixes_abstaining_and_answering() -> None:
    from pytest_rageval.engine.evaluate import _combine

    abstained = {"recall_at_k": 1, "abstained": True, "false_abstention": 1, "latency_ms": 10.0}
    answered = {
        "recall_at_k": 1,
        "abstained": False,
        "false_abstention": 0,
        "latency_ms": 20.0,
        "groundedness": 4,
        "correctness": 3,
    }
    metrics = _combine([abstained, answered, answered], ("groundedness", "correctness", "faithfulness"))
    # every metric any run scored is kept (mean of the runs that scored it); a metric no run scored is null
    assert metrics == {
        "recall_at_k": 1.0,
        "abstained": False,
        "false_abstention": 1 / 3,
        "latency_ms": 50 / 3,
        "groundedness": 4,
        "correctness": 3,
        "faithfulness": None,
    }
    assert _combine([answered])["recall_at_k"] == 1 and isinstance(_combine([answered])["recall_at_k"], int)
    # attempted once per case (any run), scored when the combined value is not null
    result = aggregate(
        [
            rec(
                "flaky",
                "passed",
                flaky=True,
                runs=3,
                metrics=metrics,
                judge_attempted=["abstention", "groundedness", "correctness", "faithfulness"],
            )
        ]
    )
    coverage = result["judge_coverage"]
    assert coverage["groundedness"] == coverage["abstained"] == {"scored": 1, "attempted": 1, "coverage": 1.0}
    assert coverage["faithfulness"] == {"scored": 0, "attempted": 1, "coverage": 0.0}


def test_cases_are_read_as_new_dicts_equal_to_what_metrics_json_holds() -> None:
    result = aggregate(records())
    cases = result["cases"]
    first = cases["s.jsonl::a1"]
    first["metrics"]["mrr"] = -1.0  # a reader's change stays with what it read
    first["tags"].append("changed")
    again = cases["s.jsonl::a1"]
    assert again["metrics"]["mrr"] != -1.0 and "changed" not in again["tags"]
    plain = {key: cases[key] for key in cases}
    assert cases == plain and plain == cases and len(cases) == len(plain)
    # written to metrics.json as a plain object, the same text as the dicts give
    assert safejson.dumps({**result, "cases": cases}, indent=2) == safejson.dumps({**result, "cases": plain}, indent=2)
