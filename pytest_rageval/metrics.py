"""The deterministic metrics of one case (SPEC section 4).

Pure: no pytest, no I/O. A metric that does not apply to a case is ``None``,
never 0. Binary metrics are ints (0/1), ``mrr``/``precision_at_k``/``ndcg_at_k``
floats, ``abstained`` a bool (or ``None`` when unknown).
"""

from __future__ import annotations

from math import log2
from typing import Optional, Sequence, Union

from pytest_rageval.anchors import GoldMatcher, doc_item_id, in_scope, support_item_id, top_k
from pytest_rageval.schema import Chunk, EvalCase, RagResponse

__all__ = [
    "LOWER_IS_BETTER",
    "RETRIEVAL_METRICS",
    "MetricValue",
    "gold_marks",
    "grouped_items",
    "score_case",
    "unmatchable_supports",
]

MetricValue = Union[float, int, bool, None]

RETRIEVAL_METRICS: tuple[str, ...] = (
    "recall_at_k",
    "recall_all_at_k",
    "mrr",
    "precision_at_k",
    "ndcg_at_k",
    "scope_miss",
    "attribution_hit",
    "conflict_rule",
    "abstained",
    "false_abstention",
)

LOWER_IS_BETTER: frozenset[str] = frozenset({"scope_miss", "false_abstention", "latency_ms"})

# 1 / log2(i + 1) for 1-based positions i; grown on demand.
_DISCOUNTS: list[float] = [1.0 / log2(i + 1) for i in range(1, 65)]


def _discount(position: int) -> float:
    """``1 / log2(position + 1)`` for a 1-based position."""
    while position > len(_DISCOUNTS):
        _DISCOUNTS.append(1.0 / log2(len(_DISCOUNTS) + 2))
    return _DISCOUNTS[position - 1]


def gold_marks(chunks: Sequence[Chunk], case: EvalCase, require_snippets: bool = False) -> list[bool]:
    """Per chunk (in the given order): whether it matches any gold item of ``case``."""
    matcher = GoldMatcher(case, require_snippets)
    return [bool(matcher.match(chunk)) for chunk in chunks]


def _ranking_metrics(matches: list[frozenset[str]], k: int, item_count: int) -> dict[str, MetricValue]:
    """recall_at_k, mrr, precision_at_k and ndcg_at_k from the top-K matches."""
    first = next((i for i, m in enumerate(matches, start=1) if m), 0)
    hits = sum(1 for m in matches if m)
    seen: set[str] = set()
    dcg = 0.0
    for position, matched in enumerate(matches, start=1):
        if matched and not matched <= seen:
            dcg += _discount(position)
            seen |= matched
    ideal = sum(_discount(i) for i in range(1, min(k, item_count) + 1))
    return {
        "recall_at_k": 1 if first else 0,
        "mrr": 1.0 / first if first else 0.0,
        "precision_at_k": hits / k,
        "ndcg_at_k": dcg / ideal if ideal else 0.0,
    }


def grouped_items(case: EvalCase) -> tuple[str, ...]:
    """Gold-item ids that ``required_support_groups`` indices and the recency rule refer to, in order.

    The gold supports (``"s<i>"``); in a case without gold_supports, its
    gold_doc_ids (``"d:<doc_id>"``), so id-only systems express multi-hop and
    conflict cases too.
    """
    if case.grouped_gold == "gold_supports":
        return tuple(support_item_id(i) for i in range(len(case.gold_supports)))
    return tuple(doc_item_id(doc_id) for doc_id in case.gold_doc_ids)


def _recall_all(case: EvalCase, matched: set[str], items: tuple[str, ...]) -> int:
    """1 when some required group (or, without groups, every item) is fully matched."""
    groups = case.required_support_groups
    if not groups:  # None or [] -> every gold support is required
        return int(all(item in matched for item in items))
    return int(any(all(items[i] in matched for i in group) for group in groups))


def _conflict_rule(
    rule: str, cited: set[str], items: tuple[str, ...], acknowledges_conflict: Optional[bool]
) -> int:
    """Whether the recency/conflict rule is honoured by the cited gold items (``items[0]`` is the newer source)."""
    if not items:  # unreachable for validated cases
        return 0
    if rule == "cite_newer":
        return int(items[0] in cited)
    cites_all = all(item in cited for item in items)
    if rule == "acknowledge_both":
        return int(cites_all and acknowledges_conflict is not False)
    return int(cites_all)  # cite_both


def _union(matches: list[frozenset[str]]) -> set[str]:
    out: set[str] = set()
    for matched in matches:
        out |= matched
    return out


def score_case(
    case: EvalCase,
    response: RagResponse,
    *,
    k: int,
    require_snippets: bool = False,
    abstained: Optional[bool] = None,
    acknowledges_conflict: Optional[bool] = None,
) -> dict[str, MetricValue]:
    """The retrieval, attribution, conflict and abstention metrics of one case.

    ``abstained`` overrides ``response.abstained`` when given (e.g. a judge's
    classification). ``acknowledges_conflict`` is the judge's verdict for
    ``acknowledge_both``; ``None`` means no judge, citations alone decide.
    Keys are exactly :data:`RETRIEVAL_METRICS`, in that order.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    out: dict[str, MetricValue] = dict.fromkeys(RETRIEVAL_METRICS)
    has_supports = bool(case.gold_supports)
    has_gold = has_supports or bool(case.gold_doc_ids)
    rule = case.recency_conflict_rule
    matcher = GoldMatcher(case, require_snippets) if (has_gold or rule) else None

    items = grouped_items(case)
    if case.answerable and matcher is not None and has_gold:
        top = [matcher.match(chunk) for chunk in top_k(response.retrieved_chunks, k)]
        out.update(_ranking_metrics(top, k, matcher.item_count))
        if has_supports or case.required_support_groups:  # a bare gold_doc_ids list may name alternatives
            out["recall_all_at_k"] = _recall_all(case, _union(top), items)
        if has_supports and response.selected_folders is not None:
            covered = any(in_scope(s.rel_path, response.selected_folders) for s in case.gold_supports)
            out["scope_miss"] = 0 if covered else 1

    if matcher is not None and (rule or (case.answerable and has_gold)):
        cited = _union([matcher.match(ref) for ref in response.references])
        if case.answerable and has_gold:
            out["attribution_hit"] = 1 if cited else 0
        if rule:
            out["conflict_rule"] = _conflict_rule(rule, cited, items, acknowledges_conflict)

    did_abstain = response.abstained if abstained is None else abstained
    out["abstained"] = None if did_abstain is None else bool(did_abstain)
    if case.answerable and did_abstain is not None:
        out["false_abstention"] = 1 if did_abstain else 0
    return out


def unmatchable_supports(case: EvalCase, response: RagResponse) -> bool:
    """The case has gold_supports, but no chunk or reference of ``response`` carries a ``rel_path``.

    Such supports can never match (a mapped API that sends ids only): the
    caller warns instead of letting them score 0 in silence. A response
    without any chunk or reference says nothing about the mapping.
    """
    chunks = [*response.retrieved_chunks, *response.references]
    return bool(case.gold_supports) and bool(chunks) and all(chunk.rel_path is None for chunk in chunks)
