"""thresholds.py: precedence, pass/fail of one case and the wording of misses (pure, no pytest run)."""

from __future__ import annotations

import pytest

from pytest_rageval.evaluation.schema import EvalCase
from pytest_rageval.evaluation.thresholds import (
    ThresholdConfig,
    ThresholdError,
    find_misses,
    parse_cli_thresholds,
    parse_threshold_table,
    resolve_thresholds,
)

GOLD = [{"rel_path": "a.md"}]


def case(**fields: object) -> EvalCase:
    return EvalCase.model_validate({"id": "c", "question": "q", **fields})


def test_precedence_default_global_category_case_cli() -> None:
    global_, by_category = parse_threshold_table(
        {"mrr": 0.2, "recall_at_k": 0.5, "multi_hop": {"mrr": 0.4, "ndcg_at_k": 0.6}}, "[tool.rageval.thresholds]"
    )
    config = ThresholdConfig(global_, by_category, parse_cli_thresholds(["ndcg_at_k=0.9"]))
    hop = case(category="multi_hop", gold_supports=GOLD, thresholds={"mrr": 0.8, "precision_at_k": 0.1})
    assert resolve_thresholds(hop, config, judge=False) == {
        "recall_at_k": 0.5,
        "false_abstention": 0.0,
        "mrr": 0.8,
        "ndcg_at_k": 0.9,
        "precision_at_k": 0.1,
    }
    assert resolve_thresholds(case(gold_supports=GOLD), config, judge=True) == {
        "recall_at_k": 0.5,
        "false_abstention": 0.0,
        "mrr": 0.2,
        "ndcg_at_k": 0.9,
        "groundedness": 3.0,
        "correctness": 3.0,
    }


def test_defaults_follow_the_kind_of_case() -> None:
    empty = ThresholdConfig.empty()
    assert resolve_thresholds(case(answerable=False), empty, judge=True) == {"abstained": True, "groundedness": 3.0}
    rule = case(gold_supports=GOLD, recency_conflict_rule="cite_newer")
    assert resolve_thresholds(rule, empty, judge=False) == {
        "recall_at_k": 1.0,
        "false_abstention": 0.0,
        "conflict_rule": 1.0,
    }
    # no gold, answerable: it must still answer (a declined answerable question fails, judge on or off)
    assert resolve_thresholds(case(), empty, judge=False) == {"false_abstention": 0.0}
    assert resolve_thresholds(case(), empty, judge=True) == {
        "false_abstention": 0.0,
        "groundedness": 3.0,
        "correctness": 3.0,
    }


@pytest.mark.parametrize("judge", [False, True])
def test_a_declined_answerable_case_misses_false_abstention(judge: bool) -> None:
    thresholds = resolve_thresholds(case(gold_supports=GOLD), ThresholdConfig.empty(), judge=judge)
    declined = {"recall_at_k": 1, "abstained": True, "false_abstention": 1}
    assert [m.describe() for m in find_misses(declined, thresholds)] == ["false_abstention = 1 (needs <= 0)"]
    answered = {**declined, "abstained": False, "false_abstention": 0}
    assert find_misses(answered, thresholds) == []
    unknown = {**declined, "abstained": None, "false_abstention": None}  # no abstained field, no judge
    assert find_misses(unknown, thresholds) == []


def test_misses_compare_in_the_metric_direction_and_skip_metrics_that_do_not_apply() -> None:
    thresholds = {"mrr": 0.5, "scope_miss": 0.0, "latency_ms": 100.0, "abstained": True, "ndcg_at_k": 0.5}
    metrics = {"mrr": 0.5, "scope_miss": 1, "latency_ms": 250.0, "abstained": None, "ndcg_at_k": None}
    assert [m.describe() for m in find_misses(metrics, thresholds)] == [
        "scope_miss = 1 (needs <= 0)",
        "latency_ms = 250 (needs <= 100)",
        "abstained = not measured (needs == true)",  # unknown abstention misses; a null ndcg does not apply
    ]


def test_small_and_fractional_values_print_as_they_are() -> None:
    (miss,) = find_misses({"latency_ms": 5.005}, {"latency_ms": 0.0001})
    assert miss.describe() == "latency_ms = 5.005 (needs <= 0.0001)"
    (miss,) = find_misses({"mrr": 1 / 3}, {"mrr": 0.5})
    assert miss.describe() == "mrr = 0.333333 (needs >= 0.5)"


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["recal_at_k=1"], "--rageval-threshold: unknown metric 'recal_at_k' (did you mean 'recall_at_k'?)"),
        (["mrr"], "--rageval-threshold: expected METRIC=VALUE, got 'mrr'"),
        (["mrr=high"], "--rageval-threshold: threshold of 'mrr' must be a finite number, got 'high'"),
        (["abstained=maybe"], "--rageval-threshold: threshold of 'abstained' must be true or false, got 'maybe'"),
    ],
)
def test_bad_cli_thresholds_say_what_is_wrong(items: list[str], message: str) -> None:
    with pytest.raises(ThresholdError) as info:
        parse_cli_thresholds(items)
    assert str(info.value) == message
