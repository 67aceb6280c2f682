"""Baseline comparison: tolerances, paired bootstrap, invariants, flipped cases (SPEC section 7).

Pure apart from :func:`load_baseline`, which reads one file. Inputs are
metrics.json dicts (top level ``eval_set_hash``, ``judge``, ``aggregate_metrics``
and ``cases``); a baseline without ``cases`` still compares, without intervals
or flipped cases.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

from .aggregate import AVG_METRICS, RATE_METRICS, as_number, percentile

__all__ = [
    "DEFAULT_TOLERANCES",
    "GATE_NAMES",
    "gate_name",
    "LOWER_IS_BETTER",
    "MetricDelta",
    "Comparison",
    "load_baseline",
    "check_invariants",
    "compare",
    "bootstrap_interval",
    "format_comparison",
]

DEFAULT_TOLERANCES: dict[str, float] = {
    "recall_at_k_avg": 0.05,
    "mrr_avg": 0.05,
    "groundedness_avg": 0.5,
    "correctness_avg": 0.5,
    "abstention_accuracy": 0.10,
    "scope_miss_rate": 0.10,
}

#: compared names where a rise is the bad direction (everything else: a drop is)
LOWER_IS_BETTER: frozenset[str] = frozenset(
    {
        "scope_miss_rate",
        "false_abstention_rate",
        "hallucination_rate_unanswerable",
        "error_rate",
        "timeout_rate",
        "empty_response_rate",
        "flake_rate",
        "latency_p50_ms",
        "latency_p95_ms",
    }
)

#: order of the deltas; other numeric aggregate_metrics scalars follow, sorted
_ORDER: tuple[str, ...] = (
    *AVG_METRICS,
    *RATE_METRICS,
    "abstention_accuracy",
    "hallucination_rate_unanswerable",
    "false_abstention_rate",
    "error_rate",
    "timeout_rate",
    "empty_response_rate",
    "latency_p50_ms",
    "latency_p95_ms",
)

_PASS = ("passed", "xpassed")
_FAIL = ("failed", "error")
_UNSCORED = ("error", "skipped")
_SLACK = 1e-9
_NUMPY_MIN_DRAWS = 2_000_000  # below this many draws (cases x samples) pure Python is used


@dataclass
class MetricDelta:
    """One aggregate metric in both runs; ``delta`` is new - old (None if either is null)."""

    name: str
    old: Optional[float]
    new: Optional[float]
    delta: Optional[float]
    tolerance: Optional[float]
    regressed: bool
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n_shared: int = 0
    lower_is_better: bool = False


@dataclass
class Comparison:
    """The result of :func:`compare`."""

    deltas: list[MetricDelta] = field(default_factory=list)
    flipped_to_fail: list[str] = field(default_factory=list)
    flipped_to_pass: list[str] = field(default_factory=list)
    invariant_differences: list[str] = field(default_factory=list)
    coverage_failures: list[str] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        """Any metric regressed or any judge coverage below the minimum."""
        return any(d.regressed for d in self.deltas) or bool(self.coverage_failures)

    @property
    def regressed_metrics(self) -> list[str]:
        """Names of the regressed metrics, in delta order."""
        return [d.name for d in self.deltas if d.regressed]


# --------------------------------------------------------------------------- loading


def load_baseline(path: Union[str, Path]) -> Optional[dict[str, Any]]:
    """Read a baseline: a metrics.json file, a run directory, or an output folder with ``latest``.

    Returns None when nothing is there; raises ValueError naming the path when
    the file is not valid JSON or not a metrics.json.
    """
    path = Path(path)
    if path.is_dir():
        candidate = path / "metrics.json"
        if not candidate.is_file():
            latest = path / "latest"
            if latest.is_file():
                try:
                    run_id = latest.read_text(encoding="utf-8").strip()
                except OSError as exc:
                    raise ValueError(f"{latest}: cannot read: {exc}") from exc
                candidate = path / run_id / "metrics.json" if run_id else candidate
        path = candidate
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read baseline: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: baseline is not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("aggregate_metrics"), dict):
        raise ValueError(f"{path}: not a metrics.json (no aggregate_metrics object)")
    return data


# --------------------------------------------------------------------------- invariants


def _short(value: Any, limit: int = 12) -> str:
    text = str(value)
    return text[:limit] + "…" if len(text) > limit else text


def _shown(value: Any, shorten: bool) -> str:
    if value is None:
        return "(missing)"
    return _short(value) if shorten else str(value)


def _judge_field(metrics_json: Mapping[str, Any], name: str) -> Any:
    judge = metrics_json.get("judge")
    return judge.get(name) if isinstance(judge, Mapping) else None


def check_invariants(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Messages naming each invariant that differs (eval set hash, judge model/prompt/temperature).

    A value missing (or null) on both sides is no difference; on one side only it is.
    """
    messages: list[str] = []

    def eval_hash(m: Mapping[str, Any]) -> Any:
        value = m.get("eval_set_hash")
        return value if value is not None else m.get("eval_set_commit_hash")  # seed 003 name

    pairs: list[tuple[str, Any, Any, bool]] = [("eval_set_hash", eval_hash(baseline), eval_hash(current), True)]
    for name in ("model", "prompt_version", "temperature"):
        pairs.append((f"judge {name}", _judge_field(baseline, name), _judge_field(current, name), False))
    for label, old, new, shorten in pairs:
        if old is None and new is None:
            continue
        if old == new:
            continue
        messages.append(f"{label} differs: baseline {_shown(old, shorten)} vs this run {_shown(new, shorten)}")
    return messages


# --------------------------------------------------------------------------- bootstrap


def bootstrap_interval(
    diffs: Sequence[float], *, samples: int = 1000, seed: int = 0, level: float = 0.95
) -> Optional[tuple[float, float]]:
    """Percentile interval of the mean of ``diffs`` under resampling with replacement.

    Deterministic for given inputs; None with fewer than 2 values or no samples.
    Uses ``random.Random(seed)``; for very large inputs (cases x samples above
    2,000,000) numpy's ``default_rng(seed)`` when numpy is importable.
    """
    values = [float(d) for d in diffs]
    n = len(values)
    if n < 2 or samples < 1:
        return None
    if all(v == values[0] for v in values):
        return values[0], values[0]
    means = _numpy_means(values, samples, seed) if n * samples > _NUMPY_MIN_DRAWS else None
    if means is None:
        rng = random.Random(seed)
        choices = rng.choices
        means = [sum(choices(values, k=n)) / n for _ in range(samples)]
    means.sort()
    tail = (1.0 - level) / 2.0 * 100.0
    low = percentile(means, tail)
    high = percentile(means, 100.0 - tail)
    assert low is not None and high is not None
    return low, high


def _numpy_means(values: list[float], samples: int, seed: int) -> Optional[list[float]]:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is optional
        return None
    data = np.asarray(values, dtype=float)
    n = len(values)
    rng = np.random.default_rng(seed)
    per_chunk = max(1, _NUMPY_MIN_DRAWS // n)
    out: list[float] = []
    done = 0
    while done < samples:
        rows = min(per_chunk, samples - done)
        idx = rng.integers(0, n, size=(rows, n))
        out.extend(data[idx].mean(axis=1).tolist())
        done += rows
    return out


def _unanswerable(case: Mapping[str, Any]) -> bool:
    return case.get("answerable") is False


def _metric_getter(metric: str) -> Callable[[Mapping[str, Any]], Optional[float]]:
    def get(case: Mapping[str, Any]) -> Optional[float]:
        metrics = case.get("metrics") or {}
        return as_number(metrics.get(metric))

    return get


def _abstained_unanswerable(case: Mapping[str, Any]) -> Optional[float]:
    if not _unanswerable(case):
        return None
    return _metric_getter("abstained")(case)


def _answered_unanswerable(case: Mapping[str, Any]) -> Optional[float]:
    value = _abstained_unanswerable(case)
    return None if value is None else 1.0 - value


def _false_abstention(case: Mapping[str, Any]) -> Optional[float]:
    value = _metric_getter("false_abstention")(case)
    if value is None and not _unanswerable(case):
        value = _metric_getter("abstained")(case)
    return value


#: aggregate metric -> per-case value used for the paired bootstrap
PER_CASE: dict[str, Callable[[Mapping[str, Any]], Optional[float]]] = {
    **{key: _metric_getter(metric) for key, metric in AVG_METRICS.items()},
    **{key: _metric_getter(metric) for key, metric in RATE_METRICS.items()},
    "abstention_accuracy": _abstained_unanswerable,
    "hallucination_rate_unanswerable": _answered_unanswerable,
    "false_abstention_rate": _false_abstention,
}


def _paired_diffs(
    baseline_cases: Mapping[str, Any], current_cases: Mapping[str, Any], getter: Callable[[Mapping[str, Any]], Optional[float]]
) -> list[float]:
    diffs: list[float] = []
    for key in sorted(set(baseline_cases) & set(current_cases)):
        old_case, new_case = baseline_cases[key], current_cases[key]
        if not isinstance(old_case, Mapping) or not isinstance(new_case, Mapping):
            continue
        if old_case.get("outcome") in _UNSCORED or new_case.get("outcome") in _UNSCORED:
            continue
        old, new = getter(old_case), getter(new_case)
        if old is None or new is None:
            continue
        diffs.append(new - old)
    return diffs


# --------------------------------------------------------------------------- compare


def _scalars(metrics_json: Mapping[str, Any]) -> dict[str, Optional[float]]:
    """The comparable scalars of a metrics.json: aggregate_metrics numbers, operational rates, latency percentiles."""
    agg = metrics_json.get("aggregate_metrics") or {}
    out: dict[str, Optional[float]] = {}
    for key, value in agg.items():
        if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            out[key] = as_number(value)
    operational = agg.get("operational_metrics")
    if isinstance(operational, Mapping):
        for key in ("error_rate", "timeout_rate", "empty_response_rate"):
            if key in operational:
                out[key] = as_number(operational.get(key))
    latency = agg.get("latency")
    if isinstance(latency, Mapping):
        for key in ("p50_ms", "p95_ms"):
            if key in latency:
                out[f"latency_{key}"] = as_number(latency.get(key))
    return out


#: every name a ``[tool.rageval.gate]`` table may set
GATE_NAMES: frozenset[str] = frozenset(_ORDER) | LOWER_IS_BETTER | {"min_judge_coverage"}


def gate_name(key: str) -> str:
    """The aggregate a gate key means (``recall_at_k`` means ``recall_at_k_avg``); ValueError with a did-you-mean."""
    for name in (key, key + "_avg", key + "_rate"):
        if name in GATE_NAMES:
            return name
    import difflib

    close = difflib.get_close_matches(key, sorted(GATE_NAMES), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown metric {key!r}{hint}")


def _resolve_tolerances(tolerances: Optional[Mapping[str, Any]]) -> dict[str, Optional[float]]:
    """DEFAULT_TOLERANCES updated by ``tolerances``; ``recall_at_k`` means ``recall_at_k_avg``; None disables."""
    resolved: dict[str, Optional[float]] = dict(DEFAULT_TOLERANCES)
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


def _is_regression(name: str, delta: float, tolerance: float) -> bool:
    if name in LOWER_IS_BETTER:
        return delta > tolerance + _SLACK
    return -delta > tolerance + _SLACK


def _flips(baseline_cases: Mapping[str, Any], current_cases: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    to_fail: list[str] = []
    to_pass: list[str] = []
    for key in sorted(set(baseline_cases) & set(current_cases)):
        old_case, new_case = baseline_cases[key], current_cases[key]
        if not isinstance(old_case, Mapping) or not isinstance(new_case, Mapping):
            continue
        old, new = old_case.get("outcome"), new_case.get("outcome")
        if old in _PASS and new in _FAIL:
            to_fail.append(key)
        elif old in _FAIL and new in _PASS:
            to_pass.append(key)
    return to_fail, to_pass


def _ratio(value: float, other: float) -> str:
    text = f"{value:.2f}"
    if text == f"{other:.2f}":
        text = f"{value:.4f}"
    return text


def compare(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    tolerances: Optional[Mapping[str, float]] = None,
    significance: bool = False,
    min_judge_coverage: Optional[float] = None,
    bootstrap_samples: int = 1000,
    seed: int = 0,
) -> Comparison:
    """Compare this run's metrics.json with a baseline's."""
    resolved = _resolve_tolerances(tolerances)
    old_scalars, new_scalars = _scalars(baseline), _scalars(current)
    baseline_cases = baseline.get("cases") or {}
    current_cases = current.get("cases") or {}
    if not isinstance(baseline_cases, Mapping):
        baseline_cases = {}
    if not isinstance(current_cases, Mapping):
        current_cases = {}

    names = [n for n in _ORDER if n in old_scalars or n in new_scalars]
    names += sorted((set(old_scalars) | set(new_scalars)) - set(_ORDER))

    deltas: list[MetricDelta] = []
    for name in names:
        old, new = old_scalars.get(name), new_scalars.get(name)
        if old is None and new is None:
            continue
        tolerance = resolved.get(name)
        delta = new - old if old is not None and new is not None else None
        ci_low = ci_high = None
        n_shared = 0
        getter = PER_CASE.get(name)
        if getter is not None and baseline_cases and current_cases:
            diffs = _paired_diffs(baseline_cases, current_cases, getter)
            n_shared = len(diffs)
            interval = bootstrap_interval(diffs, samples=bootstrap_samples, seed=seed)
            if interval is not None:
                ci_low, ci_high = interval
        regressed = False
        if delta is not None and tolerance is not None and _is_regression(name, delta, tolerance):
            regressed = True
            if significance and ci_low is not None and ci_high is not None:
                regressed = ci_low > 0 if name in LOWER_IS_BETTER else ci_high < 0
        deltas.append(
            MetricDelta(
                name=name,
                old=old,
                new=new,
                delta=delta,
                tolerance=tolerance,
                regressed=regressed,
                ci_low=ci_low,
                ci_high=ci_high,
                n_shared=n_shared,
                lower_is_better=name in LOWER_IS_BETTER,
            )
        )

    to_fail, to_pass = _flips(baseline_cases, current_cases)

    coverage_failures: list[str] = []
    if min_judge_coverage is not None:
        coverage = (current.get("aggregate_metrics") or {}).get("judge_coverage") or {}
        for metric in sorted(coverage):
            entry = coverage[metric]
            value = as_number(entry.get("coverage")) if isinstance(entry, Mapping) else None
            if value is not None and value < min_judge_coverage - _SLACK:
                coverage_failures.append(
                    f"judge coverage of {metric} {_ratio(value, min_judge_coverage)} < "
                    f"{_ratio(min_judge_coverage, value)}"
                )

    return Comparison(
        deltas=deltas,
        flipped_to_fail=to_fail,
        flipped_to_pass=to_pass,
        invariant_differences=check_invariants(baseline, current),
        coverage_failures=coverage_failures,
    )


# --------------------------------------------------------------------------- terminal


def _f(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def format_delta(d: MetricDelta) -> str:
    """``mrr_avg: 1.000 → 0.500 (-0.500; 95% CI -0.750..-0.250; tolerance 0.050) REGRESSED``."""
    parts: list[str] = []
    if d.delta is None:
        parts.append("not comparable")
    else:
        parts.append(f"{d.delta:+.3f}")
    if d.ci_low is not None and d.ci_high is not None:
        parts.append(f"95% CI {d.ci_low:.3f}..{d.ci_high:.3f}")
    if d.tolerance is not None:
        parts.append(f"tolerance {d.tolerance:.3f}")
    line = f"{d.name}: {_f(d.old)} → {_f(d.new)} ({'; '.join(parts)})"
    return line + " REGRESSED" if d.regressed else line


def _case_list(title: str, keys: list[str], max_cases: int) -> list[str]:
    if not keys:
        return []
    lines = [title]
    shown = keys[: max(0, max_cases)]
    lines += [f"  {key}" for key in shown]
    if len(keys) > len(shown):
        lines.append(f"  (+{len(keys) - len(shown)} more)")
    return lines


def format_comparison(comparison: Comparison, *, max_cases: int = 20) -> list[str]:
    """Terminal lines: one per metric delta, flipped cases, invariant and coverage messages."""
    lines = [format_delta(d) for d in comparison.deltas]
    lines += _case_list("cases that flipped from pass to fail:", comparison.flipped_to_fail, max_cases)
    lines += _case_list("cases that flipped from fail to pass:", comparison.flipped_to_pass, max_cases)
    lines += list(comparison.invariant_differences)
    lines += list(comparison.coverage_failures)
    return lines
