"""judges/estimate.py: the --rageval-dry-run plan from hand-made eval cases."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_rageval.engine.judge_factory import DEFAULT_PRICES
from pytest_rageval.evaluation.schema import EvalCase
from pytest_rageval.judges.base import JudgeInput
from pytest_rageval.judges.estimate import COMPLETION_TOKENS, plan, usd
from pytest_rageval.judges.prompts import build_messages

GOLD: list[Any] = [{"rel_path": "docs/new.md"}, {"rel_path": "docs/old.md"}]
CASES = [
    EvalCase(
        id="a",
        question="Who proposed STIP?",
        reference_answer="The Arbitrum Foundation.",
        expected_key_facts=["Arbitrum Foundation"],
    ),
    EvalCase(id="b", question="What is the capital of Mars?", answerable=False),
    EvalCase(id="c", question="How many ARB did STIP allocate?", repeat=3),
    EvalCase(id="d", question="Skipped question?", skip="not ready"),
    EvalCase(
        id="e", question="Which deployment note is newer?", gold_supports=GOLD, recency_conflict_rule="acknowledge_both"
    ),
    EvalCase(id="f", question="Is the flaky one stable?", flaky=True),
]
METRICS = ("groundedness", "correctness")
PRICES = dict(DEFAULT_PRICES)


def test_request_counts_are_exact() -> None:
    p = plan(CASES, k=5, metrics=METRICS, judge_enabled=True, model="gpt-4o-mini", prices=PRICES)
    # runs: a 1, b 1, c 3, d skipped, e 1, f 3 (flaky)
    assert p.rag_requests == 9
    # groundedness: not for the unanswerable case (assumed to abstain); correctness: answerable only
    assert p.judge_requests == {"groundedness": 8, "correctness": 8, "conflict_ack": 1}
    assert p.total_judge_requests == 17
    assert p.skipped_cases == 1
    assert p.completion_tokens == 17 * COMPLETION_TOKENS
    head = p.lines[0]
    assert head.startswith(
        "dry run: 9 RAG requests, 17 judge requests (groundedness 8, correctness 8, conflict_ack 1), ~"
    )
    assert "with gpt-4o-mini" in head and head.endswith("; nothing was sent")
    assert any("abstained" in line and "up to 9 abstention requests" in line for line in p.lines)
    assert "1 skipped case not counted" in p.lines


def test_other_metrics_follow_applicability() -> None:
    metrics = ("faithfulness", "completeness", "reasoning_quality")
    p = plan(CASES, k=3, metrics=metrics, judge_enabled=True, model="gpt-4o-mini", prices=PRICES)
    assert p.judge_requests == {"faithfulness": 8, "completeness": 8, "reasoning_quality": 8, "conflict_ack": 1}


def test_prompt_tokens_are_prompt_length_over_four() -> None:
    case = CASES[0]
    p = plan(
        [case],
        k=2,
        metrics=("groundedness",),
        judge_enabled=True,
        model="gpt-4o-mini",
        prices=PRICES,
        assumed_chunk_chars=300,
        assumed_answer_chars=100,
    )
    inp = JudgeInput(
        question=case.question,
        answer="y" * 100,
        contexts=("z" * 300, "z" * 300),
        context_ids=("chunk-1", "chunk-2"),
        reference_answer=case.reference_answer,
        key_facts=tuple(case.expected_key_facts),
    )
    expected = math.ceil(sum(len(m["content"]) for m in build_messages("groundedness", inp)) / 4)
    assert p.prompt_tokens == expected


def test_tokens_grow_with_k_and_cost_is_tokens_times_price() -> None:
    small = plan(CASES, k=2, metrics=METRICS, judge_enabled=True, model="gpt-4o-mini", prices=PRICES)
    large = plan(CASES, k=8, metrics=METRICS, judge_enabled=True, model="gpt-4o-mini", prices=PRICES)
    assert 0 < small.prompt_tokens < large.prompt_tokens
    # each extra chunk adds about 1000 / 4 tokens to every request that reads context
    with_context = 8 + 8 + 1  # correctness reads the context too
    assert large.prompt_tokens - small.prompt_tokens >= with_context * 6 * 250
    prompt_price, completion_price = PRICES["gpt-4o-mini"]
    for p in (small, large):
        expected = (p.prompt_tokens * prompt_price + p.completion_tokens * completion_price) / 1_000_000
        assert p.cost_usd == pytest.approx(expected)
        assert p.cost_usd > 0
        assert f"~{usd(p.cost_usd)} with gpt-4o-mini" in p.lines[0]
    assert large.cost_usd > small.cost_usd


def test_answer_and_chunk_size_assumptions_change_tokens() -> None:
    base = plan(CASES, k=4, metrics=METRICS, judge_enabled=True, model="gpt-4o", prices=PRICES)
    longer = plan(
        CASES,
        k=4,
        metrics=METRICS,
        judge_enabled=True,
        model="gpt-4o",
        prices=PRICES,
        assumed_chunk_chars=2000,
        assumed_answer_chars=1200,
    )
    assert longer.prompt_tokens > base.prompt_tokens
    assert longer.judge_requests == base.judge_requests


def test_unknown_model_has_no_cost() -> None:
    p = plan(CASES, k=5, metrics=METRICS, judge_enabled=True, model="my-local-llama", prices=PRICES)
    assert p.cost_usd == 0.0
    assert p.prompt_tokens > 0
    assert any(line.startswith("no price for my-local-llama") for line in p.lines)
    assert "$" not in p.lines[0]


def test_lexical_judge_counts_requests_but_costs_nothing() -> None:
    p = plan(CASES, k=5, metrics=(*METRICS, "reasoning_quality"), judge_enabled=True, model=None, prices=PRICES)
    # the lexical judge does not score reasoning_quality
    assert p.judge_requests == {"groundedness": 8, "correctness": 8, "conflict_ack": 1}
    assert p.cost_usd == 0.0 and p.prompt_tokens == 0 and p.completion_tokens == 0
    assert "lexical judge: local, no cost" in p.lines
    explicit = plan(CASES, k=5, metrics=METRICS, judge_enabled=True, model="gpt-4o", prices=PRICES, lexical=True)
    assert explicit.cost_usd == 0.0 and "lexical judge: local, no cost" in explicit.lines


def test_no_judge_counts_rag_requests_only() -> None:
    p = plan(CASES, k=5, metrics=METRICS, judge_enabled=False, model="gpt-4o-mini", prices=PRICES)
    assert p.rag_requests == 9
    assert p.judge_requests == {} and p.prompt_tokens == 0 and p.cost_usd == 0.0
    assert (
        p.lines[0] == "dry run: 9 RAG requests, 0 judge requests (no judge: retrieval metrics only); nothing was sent"
    )


def test_empty_eval_set() -> None:
    p = plan([], k=5, metrics=METRICS, judge_enabled=True, model="gpt-4o-mini", prices=PRICES)
    assert (p.rag_requests, p.judge_requests, p.prompt_tokens, p.cost_usd) == (0, {}, 0, 0.0)


@pytest.mark.parametrize(
    "cost, shown", [(0.0, "$0"), (0.01345, "$0.013"), (0.5, "$0.50"), (12.345, "$12.35"), (0.0000123, "$0.000012")]
)
def test_usd_format(cost: float, shown: str) -> None:
    assert usd(cost) == shown


def test_a_conversation_counts_each_turn() -> None:
    chat = EvalCase.model_validate(
        {
            "id": "chat",
            "repeat": 2,
            "turns": [{"question": "What is STEP?"}, {"question": "Is it over?", "answerable": False}],
        }
    )
    p = plan([chat], k=5, metrics=METRICS, judge_enabled=True, model="gpt-4o-mini", prices=PRICES)
    assert p.rag_requests == 4  # two turns, two runs each
    assert p.judge_requests == {"groundedness": 2, "correctness": 2}  # the unanswerable turn is assumed to abstain
