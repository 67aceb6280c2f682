"""The deterministic metrics of one case.

Pure: no pytest, no I/O. Gold matching is done once per case into a
:class:`registry.ScoreContext`; each deterministic entry of the metric registry
scores from it. A metric that does not apply to a case is ``None``, never 0.
Binary metrics are ints (0/1), ``mrr``/``precision_at_k``/``ndcg_at_k`` floats,
``abstained`` a bool (or ``None`` when unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from . import registry
from .anchors import GoldMatcher, doc_item_id, in_scope, support_item_id, top_k
from .registry import MetricValue, ScoreContext
from .schema import Chunk, EvalCase, RagResponse

__all__ = [
    "MetricValue",
    "gold_marks",
    "grouped_items",
    "lower_is_better",
    "retrieval_metrics",
    "score_case",
    "score_verdict_fed",
    "unmatchable_supports",
]


def retrieval_metrics() -> tuple[str, ...]:
    """The keys of :func:`score_case`, in order: the registry's deterministic metrics."""
    return registry.metric_names("deterministic")


def lower_is_better() -> frozenset[str]:
    """The per-case metrics where a lower value is better (threshold op ``<=``)."""
    return frozenset(m.name for m in registry.metrics() if m.direction == "lower")


def gold_marks(chunks: Sequence[Chunk], case: EvalCase, require_snippets: bool = False) -> list[bool]:
    """Per chunk (in the given order): whether it matches any gold item of ``case``."""
    matcher = GoldMatcher(case, require_snippets)
    return [bool(matcher.match(chunk)) for chunk in chunks]


def grouped_items(case: EvalCase) -> tuple[str, ...]:
    """Gold-item ids that ``required_support_groups`` indices and the recency rule refer to, in order.

    The gold supports (``"s<i>"``); in a case without gold_supports, its
    gold_doc_ids (``"d:<doc_id>"``), so id-only systems express multi-hop and
    conflict cases too.
    """
    if case.grouped_gold == "gold_supports":
        return tuple(support_item_id(i) for i in range(len(case.gold_supports)))
    return tuple(doc_item_id(doc_id) for doc_id in case.gold_doc_ids)


def _context(case: EvalCase, response: RagResponse, k: int, require_snippets: bool, bare: ScoreContext) -> ScoreContext:
    """``bare`` with the gold matches every scoring function shares, computed once (a case without gold has none)."""
    if not case.has_gold:  # a validated case with a recency rule has gold
        return bare
    matcher = GoldMatcher(case, require_snippets)
    gold_in_scope = None
    if case.gold_supports and response.selected_folders is not None:
        gold_in_scope = any(in_scope(s.rel_path, response.selected_folders) for s in case.gold_supports)
    return replace(
        bare,
        top=tuple(matcher.match(chunk) for chunk in top_k(response.retrieved_chunks, k)),
        cited=frozenset().union(*(matcher.match(ref) for ref in response.references)),
        items=grouped_items(case),
        item_count=matcher.item_count,
        gold_in_scope=gold_in_scope,
    )


def score_case(
    case: EvalCase,
    response: RagResponse,
    *,
    k: int,
    require_snippets: bool = False,
    abstained: bool | None = None,
    acknowledges_conflict: bool | None = None,
) -> dict[str, MetricValue]:
    """Every deterministic metric of one case: each registry entry's score, null where it does not apply.

    ``abstained`` overrides ``response.abstained`` when given (e.g. a judge's
    classification). ``acknowledges_conflict`` is the judge's verdict for
    ``acknowledge_both``; ``None`` means no judge, citations alone decide.
    Keys are exactly :func:`retrieval_metrics`, in that order.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    ctx = _context(
        case,
        response,
        k,
        require_snippets,
        ScoreContext(
            k=k,
            abstained=response.abstained if abstained is None else abstained,
            acknowledges_conflict=acknowledges_conflict,
        ),
    )
    return {metric.name: _score(metric, case, response, ctx) for metric in registry.metrics("deterministic")}


def score_verdict_fed(
    verdicts: Iterable[str], case: EvalCase, response: RagResponse, ctx: ScoreContext
) -> dict[str, MetricValue]:
    """The deterministic metrics the judge verdicts ``verdicts`` feed (``abstention``: abstained and
    false_abstention; ``conflict_ack``: conflict_rule) that apply to ``case``, scored from ``ctx`` as
    :func:`score_case` scores them."""
    fed = [m for m in registry.fed_by(verdicts) if registry.applies(m.applies_to, case, ctx.abstained)]
    return {metric.name: _score(metric, case, response, ctx) for metric in fed}


def _score(metric: registry.Metric, case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """One deterministic metric: the entry's score where it applies (with ``ctx.abstained``), else null."""
    assert metric.score is not None  # Metric checks it
    return metric.score(case, response, ctx) if registry.applies(metric.applies_to, case, ctx.abstained) else None


def unmatchable_supports(case: EvalCase, response: RagResponse) -> bool:
    """The case has gold_supports, but no chunk or reference of ``response`` carries a ``rel_path``.

    Such supports can never match (a mapped API that sends ids only): the
    caller warns instead of letting them score 0 in silence. A response
    without any chunk or reference says nothing about the mapping.
    """
    chunks = [*response.retrieved_chunks, *response.references]
    return bool(case.gold_supports) and bool(chunks) and all(chunk.rel_path is None for chunk in chunks)
