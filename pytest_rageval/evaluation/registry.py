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
- aggregate and gate: each aggregate's per-case value (:func:`case_means`): the run's aggregate
  averages it, the gate's paired delta and bootstrap resample it;
- judges: every verdict a judge is asked for (the judge metrics, then the :data:`CLASSIFIERS`) with
  its :class:`JudgeSpec` (prompt version, answer model, lexical scorer, whether it is on by default),
  the cases it is asked for (:func:`asks`), the judge metrics' scales, which verdict feeds which metric.
  The specs are plain data: judges/ holds the prompt texts, answer models and lexical scorers
  they name, and looks them up by those names (evaluation/ never imports judges/).

Adding a deterministic metric is one :class:`Metric` entry in :data:`METRICS`
(or one :func:`register` call) plus its scoring function; docs/internals.md has
the worked example, and the few more steps of a judge metric.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from math import log2
from typing import Any, Literal

from .schema import EvalCase, RagResponse

__all__ = [
    "BUILT_IN",
    "CLASSIFIERS",
    "CaseMean",
    "CaseValue",
    "Classifier",
    "JudgeSpec",
    "Metric",
    "MetricValue",
    "ScoreContext",
    "Threshold",
    "abstention_aggregates",
    "aggregate_direction",
    "applies",
    "as_number",
    "asks",
    "case_means",
    "default_judge_metrics",
    "default_tolerances",
    "fed_by",
    "get",
    "headline_aggregates",
    "judge_specs",
    "lexical_scorers",
    "metric_aggregates",
    "metric_names",
    "metrics",
    "prompt_version",
    "register",
    "scales",
    "stored_abstention",
    "summary_aggregates",
    "verdict_metrics",
]

MetricValue = float | int | bool | None
Threshold = bool | float

Kind = Literal["deterministic", "judge", "measured"]
#: ``higher``/``lower``: which way is better (threshold op ``>=``/``<=``); ``equal``: a flag (``==``)
Direction = Literal["higher", "lower", "equal"]
#: which cases a metric is defined for (elsewhere it is null, never 0), or a classifier asked for; see :func:`applies`
Scope = Literal[
    "all", "answerable", "unanswerable", "gold", "rule", "acknowledge_both", "answered", "abstention_unknown"
]
#: ``avg``: the mean of the non-null values (``<name>_avg``); ``rate``: the same for a 0/1 metric
#: (``<name>_rate``); ``abstention``: the mean of the entry's ``case_mean`` (abstention_accuracy, false_abstention_rate)
AggregateKind = Literal["avg", "rate", "abstention"]

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

#: A stored case's value behind one aggregate: (answerable, the case's ``metrics``) -> value; None: the case does not count.
CaseValue = Callable[[bool, Mapping[str, Any]], float | None]


@dataclass(frozen=True)
class JudgeSpec:
    """How a judge is asked for one verdict, as plain data: judges/ holds the code these names point to.

    ``prompt`` is the version of the verdict's prompt and answer schema: ``<verdict>/<prompt>`` is part
    of every judge cache key and of config.json, so it changes (and only then) when judges/prompts.py
    changes the prompt's text or the answer model changes. ``answer`` names the answer model's class in
    judges/answers.py, ``lexical`` the lexical judge's scorer in judges/lexical.py (None: the lexical
    judge does not score the verdict). ``default_on``: a judge metric scored when
    ``[tool.rageval.judge] metrics`` is not set.
    """

    prompt: str
    answer: str
    lexical: str | None
    default_on: bool = False


@dataclass(frozen=True)
class Classifier:
    """A judge verdict that classifies (``Verdict.label``, no score) and feeds the deterministic metrics whose
    ``verdict`` names it. A judge is asked for it on the cases of ``asked_for`` (see :func:`asks`)."""

    name: str
    asked_for: Scope
    judge: JudgeSpec

    def __post_init__(self) -> None:
        if self.judge.default_on:
            raise ValueError(f"classifier {self.name!r}: only a judge metric is on by default")


@dataclass(frozen=True)
class CaseMean:
    """One aggregate as a mean over a run's scored cases, defined once per case for the run and the gate.

    ``paired`` is the per-case value the gate pairs and resamples (gate/statistics.py); ``counted`` the one
    the run's aggregate averages over the cases where it is not None (gate/aggregate.py), ``paired``
    unless set. ``complement``: the key of 1 - this mean, listed right after it.
    """

    paired: CaseValue
    counted: CaseValue | None = None
    complement: str | None = None

    def run_value(self, answerable: bool, metrics: Mapping[str, Any]) -> float | None:
        """The value the run's aggregate averages for one case."""
        return (self.counted or self.paired)(answerable, metrics)


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One per-case metric; every argument is given by keyword.

    ``score`` (deterministic metrics only) is called only for cases in
    ``applies_to``; it may still return None where the metric does not apply
    (a scope finer than :data:`Scope`). ``aggregate`` defaults to
    ``<name>_<aggregate_kind>``. ``default_threshold`` is set for the cases in
    ``default_for`` (default: ``applies_to``); for a judge metric only when a
    judge is on. ``tolerance`` is the gate's default allowed drop (rise, for a
    lower-is-better metric) of the aggregate. ``verdict`` names the judge verdict
    that feeds the metric (a judge metric's own name; ``abstention`` for
    ``abstained``). ``headline`` metrics are charted in report.html and listed by
    ``rageval history``. ``judge`` (a judge metric of the package) says how a judge is
    asked for it; the judge is asked where the metric applies. ``case_mean`` (the
    ``abstention`` aggregate kind) defines the aggregate per case; an ``avg`` or
    ``rate`` aggregate is the mean of the metric's own values.
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
    judge: JudgeSpec | None = None
    case_mean: CaseMean | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.judge is not None and self.kind != "judge":
            raise ValueError(f"metric {self.name!r}: only a judge metric has a judge spec")
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
    """Whether a metric of ``scope`` is defined for ``case`` (a classifier of ``scope`` asked for).

    ``gold``: answerable with gold supports or doc ids; ``rule``: with a
    recency_conflict_rule; ``acknowledge_both``: with the rule ``acknowledge_both``;
    ``answered``: the response did not abstain (before a response, with
    ``abstained`` None, every case); ``abstention_unknown``: whether it abstained
    is not known (``abstained`` None).
    """
    if scope == "answerable":
        return case.answerable
    if scope == "unanswerable":
        return not case.answerable
    if scope == "gold":
        return case.answerable and case.has_gold
    if scope == "rule":
        return case.recency_conflict_rule is not None
    if scope == "acknowledge_both":
        return case.recency_conflict_rule == "acknowledge_both"
    if scope == "answered":
        return abstained is not True
    if scope == "abstention_unknown":
        return abstained is None
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


# --------------------------------------------------------------------------- per-case values of the aggregates


def as_number(value: Any) -> float | None:
    """A finite stored metric value as float (bools as 1/0); None for null or non-numbers."""
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def stored_abstention(answerable: bool, metrics: Mapping[str, Any]) -> float | None:
    """Whether a stored case abstained, 1.0 or 0.0: its ``abstained``, else (answerable) its
    ``false_abstention``; None when unknown."""
    value = as_number(metrics.get("abstained"))
    if answerable and value is None:
        value = as_number(metrics.get("false_abstention"))
    return None if value is None else float(bool(value))


def _abstained_unanswerable(answerable: bool, metrics: Mapping[str, Any]) -> float | None:
    """abstention_accuracy: an unanswerable case of known abstention, 1.0 when it abstained."""
    return None if answerable else stored_abstention(False, metrics)


def _abstained_answerable(answerable: bool, metrics: Mapping[str, Any]) -> float | None:
    """false_abstention_rate, as the gate pairs it: an answerable case of known abstention, 1.0 when it abstained."""
    return stored_abstention(True, metrics) if answerable else None


def _abstained_answerable_counted(answerable: bool, metrics: Mapping[str, Any]) -> float | None:
    """false_abstention_rate, as the run counts it: abstained answerable cases / answerable cases (that did
    not error), so a case of unknown abstention counts as not abstained."""
    return (stored_abstention(True, metrics) or 0.0) if answerable else None


def _complement(value: CaseValue) -> CaseValue:
    """1 - ``value`` where it is not None."""

    def get(answerable: bool, metrics: Mapping[str, Any]) -> float | None:
        found = value(answerable, metrics)
        return None if found is None else 1.0 - found

    return get


def _own_value(name: str) -> CaseValue:
    """A metric's own stored value."""

    def get(answerable: bool, metrics: Mapping[str, Any]) -> float | None:
        return as_number(metrics.get(name))

    return get


# --------------------------------------------------------------------------- the registry

_UNIT = (0.0, 1.0)
_FIVE = (0.0, 5.0)

#: Every per-case metric, in the order of a record's ``metrics``: deterministic, measured, judge.
METRICS: list[Metric] = [
    Metric(
        name="recall_at_k",
        kind="deterministic",
        scale=_UNIT,
        direction="higher",
        applies_to="gold",
        aggregate_kind="avg",
        default_threshold=1.0,
        tolerance=0.05,
        score=recall_at_k,
        headline=True,
    ),
    Metric(
        name="recall_all_at_k",
        kind="deterministic",
        scale=_UNIT,
        direction="higher",
        applies_to="gold",
        aggregate_kind="avg",
        score=recall_all_at_k,
    ),
    Metric(
        name="mrr",
        kind="deterministic",
        scale=_UNIT,
        direction="higher",
        applies_to="gold",
        aggregate_kind="avg",
        tolerance=0.05,
        score=mrr,
        headline=True,
    ),
    Metric(
        name="precision_at_k",
        kind="deterministic",
        scale=_UNIT,
        direction="higher",
        applies_to="gold",
        aggregate_kind="avg",
        score=precision_at_k,
    ),
    Metric(
        name="ndcg_at_k",
        kind="deterministic",
        scale=_UNIT,
        direction="higher",
        applies_to="gold",
        aggregate_kind="avg",
        score=ndcg_at_k,
    ),
    Metric(
        name="scope_miss",
        kind="deterministic",
        scale=_UNIT,
        direction="lower",
        applies_to="gold",
        aggregate_kind="rate",
        tolerance=0.10,
        score=scope_miss,
    ),
    Metric(
        name="attribution_hit",
        kind="deterministic",
        scale=_UNIT,
        direction="higher",
        applies_to="gold",
        aggregate_kind="rate",
        score=attribution_hit,
    ),
    Metric(
        name="conflict_rule",
        kind="deterministic",
        scale=_UNIT,
        direction="higher",
        applies_to="rule",
        aggregate_kind="rate",
        default_threshold=1.0,
        verdict="conflict_ack",
        score=conflict_rule,
    ),
    Metric(
        name="abstained",
        kind="deterministic",
        scale=_UNIT,
        direction="equal",
        applies_to="all",
        aggregate_kind="abstention",
        aggregate="abstention_accuracy",
        default_threshold=True,
        default_for="unanswerable",
        tolerance=0.10,
        verdict="abstention",
        score=abstained,
        headline=True,
        case_mean=CaseMean(_abstained_unanswerable, complement=HALLUCINATION_RATE),
    ),
    Metric(
        name="false_abstention",
        kind="deterministic",
        scale=_UNIT,
        direction="lower",
        applies_to="answerable",
        aggregate_kind="abstention",
        aggregate="false_abstention_rate",
        default_threshold=0.0,
        tolerance=0.05,
        verdict="abstention",
        score=false_abstention,
        case_mean=CaseMean(_abstained_answerable, _abstained_answerable_counted),
    ),
    Metric(name="latency_ms", kind="measured", scale=(0.0, float("inf")), direction="lower", applies_to="all"),
    # time to the first text delta of a streamed answer (null when the answer was not streamed)
    Metric(name="ttft_ms", kind="measured", scale=(0.0, float("inf")), direction="lower", applies_to="all"),
    Metric(
        name="groundedness",
        kind="judge",
        scale=_FIVE,
        direction="higher",
        applies_to="answered",
        aggregate_kind="avg",
        default_threshold=3.0,
        default_for="all",
        tolerance=0.5,
        headline=True,
        judge=JudgeSpec("v2", "GroundednessAnswer", "groundedness", default_on=True),
    ),
    Metric(
        name="correctness",
        kind="judge",
        scale=_FIVE,
        direction="higher",
        applies_to="answerable",
        aggregate_kind="avg",
        default_threshold=3.0,
        tolerance=0.5,
        headline=True,
        judge=JudgeSpec("v2", "FivePointAnswer", "correctness", default_on=True),
    ),
    Metric(
        name="faithfulness",
        kind="judge",
        scale=_UNIT,
        direction="higher",
        applies_to="answered",
        aggregate_kind="avg",
        judge=JudgeSpec("v2", "PassingAnswer", "faithfulness"),
    ),
    Metric(
        name="relevancy",
        kind="judge",
        scale=_UNIT,
        direction="higher",
        applies_to="answered",
        aggregate_kind="avg",
        judge=JudgeSpec("v2", "PassingAnswer", "relevancy"),
    ),
    Metric(
        name="completeness",
        kind="judge",
        scale=_UNIT,
        direction="higher",
        applies_to="answerable",
        aggregate_kind="avg",
        judge=JudgeSpec("v2", "UnitScoreAnswer", "completeness"),
    ),
    # the lexical judge does not score reasoning_quality: clarity and logic are not visible in token overlap
    Metric(
        name="reasoning_quality",
        kind="judge",
        scale=_UNIT,
        direction="higher",
        applies_to="answered",
        aggregate_kind="avg",
        judge=JudgeSpec("v2", "UnitScoreAnswer", None),
    ),
]

#: The judge verdicts that classify, in prompt-version order (after the judge metrics): abstention, asked
#: first and only when the response does not say whether it abstained, and the ``acknowledge_both`` check.
CLASSIFIER_VERDICTS: tuple[Classifier, ...] = (
    Classifier("abstention", "abstention_unknown", JudgeSpec("v2", "AbstentionAnswer", "abstention")),
    Classifier("conflict_ack", "acknowledge_both", JudgeSpec("v2", "ConflictAnswer", "conflict_ack")),
)
#: Their names.
CLASSIFIERS: tuple[str, ...] = tuple(c.name for c in CLASSIFIER_VERDICTS)

#: The names of the package's own metrics (those :func:`register` and plugins add are not among them).
BUILT_IN: frozenset[str] = frozenset(m.name for m in METRICS)


def register(metric: Metric) -> Metric:
    """Add a deterministic metric now (the lower-level call under the ``pytest_rageval_metrics`` hook and the
    ``pytest_rageval.metrics`` entry points, which :mod:`.external_metrics` registers through; a conftest.py may
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
            raise ValueError(
                f"register: aggregate {metric.aggregate!r} of {metric.name!r} is taken by {existing.name!r}"
            )
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


def case_means() -> dict[str, CaseMean]:
    """Aggregate key -> its per-case definition, in metrics.json order: the ``avg`` means, the ``rate`` ones,
    then the abstention aggregates (each followed by its complement).

    The run's aggregate is the mean of ``run_value`` over the scored cases where it is not None
    (gate/aggregate.py); the gate pairs and resamples ``paired`` (gate/statistics.py).
    """
    out: dict[str, CaseMean] = {}
    for kind in ("avg", "rate"):
        out.update(
            (m.aggregate, CaseMean(_own_value(m.name)))
            for m in METRICS
            if m.aggregate_kind == kind and m.aggregate is not None
        )
    for m in METRICS:
        mean = m.case_mean
        if m.aggregate_kind != "abstention" or m.aggregate is None or mean is None:
            continue
        out[m.aggregate] = mean
        if mean.complement is not None:
            counted = mean.counted
            out[mean.complement] = CaseMean(_complement(mean.paired), None if counted is None else _complement(counted))
    return out


def metric_aggregates() -> tuple[str, ...]:
    """Every metric aggregate key, in metrics.json order (:func:`case_means`)."""
    return tuple(case_means())


def abstention_aggregates() -> tuple[str, ...]:
    """The abstention aggregates, in metrics.json order: abstention_accuracy, its complement, false_abstention_rate."""
    means = {**aggregates("avg"), **aggregates("rate")}
    return tuple(key for key in case_means() if key not in means)


def _complements() -> dict[str, str]:
    """Complement aggregate key -> the aggregate it is 1 - of."""
    return {
        m.case_mean.complement: m.aggregate
        for m in METRICS
        if m.case_mean is not None and m.case_mean.complement and m.aggregate
    }


def summary_aggregates() -> tuple[str, ...]:
    """The terminal summary's metric rows: deterministic means and rates, judge means, then abstention."""

    def means(judge: bool) -> list[str]:
        return [
            m.aggregate
            for m in METRICS
            if m.aggregate_kind in ("avg", "rate") and m.aggregate is not None and (m.kind == "judge") == judge
        ]

    return (*means(False), *means(True), *abstention_aggregates())


def headline_aggregates() -> tuple[str, ...]:
    """The aggregates of the headline metrics (report.html trends, ``rageval history``), in summary order."""
    headline = {m.aggregate for m in METRICS if m.headline}
    return tuple(key for key in summary_aggregates() if key in headline)


def default_tolerances() -> dict[str, float]:
    """Aggregate key -> the gate's default tolerance."""
    return {m.aggregate: m.tolerance for m in METRICS if m.aggregate is not None and m.tolerance is not None}


def aggregate_direction(key: str) -> Direction | None:
    """``lower`` or ``higher`` for a metric's aggregate key (a complement the other way round); None otherwise."""
    of = _complements().get(key)
    if of is not None:
        return "higher" if aggregate_direction(of) == "lower" else "lower"
    metric = next((m for m in METRICS if m.aggregate == key), None)
    if metric is None:
        return None
    return "lower" if metric.direction == "lower" else "higher"


# --------------------------------------------------------------------------- judge verdicts (read at call time)


def judge_specs() -> dict[str, JudgeSpec]:
    """Every verdict a judge can be asked for -> its spec: the judge metrics, then the classifiers (the
    order of the prompt versions, part of the config hash)."""
    specs = {m.name: m.judge for m in METRICS if m.kind == "judge" and m.judge is not None}
    return {**specs, **{c.name: c.judge for c in CLASSIFIER_VERDICTS}}


def prompt_version(verdict: str) -> str:
    """``<verdict>/<prompt>``: the version of a verdict's prompt and answer schema (KeyError for no verdict)."""
    return f"{verdict}/{judge_specs()[verdict].prompt}"


def lexical_scorers() -> dict[str, str]:
    """Verdict -> the lexical judge's scorer for it, for the verdicts the lexical judge scores."""
    return {verdict: spec.lexical for verdict, spec in judge_specs().items() if spec.lexical is not None}


def default_judge_metrics() -> tuple[str, ...]:
    """The judge metrics scored when ``[tool.rageval.judge] metrics`` is not set."""
    return tuple(verdict for verdict, spec in judge_specs().items() if spec.default_on)


def asks(verdict: str, case: EvalCase, abstained: bool | None) -> bool:
    """Whether a judge is asked for ``verdict`` on ``case`` whose abstention so far is ``abstained``: a judge
    metric where it applies, a classifier on the cases of its ``asked_for``; never for another name."""
    metric = get(verdict)
    if metric is not None:
        return metric.kind == "judge" and applies(metric.applies_to, case, abstained)
    classifier = next((c for c in CLASSIFIER_VERDICTS if c.name == verdict), None)
    return classifier is not None and applies(classifier.asked_for, case, abstained)


def fed_by(verdicts: Iterable[str]) -> tuple[Metric, ...]:
    """The deterministic metrics the given judge verdicts feed, in registry order."""
    names = set(verdicts)
    return tuple(m for m in METRICS if m.kind == "deterministic" and m.verdict in names)
