"""The one list of per-case metrics: what each is, how it is scored, thresholded, aggregated and gated.

Layer 0: imports only :mod:`.schema`. Everything that lists or classifies
metrics derives from :data:`METRICS` through the functions below, at call time
(so a metric added with :func:`register`, which the ``pytest_rageval_metrics`` hook and the
``pytest_rageval.metrics`` entry points go through, is scored, thresholded, aggregated,
gated and reported like a built-in one):

- metrics.score_case calls each deterministic entry's ``score`` with one
  :class:`ScoreContext` (K, the gold matches of the top-K chunks and of the
  references, the effective abstention), so a scoring function stays a few lines;
- thresholds: the names a threshold may use, their op (``>=``, ``<=``, ``==``), the defaults;
- aggregate: each entry's aggregate key (``<name>_avg`` or ``<name>_rate``) in metrics.json;
- gate: default tolerances and which aggregates are better lower;
- the terminal summary, pytest-html's summary and report.html's trend charts;
- judges: the judge metrics' scales, which verdict feeds which metric, where a judge metric applies.

Adding a deterministic metric is one :class:`Metric` entry in :data:`METRICS`
(or one :func:`register` call) plus its scoring function; docs/internals.md has
the worked example.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import log2
from typing import Literal

from .schema import EvalCase, RagResponse

__all__ = [
    "BUILT_IN",
    "CLASSIFIERS",
    "Metric",
    "MetricValue",
    "ScoreContext",
    "Threshold",
    "abstention_aggregates",
    "aggregate_direction",
    "applies",
    "default_tolerances",
    "get",
    "headline_aggregates",
    "metric_names",
    "metrics",
    "register",
    "scales",
    "summary_aggregates",
    "verdict_metrics",
]

MetricValue = float | int | bool | None
Threshold = bool | float

Kind = Literal["deterministic", "judge", "measured"]
#: ``higher``/``lower``: which way is better (threshold op ``>=``/``<=``); ``equal``: a flag (``==``)
Direction = Literal["higher", "lower", "equal"]
#: which cases a metric is defined for (elsewhere it is null, never 0); see :func:`applies`
Scope = Literal["all", "answerable", "unanswerable", "gold", "rule", "answered"]
#: ``avg``: the mean of the non-null values (``<name>_avg``); ``rate``: the same for a 0/1 metric
#: (``<name>_rate``); ``abstention``: aggregate.py's own formula (abstention_accuracy, false_abstention_rate)
AggregateKind = Literal["avg", "rate", "abstention"]

#: Judge verdicts that classify (``Verdict.label``, no score) and feed a deterministic metric.
CLASSIFIERS: tuple[str, ...] = ("abstention", "conflict_ack")

#: The complement of abstention_accuracy (unanswerable cases that answered): no metric of its own.
HALLUCINATION_RATE = "hallucination_rate_unanswerable"


@dataclass(frozen=True)
class ScoreContext:
    """What a deterministic scoring function may use besides the case and the response.

    Gold items are ``"s<i>"`` (gold support i) and ``"d:<doc_id>"`` (gold doc id).
    ``top`` and ``cited`` are empty for a case without gold; ``items`` are the
    gold items ``required_support_groups`` and the recency rule index into.
    """

    k: int
    top: tuple[frozenset[str], ...] = ()  # gold items matched by each top-K chunk, in rank order
    cited: frozenset[str] = frozenset()  # gold items matched by any reference
    items: tuple[str, ...] = ()
    item_count: int = 0  # distinct gold items the case has (the ideal ranking's length)
    gold_in_scope: bool | None = None  # some gold support under response.selected_folders (None: not reported)
    abstained: bool | None = None  # the response's abstained, or the judge's classification
    acknowledges_conflict: bool | None = None  # the judge's conflict_ack verdict (None: no judge)

    @property
    def retrieved(self) -> frozenset[str]:
        """Every gold item matched by a top-K chunk."""
        return frozenset().union(*self.top)


Scorer = Callable[[EvalCase, RagResponse, ScoreContext], MetricValue]


@dataclass(frozen=True)
class Metric:
    """One per-case metric.

    ``score`` (deterministic metrics only) is called only for cases in
    ``applies_to``; it may still return None where the metric does not apply
    (a scope finer than :data:`Scope`). ``aggregate`` defaults to
    ``<name>_<aggregate_kind>``. ``default_threshold`` is set for the cases in
    ``default_for`` (default: ``applies_to``); for a judge metric only when a
    judge is on. ``tolerance`` is the gate's default allowed drop (rise, for a
    lower-is-better metric) of the aggregate. ``verdict`` names the judge verdict
    that feeds the metric (a judge metric's own name; ``abstention`` for
    ``abstained``). ``headline`` metrics are charted in report.html and listed by
    ``rageval history``.
    """

    name: str
    kind: Kind
    scale: tuple[float, float]
    direction: Direction
    applies_to: Scope
    aggregate_kind: AggregateKind | None = None
    aggregate: str | None = None
    default_threshold: Threshold | None = None
    default_for: Scope | None = None
    tolerance: float | None = None
    verdict: str | None = None
    score: Scorer | None = field(default=None, compare=False, repr=False)
    headline: bool = False

    def __post_init__(self) -> None:
        if self.aggregate is None and self.aggregate_kind in ("avg", "rate"):
            object.__setattr__(self, "aggregate", f"{self.name}_{self.aggregate_kind}")
        if (self.kind == "deterministic") != (self.score is not None):
            raise ValueError(f"metric {self.name!r}: a deterministic metric needs a score function, others have none")
        if self.kind == "judge" and self.verdict is None:
            object.__setattr__(self, "verdict", self.name)
        if self.tolerance is not None and self.aggregate is None:
            raise ValueError(f"metric {self.name!r}: a gate tolerance needs an aggregate")

    @property
    def op(self) -> str:
        """The comparison a threshold on this metric means."""
        return {"higher": ">=", "lower": "<=", "equal": "=="}[self.direction]


def applies(scope: Scope, case: EvalCase, abstained: bool | None = None) -> bool:
    """Whether a metric of ``scope`` is defined for ``case``.

    ``gold``: answerable with gold supports or doc ids; ``rule``: with a
    recency_conflict_rule; ``answered``: the response did not abstain (before a
    response, with ``abstained`` None, every case).
    """
    if scope == "answerable":
        return case.answerable
    if scope == "unanswerable":
        return not case.answerable
    if scope == "gold":
        return case.answerable and case.has_gold
    if scope == "rule":
        return case.recency_conflict_rule is not None
    if scope == "answered":
        return abstained is not True
    return True


# --------------------------------------------------------------------------- scoring functions

# 1 / log2(i + 1) for 1-based positions i; grown on demand.
_DISCOUNTS: list[float] = [1.0 / log2(i + 1) for i in range(1, 65)]


def _discount(position: int) -> float:
    """``1 / log2(position + 1)`` for a 1-based position."""
    while position > len(_DISCOUNTS):
        _DISCOUNTS.append(1.0 / log2(len(_DISCOUNTS) + 2))
    return _DISCOUNTS[position - 1]


def _first_hit(ctx: ScoreContext) -> int:
    """1-based rank of the first top-K chunk that matches gold; 0 when none does."""
    return next((i for i, matched in enumerate(ctx.top, start=1) if matched), 0)


def recall_at_k(case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """1 when any top-K chunk matches a gold item."""
    return 1 if _first_hit(ctx) else 0


def recall_all_at_k(case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """1 when some required group (or, without groups, every gold item) is fully in the top K.

    Null for a bare gold_doc_ids list without groups: its ids may name alternatives.
    """
    groups = case.required_support_groups
    if not case.gold_supports and not groups:
        return None
    found = ctx.retrieved
    if not groups:  # None or [] -> every gold item is required
        return int(all(item in found for item in ctx.items))
    return int(any(all(ctx.items[i] in found for i in group) for group in groups))


def mrr(case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """1 / rank of the first gold chunk in the top K; 0.0 when none."""
    first = _first_hit(ctx)
    return 1.0 / first if first else 0.0


def precision_at_k(case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """Gold chunks in the top K / K."""
    return sum(1 for matched in ctx.top if matched) / ctx.k


def ndcg_at_k(case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """Binary-relevance nDCG@K; a chunk gains only for gold items not matched higher up."""
    seen: set[str] = set()
    dcg = 0.0
    for position, matched in enumerate(ctx.top, start=1):
        if matched and not matched <= seen:
            dcg += _discount(position)
            seen |= matched
    ideal = sum(_discount(i) for i in range(1, min(ctx.k, ctx.item_count) + 1))
    return dcg / ideal if ideal else 0.0


def scope_miss(case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """1 when the response's selected_folders leave out every gold support; null when not reported."""
    return None if ctx.gold_in_scope is None else int(not ctx.gold_in_scope)


def attribution_hit(case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """1 when a reference matches a gold item."""
    return 1 if ctx.cited else 0


def conflict_rule(case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """Whether the references honour the recency rule (``items[0]`` is the newer source)."""
    if not ctx.items:  # unreachable for validated cases
        return 0
    if case.recency_conflict_rule == "cite_newer":
        return int(ctx.items[0] in ctx.cited)
    cites_all = all(item in ctx.cited for item in ctx.items)
    if case.recency_conflict_rule == "acknowledge_both":
        return int(cites_all and ctx.acknowledges_conflict is not False)
    return int(cites_all)  # cite_both


def abstained(case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """Whether the system declined to answer; null when unknown."""
    return None if ctx.abstained is None else bool(ctx.abstained)


def false_abstention(case: EvalCase, response: RagResponse, ctx: ScoreContext) -> MetricValue:
    """1 when an answerable case was declined; null when abstention is unknown."""
    return None if ctx.abstained is None else int(ctx.abstained)


# --------------------------------------------------------------------------- the registry

_UNIT = (0.0, 1.0)
_FIVE = (0.0, 5.0)

#: Every per-case metric, in the order of a record's ``metrics``: deterministic, measured, judge.
METRICS: list[Metric] = [
    Metric("recall_at_k", "deterministic", _UNIT, "higher", "gold", "avg", default_threshold=1.0, tolerance=0.05, score=recall_at_k, headline=True),
    Metric("recall_all_at_k", "deterministic", _UNIT, "higher", "gold", "avg", score=recall_all_at_k),
    Metric("mrr", "deterministic", _UNIT, "higher", "gold", "avg", tolerance=0.05, score=mrr, headline=True),
    Metric("precision_at_k", "deterministic", _UNIT, "higher", "gold", "avg", score=precision_at_k),
    Metric("ndcg_at_k", "deterministic", _UNIT, "higher", "gold", "avg", score=ndcg_at_k),
    Metric("scope_miss", "deterministic", _UNIT, "lower", "gold", "rate", tolerance=0.10, score=scope_miss),
    Metric("attribution_hit", "deterministic", _UNIT, "higher", "gold", "rate", score=attribution_hit),
    Metric("conflict_rule", "deterministic", _UNIT, "higher", "rule", "rate", default_threshold=1.0, verdict="conflict_ack", score=conflict_rule),
    Metric(
        "abstained",
        "deterministic",
        _UNIT,
        "equal",
        "all",
        "abstention",
        "abstention_accuracy",
        default_threshold=True,
        default_for="unanswerable",
        tolerance=0.10,
        verdict="abstention",
        score=abstained,
        headline=True,
    ),
    Metric(
        "false_abstention",
        "deterministic",
        _UNIT,
        "lower",
        "answerable",
        "abstention",
        "false_abstention_rate",
        default_threshold=0.0,
        tolerance=0.05,
        verdict="abstention",
        score=false_abstention,
    ),
    Metric("latency_ms", "measured", (0.0, float("inf")), "lower", "all"),
    Metric("groundedness", "judge", _FIVE, "higher", "answered", "avg", default_threshold=3.0, default_for="all", tolerance=0.5, headline=True),
    Metric("correctness", "judge", _FIVE, "higher", "answerable", "avg", default_threshold=3.0, tolerance=0.5, headline=True),
    Metric("faithfulness", "judge", _UNIT, "higher", "answered", "avg"),
    Metric("relevancy", "judge", _UNIT, "higher", "answered", "avg"),
    Metric("completeness", "judge", _UNIT, "higher", "answerable", "avg"),
    Metric("reasoning_quality", "judge", _UNIT, "higher", "answered", "avg"),
]

#: The names of the package's own metrics (those :func:`register` and plugins add are not among them).
BUILT_IN: frozenset[str] = frozenset(m.name for m in METRICS)


def register(metric: Metric) -> Metric:
    """Add a deterministic metric now (the lower-level call under the ``pytest_rageval_metrics`` hook and the
    ``pytest_rageval.metrics`` entry points, which :mod:`.metric_plugins` registers through; a conftest.py may
    still call it at import).

    It is scored for every case from then on and appears in results.jsonl,
    metrics.json (its aggregate), the terminal summary, report.html and JUnit
    XML; thresholds and gate tolerances may name it. Registering an equal
    metric again (a conftest imported twice) is a no-op; another metric of a
    taken name is refused. A judge metric needs prompts and a lexical scorer:
    add it to :data:`METRICS` in the package instead.
    """
    if metric.kind != "deterministic":
        raise ValueError(f"register: only deterministic metrics can be registered, not {metric.kind} {metric.name!r}")
    for existing in METRICS:
        if existing.name == metric.name:
            if existing == metric:
                return existing
            raise ValueError(f"register: a metric named {metric.name!r} already exists")
        if metric.aggregate is not None and existing.aggregate == metric.aggregate:
            raise ValueError(f"register: aggregate {metric.aggregate!r} of {metric.name!r} is taken by {existing.name!r}")
    position = max(i for i, m in enumerate(METRICS) if m.kind == "deterministic") + 1
    METRICS.insert(position, metric)
    return metric


# --------------------------------------------------------------------------- derived views (read at call time)


def metrics(kind: Kind | None = None) -> tuple[Metric, ...]:
    """The registered metrics (of one kind), in registry order."""
    return tuple(m for m in METRICS if kind is None or m.kind == kind)


def get(name: str) -> Metric | None:
    """The metric called ``name``, or None."""
    return next((m for m in METRICS if m.name == name), None)


def metric_names(kind: Kind | None = None) -> tuple[str, ...]:
    """The names of :func:`metrics`."""
    return tuple(m.name for m in metrics(kind))


def scales() -> dict[str, tuple[float, float]]:
    """Judge metric -> (low, high) of its score."""
    return {m.name: m.scale for m in metrics("judge")}


def verdict_metrics(verdict: str) -> tuple[str, ...]:
    """The metrics a judge verdict feeds (``abstention`` feeds abstained and false_abstention)."""
    return tuple(m.name for m in METRICS if m.verdict == verdict)


def coverage_metric(verdict: str) -> str:
    """The metric a verdict's judge coverage counts under: the first it feeds (itself when it feeds none)."""
    fed = verdict_metrics(verdict)
    return fed[0] if fed else verdict


def aggregates(kind: AggregateKind) -> dict[str, str]:
    """Aggregate key -> metric, for the metrics aggregated the ``kind`` way, in registry order."""
    return {m.aggregate: m.name for m in METRICS if m.aggregate_kind == kind and m.aggregate is not None}


def abstention_aggregates() -> tuple[str, ...]:
    """The abstention aggregates, in metrics.json order: abstention_accuracy, its complement, false_abstention_rate."""
    keys = list(aggregates("abstention"))
    return (*keys[:1], HALLUCINATION_RATE, *keys[1:])


def summary_aggregates() -> tuple[str, ...]:
    """The terminal summary's metric rows: deterministic means and rates, judge means, then abstention."""

    def means(judge: bool) -> list[str]:
        return [m.aggregate for m in METRICS if m.aggregate_kind in ("avg", "rate") and m.aggregate is not None and (m.kind == "judge") == judge]

    return (*means(False), *means(True), *abstention_aggregates())


def headline_aggregates() -> tuple[str, ...]:
    """The aggregates of the headline metrics (report.html trends, ``rageval history``), in summary order."""
    headline = {m.aggregate for m in METRICS if m.headline}
    return tuple(key for key in summary_aggregates() if key in headline)


def default_tolerances() -> dict[str, float]:
    """Aggregate key -> the gate's default tolerance."""
    return {m.aggregate: m.tolerance for m in METRICS if m.aggregate is not None and m.tolerance is not None}


def aggregate_direction(key: str) -> Direction | None:
    """``lower`` or ``higher`` for a metric's aggregate key (and hallucination_rate_unanswerable); None otherwise."""
    if key == HALLUCINATION_RATE:
        return "lower"
    metric = next((m for m in METRICS if m.aggregate == key), None)
    if metric is None:
        return None
    return "lower" if metric.direction == "lower" else "higher"
