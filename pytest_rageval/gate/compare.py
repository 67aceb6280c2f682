"""Baseline comparison: each gated value's delta against its tolerance, flipped cases, and the one gate policy.

Pure. The gated names and tolerances are gated_values.py's, the invariants invariants.py's, the paired
statistics statistics.py's, reading a baseline baseline_file.py's, the terminal lines comparison_text.py's. Inputs are
metrics.json dicts (top level ``eval_set_hash``, ``judge``, ``aggregate_metrics``
and ``cases``). When both runs have ``cases``, every delta and its interval
come from the same pairs: the cases both runs share and scored, so a ``-k``
subset, a shard or another file selection is compared on what it shares with
the baseline, and the interval always contains the delta. A baseline without
``cases`` compares whole-run aggregates, without intervals or flipped cases.
:func:`gate_runs` is the one gate policy of the pytest session and of
``rageval compare``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .aggregate import as_number
from .gated_values import (
    DEFAULT_MIN_JUDGE_COVERAGE,
    DEFAULT_MIN_SHARED_CASES,
    FAILING,
    PASSING,
    SLACK,
    cases_by_id,
    comparable_values,
    compared_order,
    default_tolerances,
    gate_name,
    lower_is_better,
)
from .invariants import check_invariants
from .statistics import (
    LATENCY_QUANTILES,
    is_scored,
    largest_drops,
    latency_delta,
    metric_getter,
    paired_delta,
    paired_values,
    per_case_getters,
    turn_pairs,
)

__all__ = [
    "ALLOWED_NOTE",
    "Comparison",
    "GateVerdict",
    "MetricDelta",
    "compare",
    "gate_runs",
    "gate_verdict",
]


@dataclass
class MetricDelta:
    """One aggregate metric in both runs.

    With per-case data on both sides, ``old`` and ``new`` are the metric over
    the ``n_shared`` paired cases (both runs share and scored the case, and the
    metric applies in both), ``delta`` is their difference and the interval is
    over the same pairs; ``whole_old``/``whole_new`` are the whole-run
    aggregates. ``delta`` is None when there is no pair (or either value is null).
    """

    name: str
    old: float | None
    new: float | None
    delta: float | None
    tolerance: float | None
    regressed: bool
    ci_low: float | None = None
    ci_high: float | None = None
    n_shared: int = 0
    lower_is_better: bool = False
    whole_old: float | None = None
    whole_new: float | None = None
    #: a regressed metric's cases that moved it most (:func:`largest_drops`): [{"case", "old", "new"}], worst first
    largest_drops: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Comparison:
    """The result of :func:`compare` (or :func:`gate_runs`).

    ``shared_cases``/``baseline_cases``/``current_cases`` count the ``cases``
    entries (None when a side has no per-case data). ``not_compared`` says why
    no metric could be compared (no shared case, every case errored): such a
    comparison claims neither a pass nor a regression. ``refused`` is set by
    :func:`gate_runs` when an invariant differs.
    """

    deltas: list[MetricDelta] = field(default_factory=list)
    flipped_to_fail: list[str] = field(default_factory=list)
    flipped_to_pass: list[str] = field(default_factory=list)
    invariant_differences: list[str] = field(default_factory=list)
    coverage_failures: list[str] = field(default_factory=list)
    shared_cases: int | None = None
    baseline_cases: int | None = None
    current_cases: int | None = None
    not_compared: str | None = None
    refused: bool = False
    added_cases: list[str] = field(default_factory=list)  # in this run, not in the baseline
    removed_cases: list[str] = field(default_factory=list)  # in the baseline, gone from a file this run ran whole
    changed_cases: list[str] = field(default_factory=list)  # in both, with another definition: not compared

    @property
    def regressed(self) -> bool:
        """Any metric regressed or any judge coverage below the minimum (never for a refused or uncompared run)."""
        if self.refused or self.not_compared:
            return False
        return any(d.regressed for d in self.deltas) or bool(self.coverage_failures)

    @property
    def one_sided(self) -> list[str]:
        """``not compared: <metric> (null in the baseline, 0.800 in this run)`` per metric null on one side only.

        Such a metric is not gated (nothing to compare it with) and does not fail
        the gate, but it is never skipped silently: these lines are in the gate's output.
        """
        notes = []
        for d in self.deltas:
            if (d.whole_old is None) != (d.whole_new is None):
                where = (
                    f"null in the baseline, {number_text(d.whole_new)} in this run"
                    if d.whole_old is None
                    else (f"{number_text(d.whole_old)} in the baseline, null in this run")
                )
                notes.append(f"not compared: {d.name} ({where})")
        return notes

    @property
    def regressed_metrics(self) -> list[str]:
        """Names of the regressed metrics, in delta order."""
        return [d.name for d in self.deltas if d.regressed]

    @property
    def status(self) -> str:
        """``refused``, ``not compared``, ``regression`` or ``no regression``."""
        if self.refused:
            return "refused"
        if self.not_compared:
            return "not compared"
        return "regression" if self.regressed else "no regression"

    @property
    def passed(self) -> bool:
        """The gate passes only a run it compared and found no regression in."""
        return self.status == "no regression"

    @property
    def exit_code(self) -> int:
        """``rageval compare``'s exit status: 0 no regression, 1 regression, 2 cannot compare."""
        return {"no regression": 0, "regression": 1}.get(self.status, 2)

    def scope(self) -> str:
        """Which cases the deltas cover, with the counts."""
        if self.shared_cases is None:
            return "compared on whole-run aggregates (a run has no per-case data): no intervals, no flipped cases"
        scope = (
            f"compared on {self.shared_cases} shared case{plural(self.shared_cases)} of {self.baseline_cases} "
            f"in the baseline and {self.current_cases} in this run"
        )
        moves = [
            f"{len(keys)} {label}"
            for keys, label in (
                (self.added_cases, "added"),
                (self.changed_cases, "changed"),
                (self.removed_cases, "removed"),
            )
            if keys
        ]
        return scope + (f" ({', '.join(moves)})" if moves else "")

    def reason(self) -> str:
        """One line: why the gate did not pass (empty when it passed)."""
        if self.refused:
            return "baseline refused: " + "; ".join(self.invariant_differences)
        if self.not_compared:
            return f"not compared with the baseline: {self.not_compared}"
        parts = [
            f"{d.name} {number_text(d.old)} → {number_text(d.new)} ({d.delta:+.3f}, tolerance {d.tolerance:.3f})"
            for d in self.deltas
            if d.regressed and d.delta is not None and d.tolerance is not None
        ]
        parts += self.coverage_failures
        return "regression: " + "; ".join(parts) if parts else ""

    def as_dict(self) -> dict[str, Any]:
        """The ``comparison`` block of metrics.json."""
        return {
            "status": self.status,
            "scope": self.scope(),
            "shared_cases": self.shared_cases,
            "baseline_cases": self.baseline_cases,
            "current_cases": self.current_cases,
            "not_compared": self.not_compared,
            "regressed_metrics": self.regressed_metrics,
            "deltas": [asdict(d) for d in self.deltas],
            "flipped_to_fail": list(self.flipped_to_fail),
            "flipped_to_pass": list(self.flipped_to_pass),
            "added_cases": list(self.added_cases),
            "removed_cases": list(self.removed_cases),
            "changed_cases": list(self.changed_cases),
            "invariant_differences": list(self.invariant_differences),
            "coverage_failures": list(self.coverage_failures),
        }


def plural(n: int | None) -> str:
    return "" if n == 1 else "s"


def _resolve_tolerances(tolerances: Mapping[str, Any] | None) -> dict[str, float | None]:
    """:func:`default_tolerances` updated by ``tolerances``; ``recall_at_k`` means ``recall_at_k_avg``; None disables."""
    resolved: dict[str, float | None] = dict(default_tolerances())
    for key, value in (tolerances or {}).items():
        if key == "min_judge_coverage":
            continue
        try:
            name = gate_name(key)
        except ValueError:
            name = key  # not a known aggregate: it compares only if both runs have it
        if value is None:
            resolved[name] = None
            continue
        try:
            resolved[name] = float(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"gate tolerance {key!r} is not a number: {value!r}") from exc
    return resolved


def _is_regression(name: str, delta: float, tolerance: float, lower: frozenset[str]) -> bool:
    if name in lower:
        return delta > tolerance + SLACK
    return -delta > tolerance + SLACK


def _flips(shared: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]]) -> tuple[list[str], list[str]]:
    to_fail: list[str] = []
    to_pass: list[str] = []
    for key, (old_case, new_case) in shared.items():
        old, new = old_case.get("outcome"), new_case.get("outcome")
        if old in PASSING and new in FAILING:
            to_fail.append(key)
        elif old in FAILING and new in PASSING:
            to_pass.append(key)
    return to_fail, to_pass


def _removed(old_cases: Mapping[str, Any], new_cases: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Baseline cases gone from the eval set: absent from this run although it ran their file whole (a ``-k``
    subset, a shard or a run of other files leaves cases out without removing them)."""
    files = current.get("eval_set_files")
    if current.get("partial") or current.get("shard") or not isinstance(files, Mapping):
        return []
    return sorted(key for key in set(old_cases) - set(new_cases) if key.partition("::")[0] in files)


def _definition_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Both sides carry a definition hash, and they differ (a side without one is taken as unchanged)."""
    a, b = old.get("definition"), new.get("definition")
    return isinstance(a, str) and isinstance(b, str) and a != b


def too_few_shared(comparison: Comparison, minimum: int | float) -> str | None:
    """Why the unchanged shared cases are too few to gate on, or None. ``minimum``: a count (an int), or a share of
    the baseline's cases (a float from 0 to 1: 0.5 needs half of them, rounded up); either way no more than every
    case when a side has fewer."""
    if comparison.shared_cases is None or comparison.baseline_cases is None or comparison.current_cases is None:
        return None
    share = isinstance(minimum, float)
    wanted = math.ceil(minimum * comparison.baseline_cases - 1e-9) if share else int(minimum)
    needed = min(wanted, comparison.baseline_cases, comparison.current_cases)
    if comparison.shared_cases >= needed:
        return None
    of = f" ({minimum:g} of the baseline's {comparison.baseline_cases})" if share else ""
    return (
        f"only {comparison.shared_cases} unchanged case{plural(comparison.shared_cases)} shared with the baseline, "
        f"fewer than {needed}{of} (rageval_min_shared_cases)"
    )


def _ratio(value: float, other: float) -> str:
    text = f"{value:.2f}"
    if text == f"{other:.2f}":
        text = f"{value:.4f}"
    return text


def _all_errored(metrics_json: Mapping[str, Any], cases: Mapping[str, Mapping[str, Any]]) -> str | None:
    """``"N of N"`` when every case that ran errored (invalid lines included), else None."""
    if cases:
        ran = [c for c in cases.values() if c.get("outcome") != "skipped"]
        errors = sum(1 for c in ran if c.get("outcome") == "error")
        total = len(ran)
    else:
        errors = int(as_number(metrics_json.get("errors")) or 0)
        total = int(as_number(metrics_json.get("total_tests")) or 0)
    invalid = int(as_number(metrics_json.get("invalid_lines")) or 0)
    if errors + invalid and errors == total:
        return f"{errors + invalid} of {total + invalid}"
    return None


def _why_not_compared(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    old_cases: Mapping[str, Any],
    new_cases: Mapping[str, Any],
    shared: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]],
    paired: bool,
) -> str | None:
    """Why no metric can be compared, or None."""
    errored = _all_errored(current, new_cases)
    if errored:
        return f"every case of this run errored ({errored}); no metric to compare"
    errored = _all_errored(baseline, old_cases)
    if errored:
        return f"every case of the baseline errored ({errored}); no metric to compare"
    if not paired:
        return None
    if not shared:
        return f"no case of this run is in the baseline ({len(old_cases)} cases in the baseline, {len(new_cases)} in this run)"
    if not any(is_scored(old) and is_scored(new) for old, new in shared.values()):
        return f"none of the {len(shared)} shared cases was scored in both runs"
    return None


def compare(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    tolerances: Mapping[str, float] | None = None,
    significance: bool = False,
    min_judge_coverage: float | None = None,
    bootstrap_samples: int = 1000,
    seed: int = 0,
    compare_changed: bool = False,
) -> Comparison:
    """Compare this run's metrics.json with a baseline's, on the cases both share when both have ``cases``:
    those whose definition held (and, with ``compare_changed``, the changed ones too; they are named either way)."""
    resolved = _resolve_tolerances(tolerances)
    old_scalars, new_scalars = comparable_values(baseline), comparable_values(current)
    old_cases, new_cases = cases_by_id(baseline), cases_by_id(current)
    paired = bool(old_cases) and bool(new_cases)
    both = sorted(set(old_cases) & set(new_cases))
    changed = [key for key in both if _definition_changed(old_cases[key], new_cases[key])]
    left_out = set() if compare_changed else set(changed)
    shared = {key: (old_cases[key], new_cases[key]) for key in both if key not in left_out}
    result = Comparison(
        invariant_differences=check_invariants(baseline, current),
        shared_cases=len(shared) if paired else None,
        baseline_cases=len(old_cases) if paired else None,
        current_cases=len(new_cases) if paired else None,
        added_cases=sorted(set(new_cases) - set(old_cases)) if paired else [],
        removed_cases=_removed(old_cases, new_cases, current) if paired else [],
        changed_cases=changed if paired else [],
    )
    result.not_compared = _why_not_compared(baseline, current, old_cases, new_cases, shared, paired)
    if result.not_compared:
        return result

    order, lower, per_case = compared_order(), lower_is_better(), per_case_getters()
    names = [n for n in order if n in old_scalars or n in new_scalars]
    names += sorted((set(old_scalars) | set(new_scalars)) - set(order))
    units = turn_pairs(shared)  # a conversation's turns paired by case and turn index
    pairs_of = list(units.values())
    for name in names:
        whole_old, whole_new = old_scalars.get(name), new_scalars.get(name)
        if whole_old is None and whole_new is None:
            continue
        old, new = whole_old, whole_new
        delta = new - old if old is not None and new is not None else None
        interval: tuple[float, float] | None = None
        n_pairs = 0
        quantile_of = "ttft_ms" if name.startswith("ttft_") else "latency_ms"
        getter = per_case.get(name, metric_getter(quantile_of) if name in LATENCY_QUANTILES else None)
        if paired and getter is not None:
            pairs = paired_values(pairs_of, getter)
            n_pairs = len(pairs)
            if not pairs:
                delta = None
            elif name in LATENCY_QUANTILES:
                old, new, delta = latency_delta(pairs, LATENCY_QUANTILES[name])
            else:
                old, new, delta, interval = paired_delta(pairs, samples=bootstrap_samples, seed=seed)
        tolerance = resolved.get(name)
        ci_low, ci_high = interval if interval is not None else (None, None)
        regressed = False
        if delta is not None and tolerance is not None and _is_regression(name, delta, tolerance, lower):
            regressed = True
            if significance and ci_low is not None and ci_high is not None:
                regressed = ci_low > 0 if name in lower else ci_high < 0
        drops = largest_drops(units, getter, lower=name in lower) if regressed and paired and getter is not None else []
        result.deltas.append(
            MetricDelta(
                name=name,
                old=old,
                new=new,
                delta=delta,
                tolerance=tolerance,
                regressed=regressed,
                ci_low=ci_low,
                ci_high=ci_high,
                n_shared=n_pairs,
                lower_is_better=name in lower,
                whole_old=whole_old,
                whole_new=whole_new,
                largest_drops=drops,
            )
        )

    result.flipped_to_fail, result.flipped_to_pass = _flips(shared)

    if min_judge_coverage is not None:
        coverage = (current.get("aggregate_metrics") or {}).get("judge_coverage") or {}
        for metric in sorted(coverage):
            entry = coverage[metric]
            value = as_number(entry.get("coverage")) if isinstance(entry, Mapping) else None
            if value is not None and value < min_judge_coverage - SLACK:
                result.coverage_failures.append(
                    f"judge coverage of {metric} {_ratio(value, min_judge_coverage)} < {_ratio(min_judge_coverage, value)}"
                )
    return result


def gate_runs(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    gate: Mapping[str, Any] | None = None,
    significance: bool = False,
    ignore_invariants: bool = False,
    min_shared_cases: int | float = DEFAULT_MIN_SHARED_CASES,
) -> Comparison:
    """The gate of the pytest session and of ``rageval compare``: refuse, or compare with ``[tool.rageval.gate]``.

    A baseline whose invariants differ, or that shares fewer than ``min_shared_cases`` unchanged cases with this
    run (a count, or a share of the baseline's cases: ``too_few_shared``; every case when a side has fewer), is refused (unless ``ignore_invariants``); ``min_judge_coverage``
    defaults to 0.95.
    """
    gate = gate or {}
    differences = check_invariants(baseline, current)
    if differences and not ignore_invariants:
        return Comparison(invariant_differences=differences, refused=True)
    minimum = gate.get("min_judge_coverage")
    result = compare(
        baseline,
        current,
        tolerances={k: v for k, v in gate.items() if k != "min_judge_coverage"},
        significance=significance,
        min_judge_coverage=DEFAULT_MIN_JUDGE_COVERAGE if minimum is None else float(minimum),
        compare_changed=ignore_invariants,
    )
    few = too_few_shared(result, min_shared_cases)
    if few is not None and not ignore_invariants:
        return dataclasses.replace(result, invariant_differences=[*result.invariant_differences, few], refused=True)
    return result


#: The note of a run whose regressions ``--rageval-allow-regressions`` let through.
ALLOWED_NOTE = "regressions allowed (--rageval-allow-regressions): not failing the session"


@dataclass(frozen=True)
class GateVerdict:
    """The gate's decision on a comparison: whether the run fails, ``rageval compare``'s exit status, and why.

    ``exit_code`` is 0 (no regression, or regressions allowed), 1 (a regression)
    or 2 (refused or not compared: neither a pass nor a regression); ``reason`` is
    one line, empty unless ``failed``; ``note`` says when regressions were let through.
    """

    failed: bool
    exit_code: int
    reason: str = ""
    note: str | None = None


def gate_verdict(comparison: Comparison, *, allow_regressions: bool = False) -> GateVerdict:
    """The one gate policy, of the pytest session and of ``rageval compare``, on a :func:`gate_runs` comparison.

    The gate passes only a run it compared and found no regression in; a
    refused baseline or a comparison that could not be made fails too (exit 2).
    ``allow_regressions`` lets a regression through with a note, never a refusal.
    """
    if comparison.regressed and allow_regressions:
        return GateVerdict(failed=False, exit_code=0, note=ALLOWED_NOTE)
    if comparison.passed:
        return GateVerdict(failed=False, exit_code=0)
    return GateVerdict(failed=True, exit_code=comparison.exit_code, reason=comparison.reason())


def number_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
