"""Judge one case: which judge metrics apply, one request each, verdicts into the record.

Pure apart from the judge it is given: no pytest. Exactly one judge call per
judge metric per case, whatever K is. Which verdicts a case asks for is the
metric registry's (:func:`registry.asks`): the abstention classifier, first and
only when the response has no ``abstained`` field, then the configured judge
metrics that apply, then the other classifiers (the ``acknowledge_both`` check).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.schema import Chunk, EvalCase, RagResponse

from .base import SCALES, Judge, JudgeError, JudgeInput, Verdict


@dataclass
class Budget:
    """Spending cap for judge calls in this process (``--rageval-max-judge-cost``)."""

    limit_usd: float | None = None
    spent_usd: float = 0.0

    def check(self, metric: str) -> None:
        if self.limit_usd is not None and self.spent_usd >= self.limit_usd:
            raise JudgeError(
                metric, f"judge budget of ${self.limit_usd:g} is spent (--rageval-max-judge-cost); not judged"
            )

    def add(self, spent: Verdict | JudgeError) -> None:
        """Count what a call spent, whether it gave a verdict or failed after paid re-asks."""
        self.spent_usd += spent.cost_usd


@dataclass
class JudgeSetup:
    """The judge in use, the metrics it scores, and whether a cache sits in front of it."""

    judge: Judge
    metrics: tuple[str, ...]
    cached: bool = False
    budget: Budget = field(default_factory=Budget)


def stopped_answering(judge: Judge) -> tuple[str, int] | None:
    """(endpoint, verdicts it gave) when ``judge`` (or the judge a cache wraps) stopped answering mid-run."""
    found = getattr(getattr(judge, "inner", judge), "stopped_answering", None)
    return found if isinstance(found, tuple) else None


@dataclass
class CaseVerdicts:
    """What judging one case produced."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    attempted: list[str] = field(default_factory=list)
    abstained: bool | None = None  # from the classifier, when it ran
    error: JudgeError | None = None
    failures: list[JudgeError] = field(default_factory=list)  # every failed call, for tokens and cost

    def spent(self, *, cached: bool) -> dict[str, Any]:
        """Tokens, cost and cache hits/misses of this judging; a failed call is a paid cache miss."""
        tokens, usd, hits, misses = 0, 0.0, 0, 0
        calls: list[Verdict | JudgeError] = [*self.verdicts.values(), *self.failures]
        for call in calls:
            hit = isinstance(call, Verdict) and call.cached
            if not hit:  # a cached verdict cost nothing this run
                tokens += call.prompt_tokens + call.completion_tokens
                usd += call.cost_usd
            hits, misses = hits + hit, misses + (not hit)
        return {
            "judge_tokens": tokens,
            "judge_cost_usd": usd,
            "hits": hits if cached else 0,
            "misses": misses if cached else 0,
        }

    def scores(self) -> dict[str, float | None]:
        """The judge metrics' scores, as a record's ``metrics`` holds them (classifications feed other metrics)."""
        judged = registry.metric_names("judge")
        return {metric: verdict.score for metric, verdict in self.verdicts.items() if metric in judged}

    @property
    def acknowledges_conflict(self) -> bool | None:
        """The conflict_ack verdict's answer; None when it was not asked."""
        ack = self.verdicts.get("conflict_ack")
        return ack.label if ack is not None else None


def judge_input(case: EvalCase, response: RagResponse, top: Sequence[Chunk]) -> JudgeInput:
    """The judge's view of a case: question, answer, top-K texts in rank order, reference, key facts."""
    return JudgeInput(
        question=case.question,
        answer=response.answer,
        contexts=tuple(c.text or "" for c in top),
        context_ids=tuple(c.chunk_id for c in top),
        reference_answer=case.reference_answer,
        key_facts=tuple(case.expected_key_facts),
    )


def applicable(metric: str, case: EvalCase, abstained: bool | None) -> bool:
    """Whether a judge metric applies: its registry entry's ``applies_to``."""
    entry = registry.get(metric)
    return entry is not None and entry.kind == "judge" and registry.applies(entry.applies_to, case, abstained)


def requests(
    metrics: Iterable[str], case: EvalCase, abstained: bool | None, supports: Callable[[str], bool]
) -> list[str]:
    """The verdicts asked for on ``case`` whose abstention is ``abstained``: the configured judge metrics that
    apply, then the classifiers asked for on it, each where ``supports`` says the judge scores it. With
    ``abstained`` known the abstention classifier is not among them (:func:`judge_case` asks it first)."""
    wanted = [m for m in metrics if applicable(m, case, abstained) and supports(m)]
    return wanted + [c for c in registry.CLASSIFIERS if registry.asks(c, case, abstained) and supports(c)]


#: The classifier whose answer is the case's abstention: asked before any other verdict, as its answer decides where they apply.
_ABSTENTION = "abstention"


async def judge_case(
    judge: Judge,
    metrics: Sequence[str],
    case: EvalCase,
    response: RagResponse,
    inp: JudgeInput,
    *,
    repeat_index: int = 0,
    budget: Budget | None = None,
) -> CaseVerdicts:
    """Run every applicable judge metric once; the first JudgeError stops and is returned."""
    out = CaseVerdicts()
    budget = budget or Budget()

    async def one(metric: str) -> Verdict:
        budget.check(metric)
        try:
            verdict = await judge.judge(metric, inp, repeat_index=repeat_index)
        except JudgeError as exc:
            budget.add(exc)
            out.failures.append(exc)
            raise
        budget.add(verdict)
        return verdict

    abstained = response.abstained
    try:
        if registry.asks(_ABSTENTION, case, abstained) and judge.supports(_ABSTENTION):
            out.attempted.append(_ABSTENTION)
            verdict = await one(_ABSTENTION)
            out.verdicts[_ABSTENTION] = verdict
            abstained = out.abstained = bool(verdict.label)
        wanted = requests(metrics, case, abstained, judge.supports)
        out.attempted.extend(wanted)
        results = await asyncio.gather(*(one(m) for m in wanted), return_exceptions=True)
    except JudgeError as exc:
        out.error = exc
        return out
    for metric, result in zip(wanted, results):
        if isinstance(result, JudgeError):
            out.error = out.error or result
        elif isinstance(result, BaseException):
            raise result
        else:
            out.verdicts[metric] = result
    return out


def disagrees(first: Verdict, second: Verdict) -> bool:
    """Seed 003's spot-check rule: scores more than one point apart on 0-5 (0.2 on 0-1), or different labels."""
    if first.score is not None and second.score is not None:
        low, high = SCALES.get(first.metric, (0.0, 5.0))
        return abs(first.score - second.score) > (high - low) / 5 + 1e-9
    return first.label != second.label


def verdict_dict(verdict: Verdict) -> dict[str, Any]:
    """A verdict as stored in results.jsonl: everything but the zero/empty fields."""
    data = verdict.model_dump()
    return {k: v for k, v in data.items() if v not in (None, [], "") or k in ("score", "label")}
