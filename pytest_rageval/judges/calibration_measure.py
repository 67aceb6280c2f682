"""``rageval calibrate``: how far a judge agrees with labels, per metric.

A labelled set is JSON lines (blank lines and ``//`` comments skipped)::

    {"id": "...", "question": "...", "contexts": ["..."], "answer": "...",
     "reference_answer": "...", "expected_key_facts": ["..."],
     "labels": {"groundedness": true, "correctness": false}}

``labels[M]`` is true when the answer should pass metric M at its default
threshold (3 of 5 for groundedness and correctness; half the scale for a 0-1
score; the verdict itself for a pass/fail metric). "Passes" is the positive
class: ``tp`` is an answer that should pass and does, ``fn`` one the judge
fails wrongly. A judge error on an item is counted apart, never as a verdict.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_rageval.errors import DataError
from pytest_rageval.evaluation import registry
from pytest_rageval.sanitize import Limits

from .base import Judge, JudgeError, JudgeInput, Verdict
from .labelled_lines import labelled_lines

__all__ = [
    "SHIPPED_SET",
    "CalibrationError",
    "Figures",
    "LabelledAnswer",
    "bounded",
    "calibrate",
    "format_figures",
    "load_set",
    "passes",
    "set_hash",
]

#: The labelled set shipped with the package (``rageval calibrate`` without ``--set``).
SHIPPED_SET = Path(__file__).resolve().parent / "labelled.jsonl"
_KEYS = ("id", "question", "contexts", "answer", "reference_answer", "expected_key_facts", "labels", "kind")


class CalibrationError(DataError, ValueError):
    """A labelled set that cannot be read: the message names the file, the line and the field."""


@dataclass(frozen=True)
class LabelledAnswer:
    """One answer and what it should score."""

    id: str
    question: str
    contexts: tuple[str, ...]
    answer: str
    reference_answer: str | None
    key_facts: tuple[str, ...]
    labels: Mapping[str, bool]
    kind: str = ""  # what the answer is (paraphrase, wrong-entity...): for people, never scored

    def judge_input(self) -> JudgeInput:
        return JudgeInput(
            self.question, self.answer, self.contexts, reference_answer=self.reference_answer, key_facts=self.key_facts
        )


def _field(data: Mapping[str, Any], name: str, kind: type, where: str, optional: bool = False) -> Any:
    value = data.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise CalibrationError(f"{where}: field '{name}' must be {kind.__name__}, got {json.dumps(value)[:60]}")
    return value


def load_set(path: Path) -> list[LabelledAnswer]:
    """Read a labelled set; CalibrationError names the file, the line and the field of a bad line."""
    items: list[LabelledAnswer] = []
    seen: set[str] = set()
    judge_metrics = set(registry.metric_names("judge"))
    for where, data in labelled_lines(path, CalibrationError):
        unknown = sorted(set(data) - set(_KEYS))
        if unknown:
            raise CalibrationError(f"{where}: unknown field '{unknown[0]}' (fields: {', '.join(_KEYS)})")
        case_id = _field(data, "id", str, where)
        if case_id in seen:
            raise CalibrationError(f"{where}: field 'id': {case_id!r} is used by an earlier line")
        seen.add(case_id)
        contexts = _field(data, "contexts", list, where)
        facts = _field(data, "expected_key_facts", list, where, optional=True) or []
        labels = _field(data, "labels", dict, where)
        for name, value in labels.items():
            if name not in judge_metrics:
                raise CalibrationError(
                    f"{where}: field 'labels': {name!r} is not a judge metric ({', '.join(sorted(judge_metrics))})"
                )
            if not isinstance(value, bool):
                raise CalibrationError(f"{where}: field 'labels.{name}' must be true or false")
        if not labels:
            raise CalibrationError(f"{where}: field 'labels' names no metric")
        if not all(isinstance(c, str) for c in [*contexts, *facts]):
            raise CalibrationError(f"{where}: fields 'contexts' and 'expected_key_facts' hold text only")
        items.append(
            LabelledAnswer(
                case_id,
                _field(data, "question", str, where),
                tuple(contexts),
                _field(data, "answer", str, where),
                _field(data, "reference_answer", str, where, True),
                tuple(facts),
                dict(labels),
                _field(data, "kind", str, where, True) or "",
            )
        )
    if not items:
        raise CalibrationError(f"{path}: the labelled set has no line")
    return items


def bounded(items: Sequence[LabelledAnswer], limits: Limits) -> tuple[list[LabelledAnswer], int]:
    """``items`` with their text cut as a pytest run cuts what a target sends (``rageval_max_answer_chars`` for the
    answer, the reference, the question and each key fact; ``rageval_max_chunk_chars`` for each context), and how
    many fields were cut: a judge never sees more of a labelled answer than of a run's."""
    out: list[LabelledAnswer] = []
    cut = 0

    def short(text: str, limit: int) -> str:
        nonlocal cut
        cut += len(text) > limit
        return text[:limit]

    for item in items:
        out.append(
            replace(
                item,
                question=short(item.question, limits.answer),
                answer=short(item.answer, limits.answer),
                reference_answer=None if item.reference_answer is None else short(item.reference_answer, limits.answer),
                contexts=tuple(short(c, limits.chunk_text) for c in item.contexts),
                key_facts=tuple(short(f, limits.answer) for f in item.key_facts),
            )
        )
    return out, cut


def set_hash(path: Path) -> str:
    """The first 16 hex digits of the set file's SHA-256: which labels a calibration measured."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def passes(metric: str, verdict: Verdict) -> bool | None:
    """Whether ``verdict`` passes ``metric`` at its default threshold (half the scale without one)."""
    if verdict.score is None:
        return verdict.label
    spec = registry.get(metric)
    threshold = (
        spec.default_threshold if spec is not None and isinstance(spec.default_threshold, (int, float)) else None
    )
    if threshold is None:
        low, high = spec.scale if spec is not None else (0.0, 1.0)
        threshold = (low + high) / 2
    return verdict.score >= float(threshold) - 1e-9


@dataclass
class Figures:
    """The confusion table of one metric ("passes" positive) and what it cost."""

    n: int = 0
    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0
    errors: int = 0
    requests: int = 0
    cost_usd: float = 0.0
    disagreements: list[str] = field(default_factory=list)  # ids the judge got wrong, for people
    pairs: list[tuple[bool, bool]] = field(default_factory=list, repr=False)  # (label, verdict) per item: the intervals

    def add(self, expected: bool, got: bool, case_id: str) -> None:
        self.pairs.append((expected, got))
        self.n += 1
        if expected and got:
            self.tp += 1
        elif expected:
            self.fn += 1
            self.disagreements.append(case_id)
        elif got:
            self.fp += 1
            self.disagreements.append(case_id)
        else:
            self.tn += 1

    def add_error(self, expected: bool, case_id: str) -> None:
        """A judge error on an item labelled ``expected``: counted as a disagreement (and in ``errors``), never as
        agreement, so a judge that errs on most items cannot score well on the few it answered."""
        self.errors += 1
        self.add(expected, not expected, case_id)

    @property
    def accuracy(self) -> float | None:
        return (self.tp + self.tn) / self.n if self.n else None

    @property
    def balanced_accuracy(self) -> float | None:
        """Mean of the pass rate of what should pass and the fail rate of what should fail (either alone if
        the set has one kind)."""
        rates = [hits / total for hits, total in ((self.tp, self.tp + self.fn), (self.tn, self.tn + self.fp)) if total]
        return sum(rates) / len(rates) if rates else None

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa of the judge's verdicts against the labels (None when chance agreement is total)."""
        if not self.n:
            return None
        observed = (self.tp + self.tn) / self.n
        chance = ((self.tp + self.fp) * (self.tp + self.fn) + (self.tn + self.fn) * (self.tn + self.fp)) / self.n**2
        return None if chance >= 1.0 else (observed - chance) / (1.0 - chance)

    def intervals(self) -> dict[str, list[float] | None]:
        """``accuracy_ci``, ``balanced_accuracy_ci``, ``kappa_ci``: see :func:`agreement_intervals`."""
        return agreement_intervals(self.pairs)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["pairs"]
        data.update(
            accuracy=_round(self.accuracy),
            balanced_accuracy=_round(self.balanced_accuracy),
            kappa=_round(self.kappa),
            cost_usd=round(self.cost_usd, 6),
        )
        data.update(self.intervals())
        return data


#: resamples of the bootstrap behind every agreement interval, and its seed (the same interval on every run)
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0
#: the most items drawn over all resamples (fewer resamples for a large set, never fewer than ``MIN_RESAMPLES``):
#: the intervals are recomputed whenever a run reads a calibration
MAX_DRAWS = 600_000
MIN_RESAMPLES = 100
_Z = 1.959963984540054  # the 97.5th percentile of the standard normal


def _counts(pairs: Sequence[tuple[bool, bool]]) -> Figures:
    figures = Figures()
    for expected, got in pairs:
        figures.n += 1
        if expected:
            figures.tp += got
            figures.fn += not got
        else:
            figures.fp += got
            figures.tn += not got
    return figures


def pairs_of(tp: int, fp: int, tn: int, fn: int) -> list[tuple[bool, bool]]:
    """The (label, verdict) pairs of a confusion table."""
    return [(True, True)] * tp + [(True, False)] * fn + [(False, True)] * fp + [(False, False)] * tn


def _percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` (0..100) percentile of sorted ``values``, linearly interpolated."""
    rank = (len(values) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (rank - low)


def wilson(hits: int, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion ``hits / n`` (n > 0): honest at 0 and 1 and for few items."""
    p = hits / n
    centre = p + _Z * _Z / (2 * n)
    spread = _Z * math.sqrt(p * (1 - p) / n + _Z * _Z / (4 * n * n))
    return (centre - spread) / (1 + _Z * _Z / n), (centre + spread) / (1 + _Z * _Z / n)


def agreement_intervals(
    pairs: Sequence[tuple[bool, bool]], *, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, list[float] | None]:
    """95% intervals ``[low, high]`` of accuracy, balanced accuracy and kappa over the (label, verdict) pairs: a
    percentile bootstrap over the items (``random.Random(seed)``: the same interval every run; ``samples``
    resamples, fewer for a set so large that they would draw more than ``MAX_DRAWS`` items), widened to the
    Wilson score interval of each rate behind accuracy and balanced accuracy, so that a few items that all
    agree cannot claim certainty (4 of 4: low end 0.51). None where the figure is not defined. The pairs' order plays
    no part: the same counts give the same intervals."""
    observed = _counts(pairs)
    out: dict[str, list[float] | None] = {"accuracy_ci": None, "balanced_accuracy_ci": None, "kappa_ci": None}
    if not pairs:
        return out
    draws: dict[str, list[float]] = {"accuracy_ci": [], "balanced_accuracy_ci": [], "kappa_ci": []}
    # the counts alone decide the intervals (calibration_store recomputes them on read): the pairs in one order
    canonical = pairs_of(observed.tp, observed.fp, observed.tn, observed.fn)
    choices = random.Random(seed).choices
    resamples = max(MIN_RESAMPLES, min(samples, MAX_DRAWS // len(canonical)))
    for _ in range(resamples if len(canonical) > 1 else 0):
        f = _counts(choices(canonical, k=len(canonical)))
        for key, value in (
            ("accuracy_ci", f.accuracy),
            ("balanced_accuracy_ci", f.balanced_accuracy),
            ("kappa_ci", f.kappa),
        ):
            if value is not None:
                draws[key].append(value)
    points = {
        "accuracy_ci": observed.accuracy,
        "balanced_accuracy_ci": observed.balanced_accuracy,
        "kappa_ci": observed.kappa,
    }
    rates = [
        wilson(hits, total)
        for hits, total in ((observed.tp, observed.tp + observed.fn), (observed.tn, observed.tn + observed.fp))
        if total
    ]
    floors = {
        "accuracy_ci": wilson(observed.tp + observed.tn, observed.n),
        "balanced_accuracy_ci": (sum(r[0] for r in rates) / len(rates), sum(r[1] for r in rates) / len(rates)),
    }
    for key, point in points.items():
        if point is None:
            continue
        values = sorted(draws[key]) or [point]
        low, high = min(_percentile(values, 2.5), point), max(_percentile(values, 97.5), point)
        if key in floors:
            low, high = min(low, floors[key][0]), max(high, floors[key][1])
        out[key] = [round(low, 4), round(high, 4)]
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


async def _one(judge: Judge, item: LabelledAnswer, metric: str, gate: asyncio.Semaphore) -> Verdict | JudgeError:
    async with gate:
        try:
            return await judge.judge(metric, item.judge_input())
        except JudgeError as exc:
            return exc


async def calibrate(
    judge: Judge, items: Sequence[LabelledAnswer], metrics: Iterable[str], *, concurrency: int = 8
) -> dict[str, Figures]:
    """The figures of each metric the judge scores, over the items labelled for it (verdicts in item order)."""
    gate = asyncio.Semaphore(max(1, concurrency))
    out: dict[str, Figures] = {}
    for metric in metrics:
        if not judge.supports(metric):
            continue
        labelled = [item for item in items if metric in item.labels]
        results = await asyncio.gather(*(_one(judge, item, metric, gate) for item in labelled))
        figures = out.setdefault(metric, Figures())
        for item, result in zip(labelled, results):
            if not judge.heuristic and not (isinstance(result, Verdict) and result.cached):
                figures.requests += getattr(result, "attempts", 1)
            figures.cost_usd += result.cost_usd
            got = passes(metric, result) if isinstance(result, Verdict) else None
            if got is None:
                figures.add_error(item.labels[metric], item.id)
                continue
            figures.add(item.labels[metric], got, item.id)
    return out


#: ids listed per metric where judge and labels disagree; the rest are counted
MAX_DISAGREEMENTS = 20


def disagreement_lines(figures: Mapping[str, Figures]) -> list[str]:
    """Per metric: its 95% intervals, then the ids on which judge and labels disagree (the first 20, the rest
    counted)."""

    def interval(value: list[float] | None) -> str:
        return "-" if value is None else f"{value[0]:.3f}..{value[1]:.3f}"

    lines = []
    for metric, f in figures.items():
        ci = f.intervals()
        lines.append(
            f"{metric}: 95% intervals: accuracy {interval(ci['accuracy_ci'])}, balanced accuracy "
            f"{interval(ci['balanced_accuracy_ci'])}, kappa {interval(ci['kappa_ci'])}"
        )
        if f.disagreements:
            shown = ", ".join(f.disagreements[:MAX_DISAGREEMENTS])
            more = len(f.disagreements) - MAX_DISAGREEMENTS
            lines.append(
                f"{metric}: judge and labels disagree on {len(f.disagreements)}: {shown}"
                + (f" (+{more} more)" if more > 0 else "")
            )
        else:
            lines.append(f"{metric}: judge and labels agree on every item")
    return lines


def format_figures(figures: Mapping[str, Figures]) -> list[str]:
    """A table, one line a metric: n, accuracy, balanced accuracy, kappa, tp fp tn fn, errors, requests, cost."""

    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    header = (
        f"{'metric':<14} {'n':>4} {'accuracy':>8} {'balanced':>8} {'kappa':>6} {'tp':>4} {'fp':>4} {'tn':>4} {'fn':>4} "
        f"{'errors':>6} {'requests':>8} {'cost':>8}"
    )
    lines = [header, "-" * len(header)]
    for metric, f in figures.items():
        lines.append(
            f"{metric:<14} {f.n:>4} {num(f.accuracy):>8} {num(f.balanced_accuracy):>8} {num(f.kappa):>6} {f.tp:>4} "
            f"{f.fp:>4} {f.tn:>4} {f.fn:>4} {f.errors:>6} {f.requests:>8} {f'${f.cost_usd:.4f}':>8}"
        )
    return lines
