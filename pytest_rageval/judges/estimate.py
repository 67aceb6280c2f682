"""The ``--rageval-dry-run`` plan: requests, tokens and cost a run would make.

Pure: nothing is sent. RAG requests are one per case run. Judge requests are
``judging.requests`` with abstention assumed from the eval set (answerable ->
not abstained, unanswerable -> abstained): the judge metrics that apply, plus
``conflict_ack`` for ``acknowledge_both`` cases; the abstention classifier is not
counted (it runs only when the RAG gives no ``abstained`` field, which a dry run cannot know).
Prompt tokens are ``len(prompt text) / 4`` of the real prompt built around a
placeholder answer and K placeholder chunks; completions are ~150 tokens each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.schema import EvalCase

from . import prompts
from .base import JudgeInput
from .judging import requests

__all__ = ["CHARS_PER_TOKEN", "COMPLETION_TOKENS", "Plan", "plan", "usd"]

CHARS_PER_TOKEN = 4
#: Assumed completion tokens of one judge answer.
COMPLETION_TOKENS = 150
_FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit "


@dataclass
class Plan:
    """What a run would request; ``lines`` is the human summary the plugin prints."""

    rag_requests: int
    judge_requests: dict[str, int]
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    lines: list[str] = field(default_factory=list)
    skipped_cases: int = 0

    @property
    def total_judge_requests(self) -> int:
        return sum(self.judge_requests.values())


def _filler(chars: int) -> str:
    """Placeholder text of exactly ``chars`` characters."""
    if chars <= 0:
        return ""
    return (_FILLER * (chars // len(_FILLER) + 1))[:chars]


def _tokens(messages: Sequence[Mapping[str, str]]) -> int:
    return math.ceil(sum(len(m["content"]) for m in messages) / CHARS_PER_TOKEN)


def usd(cost: float) -> str:
    """``$0.013``-style: two significant digits below a dollar, cents above."""
    if cost <= 0:
        return "$0"
    if cost >= 0.995:
        return f"${cost:,.2f}"
    decimals = max(2, 1 - math.floor(math.log10(cost)))
    return f"${cost:.{decimals}f}"


def _judge_metrics(case: EvalCase, metrics: Sequence[str], lexical: bool) -> list[str]:
    """The judge requests of one run of ``case`` (abstention assumed from ``answerable``)."""
    scored = registry.lexical_scorers() if lexical else None  # what the lexical judge scores (judges/lexical.py)
    return requests(dict.fromkeys(metrics), case, not case.answerable, lambda m: scored is None or m in scored)


def plan(
    cases: Sequence[EvalCase],
    *,
    k: int,
    metrics: Sequence[str],
    judge_enabled: bool,
    model: str | None,
    prices: Mapping[str, tuple[float, float]],
    assumed_chunk_chars: int = 1000,
    assumed_answer_chars: int = 600,
    lexical: bool | None = None,
) -> Plan:
    """The dry-run plan of ``cases`` (skipped ones excluded).

    ``model`` is the LLM judge's model; ``None`` with a judge means the lexical
    judge (or pass ``lexical=True``): its requests are counted but cost nothing.
    ``prices`` maps a model to USD per 1M (prompt, completion) tokens.
    """
    is_lexical = bool(lexical) if lexical is not None else model is None
    active = [asked for c in cases if c.skip is None for asked in c.asked()]  # a conversation: each turn
    skipped = sum(c.skip is not None for c in cases)
    rag = sum(c.runs for c in active)
    answer = _filler(assumed_answer_chars)
    contexts = tuple(_filler(assumed_chunk_chars) for _ in range(max(k, 0)))
    requests: dict[str, int] = {}
    prompt_tokens = 0
    classifier_runs = 0
    if judge_enabled:
        for case in active:
            wanted = _judge_metrics(case, metrics, is_lexical)
            classifier_runs += case.runs
            inp = JudgeInput(
                question=case.question,
                answer=answer,
                contexts=contexts,
                context_ids=tuple(f"chunk-{i}" for i in range(1, len(contexts) + 1)),
                reference_answer=case.reference_answer,
                key_facts=tuple(case.expected_key_facts),
            )
            for metric in wanted:
                requests[metric] = requests.get(metric, 0) + case.runs
                if not is_lexical:
                    prompt_tokens += _tokens(prompts.build_messages(metric, inp)) * case.runs
    total = sum(requests.values())
    completion_tokens = 0 if is_lexical else total * COMPLETION_TOKENS
    cost = 0.0
    price = prices.get(model) if (judge_enabled and not is_lexical and model) else None
    if price is not None:
        cost = (prompt_tokens * float(price[0]) + completion_tokens * float(price[1])) / 1_000_000

    judge_part = f"{total:,} judge requests"
    if requests:
        judge_part += " (" + ", ".join(f"{m} {n:,}" for m, n in requests.items()) + ")"
    head = f"dry run: {rag:,} RAG requests, {judge_part}"
    if not judge_enabled:
        head += " (no judge: retrieval metrics only)"
    elif is_lexical:
        head += ", no LLM tokens"
    else:
        head += f", ~{prompt_tokens:,} prompt + {completion_tokens:,} completion tokens"
        head += f", ~{usd(cost)} with {model}" if price is not None else f" with {model}"
    lines = [head + "; nothing was sent"]
    if judge_enabled:
        if is_lexical:
            lines.append("lexical judge: local, no cost")
        elif price is None:
            lines.append(f"no price for {model}: cost not estimated (add it under [tool.rageval.judge.prices])")
        else:
            lines.append(
                f"prices for {model}: ${float(price[0]):g} / ${float(price[1]):g} per 1M prompt / completion tokens"
            )
        lines.append(
            "assumes the RAG reports `abstained` and answerable cases do not abstain; a RAG without that field "
            f"adds up to {classifier_runs:,} abstention requests (one per case run)"
        )
        if not is_lexical:
            lines.append(
                f"tokens estimated as characters / {CHARS_PER_TOKEN} with {k} retrieved chunks of "
                f"~{assumed_chunk_chars:,} characters, answers of ~{assumed_answer_chars:,} characters and "
                f"~{COMPLETION_TOKENS} completion tokens per request; retries, re-asks and judge-cache hits "
                "are not counted"
            )
    if skipped:
        lines.append(f"{skipped} skipped case{'s' if skipped != 1 else ''} not counted")
    return Plan(rag, requests, prompt_tokens, completion_tokens, cost, lines, skipped)
