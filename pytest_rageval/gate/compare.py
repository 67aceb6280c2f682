"""Baseline comparison: tolerances, paired bootstrap, invariants, flipped cases.

Pure apart from :func:`load_baseline`, which reads one file. Inputs are
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
import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_rageval import defaults, safejson
from pytest_rageval.errors import BaselineError
from pytest_rageval.evaluation import registry
from pytest_rageval.runs import readback
from pytest_rageval.runs.store import metrics_file

from .aggregate import as_number, percentile

__all__ = [
    "ALLOWED_NOTE",
    "Comparison",
    "GateVerdict",
    "MetricDelta",
    "bootstrap_interval",
    "check_invariants",
    "compare",
    "default_tolerances",
    "format_comparison",
    "gate_name",
    "gate_names",
    "gate_runs",
    "gate_verdict",
    "load_baseline",
    "lower_is_better",
]

#: ``[tool.rageval.gate] min_judge_coverage`` when not set
DEFAULT_MIN_JUDGE_COVERAGE = 0.95
#: ``rageval_min_shared_cases`` when not set
DEFAULT_MIN_SHARED_CASES = defaults.MIN_SHARED_CASES

#: compared names that are no metric's aggregate, in delta order
_OPERATIONAL: tuple[str, ...] = ("error_rate", "timeout_rate", "empty_response_rate", "latency_p50_ms", "latency_p95_ms")
#: of those (and flake_rate), every one: a rise is the bad direction
_OPERATIONAL_LOWER: frozenset[str] = frozenset({*_OPERATIONAL, "flake_rate"})


def default_tolerances() -> dict[str, float]:
    """Aggregate -> the allowed drop (rise, for a lower-is-better one) when ``[tool.rageval.gate]`` says nothing."""
    return registry.default_tolerances()


def lower_is_better() -> frozenset[str]:
    """Compared names where a rise is the bad direction (everything else: a drop is)."""
    return frozenset(k for k in registry.metric_aggregates() if registry.aggregate_direction(k) == "lower") | _OPERATIONAL_LOWER


def _order() -> tuple[str, ...]:
    """Order of the deltas (the metrics' aggregates, then operational ones); other numeric scalars follow, sorted."""
    return (*registry.metric_aggregates(), *_OPERATIONAL)


_PASS = ("passed", "xpassed")
_FAIL = ("failed", "error", "xfailed")  # an xfail is a failure pytest expected: xfailed -> xpassed is a flip too
_UNSCORED = ("error", "skipped")
_SLACK = 1e-9
_NUMPY_MIN_DRAWS = 2_000_000  # below this many draws (cases x samples) pure Python is used


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
                    f"null in the baseline, {_f(d.whole_new)} in this run"
                    if d.whole_old is None
                    else (f"{_f(d.whole_old)} in the baseline, null in this run")
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
            f"compared on {self.shared_cases} shared case{_s(self.shared_cases)} of {self.baseline_cases} "
            f"in the baseline and {self.current_cases} in this run"
        )
        moves = [
            f"{len(keys)} {label}"
            for keys, label in ((self.added_cases, "added"), (self.changed_cases, "changed"), (self.removed_cases, "removed"))
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
            f"{d.name} {_f(d.old)} → {_f(d.new)} ({d.delta:+.3f}, tolerance {d.tolerance:.3f})"
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


def _s(n: int | None) -> str:
    return "" if n == 1 else "s"


# --------------------------------------------------------------------------- loading


def load_baseline(path: str | Path) -> dict[str, Any] | None:
    """Read a baseline: a metrics.json file, a run directory, or an output folder with ``latest``.

    Returns None when nothing is there; raises ValueError naming the path when
    the file is not valid JSON or not a metrics.json, and naming the field too when
    a value is not what a metrics.json holds (readback.METRICS).
    """
    path = metrics_file(path)
    if not path.is_file():
        return None
    try:
        data = safejson.read_file(path)
    except safejson.JsonFileError as exc:
        if exc.unreadable:
            raise BaselineError(f"{path}: cannot read baseline: {exc.detail}") from None
        raise BaselineError(f"{path}: baseline is not valid JSON ({exc.detail})") from None
    if not isinstance(data, dict) or not isinstance(data.get("aggregate_metrics"), dict):
        raise BaselineError(f"{path}: not a metrics.json (no aggregate_metrics object)")
    problems = non_numbers(data)
    if problems:
        raise BaselineError(f"{path}: " + "; ".join(problems) + " (a gated value must be a number or null)")
    found = readback.problems(data, readback.METRICS)
    if found:
        raise readback.ReadbackError(readback.file_problem(path, found))
    return data


def _gated_raw(metrics_json: Mapping[str, Any]) -> dict[str, Any]:
    """The values :func:`_scalars` compares, as stored: the known metrics' aggregates, rates and latency percentiles."""
    agg = metrics_json.get("aggregate_metrics") or {}
    raw = {key: agg[key] for key in sorted(gate_names()) if key in agg}
    operational = agg.get("operational_metrics")
    if isinstance(operational, Mapping):
        raw.update({key: operational[key] for key in ("error_rate", "timeout_rate", "empty_response_rate") if key in operational})
    latency = agg.get("latency")
    if isinstance(latency, Mapping):
        raw.update({f"latency_{key}": latency[key] for key in ("p50_ms", "p95_ms") if key in latency})
    return raw


def non_numbers(metrics_json: Mapping[str, Any]) -> list[str]:
    """One problem per known metric whose stored value is neither a finite number nor null (a gate would skip it)."""
    problems = []
    for name, value in _gated_raw(metrics_json).items():
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            continue  # (an integer beyond float range is refused by readback, in its words)
        if isinstance(value, float) and math.isfinite(value):
            continue
        if isinstance(value, float):
            shown = repr(value).replace("nan", "NaN").replace("inf", "Infinity")
        else:
            shown = json.dumps(value, default=str)[:40]
        problems.append(f"{name} is {shown}, not a number")
    return problems


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


def _eval_set_difference(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """The differing eval-set identities, or None when the eval sets are comparable.

    With per-file digests on both sides (``eval_set_files``), only the files both
    runs ran must be identical: a run of fewer or other files is compared on
    the cases it shares with the baseline. Otherwise the whole ``eval_set_hash``
    must match.
    """
    old_files, new_files = baseline.get("eval_set_files"), current.get("eval_set_files")
    if isinstance(old_files, Mapping) and isinstance(new_files, Mapping) and old_files and new_files:
        changed = sorted(f for f in set(old_files) & set(new_files) if old_files[f] != new_files[f])
        if not changed:
            return None
        more = f" (+{len(changed) - 1} more changed files)" if len(changed) > 1 else ""
        return f"{changed[0]} {_short(old_files[changed[0]])}{more}", f"{changed[0]} {_short(new_files[changed[0]])}"

    def eval_hash(m: Mapping[str, Any]) -> Any:
        value = m.get("eval_set_hash")
        return value if value is not None else m.get("eval_set_commit_hash")  # the field's earlier name

    old, new = eval_hash(baseline), eval_hash(current)
    if old == new:
        return None
    return _shown(old, True), _shown(new, True)


def _defined(metrics_json: Mapping[str, Any]) -> bool:
    """Whether every case of a run carries its definition hash (runs made before it existed do not)."""
    cases = _cases(metrics_json)
    return bool(cases) and all(isinstance(c.get("definition"), str) for c in cases.values())


def _target_kind(metrics_json: Mapping[str, Any]) -> str | None:
    """What served the cases (``fixture``, ``http``, ``callable``), as far as the run recorded it."""
    target = metrics_json.get("target")
    kind = target.get("kind") if isinstance(target, Mapping) else None
    return kind if isinstance(kind, str) else None


def check_invariants(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Messages naming each invariant that differs (k, judge model/prompt/temperature; the eval set only when a
    side has no per-case definitions: otherwise the gate compares the cases whose definition held).

    A value missing (or null) on both sides is no difference; on one side only it is.
    """
    messages: list[str] = []
    eval_set = None if _defined(baseline) and _defined(current) else _eval_set_difference(baseline, current)
    if eval_set is not None:
        messages.append(f"eval_set_hash differs: baseline {eval_set[0]} vs this run {eval_set[1]}")
    return messages + setting_differences(baseline, current)


def used_judge(metrics_json: Mapping[str, Any]) -> bool:
    """Whether a run scored with a judge (metrics.json ``judge.name`` other than ``none``)."""
    judge = metrics_json.get("judge")
    name = judge.get("name") if isinstance(judge, Mapping) else None
    return isinstance(name, str) and name != "none"


def setting_differences(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The invariants of how the runs were made that differ: target kind, k, and the judge's model, prompt version
    and temperature, these only when both runs used a judge (a retrieval-only run is compared with a judged
    baseline on the metrics both have)."""
    messages: list[str] = []
    old_kind, new_kind = _target_kind(baseline), _target_kind(current)
    if old_kind is not None and new_kind is not None and old_kind != new_kind:
        messages.append(f"target kind differs: baseline {old_kind} vs this run {new_kind}")
    old_k, new_k = baseline.get("k"), current.get("k")
    if old_k is not None and new_k is not None and old_k != new_k:
        messages.append(f"k differs: baseline {_shown(old_k, False)} vs this run {_shown(new_k, False)}")
    if not (used_judge(baseline) and used_judge(current)):
        return messages
    for name in ("model", "prompt_version", "temperature"):
        old, new = _judge_field(baseline, name), _judge_field(current, name)
        if old is None and new is None:
            continue
        if old == new:
            continue
        messages.append(f"judge {name} differs: baseline {_shown(old, False)} vs this run {_shown(new, False)}")
    return messages


# --------------------------------------------------------------------------- bootstrap


def bootstrap_interval(diffs: Sequence[float], *, samples: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float] | None:
    """Percentile interval of the mean of ``diffs`` under resampling with replacement.

    Deterministic for given inputs, in every process and environment: one random
    source, ``random.Random(seed)``, whatever else is importable. None with fewer
    than 2 values or no samples.
    """
    values = [float(d) for d in diffs]
    n = len(values)
    if n < 2 or samples < 1:
        return None
    if all(v == values[0] for v in values):
        return values[0], values[0]
    choices = random.Random(seed).choices
    means = [sum(choices(values, k=n)) / n for _ in range(samples)]
    means.sort()
    tail = (1.0 - level) / 2.0 * 100.0
    low = percentile(means, tail)
    high = percentile(means, 100.0 - tail)
    assert low is not None and high is not None
    return low, high


Getter = Callable[[Mapping[str, Any]], float | None]


def _scored(case: Mapping[str, Any]) -> bool:
    return case.get("outcome") not in _UNSCORED


def _metric_getter(metric: str) -> Getter:
    def get(case: Mapping[str, Any]) -> float | None:
        if not _scored(case):
            return None
        metrics = case.get("metrics") or {}
        return as_number(metrics.get(metric))

    return get


def _paired_getter(mean: registry.CaseMean) -> Getter:
    """A scored case's value behind one metric aggregate, as the registry defines it (``mean.paired``)."""

    def get(case: Mapping[str, Any]) -> float | None:
        if not _scored(case):
            return None
        return mean.paired(case.get("answerable") is not False, case.get("metrics") or {})

    return get


def _operational(test: Callable[[Mapping[str, Any]], bool]) -> Getter:
    """A per-case 0/1 over every case that ran (errored ones included, skipped ones not), like the run's rates."""

    def get(case: Mapping[str, Any]) -> float | None:
        if case.get("outcome") == "skipped":
            return None
        return 1.0 if test(case) else 0.0

    return get


#: the operational rates (no metric's aggregate) -> per-case value
_OPERATIONAL_PER_CASE: dict[str, Getter] = {
    "error_rate": _operational(lambda c: c.get("outcome") == "error"),
    "timeout_rate": _operational(lambda c: c.get("outcome") == "error" and c.get("error_kind") == "timeout"),
    "empty_response_rate": _operational(lambda c: bool(c.get("empty_response"))),
}


def per_case_getters() -> dict[str, Getter]:
    """Aggregate metric -> per-case value; the paired delta and bootstrap are over these."""
    return {**{key: _paired_getter(mean) for key, mean in registry.case_means().items()}, **_OPERATIONAL_PER_CASE}


#: latency percentiles, compared over the latencies of the paired cases (no interval)
_LATENCY: dict[str, float] = {"latency_p50_ms": 50.0, "latency_p95_ms": 95.0}


def _pairs(shared: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], getter: Getter) -> list[tuple[float, float]]:
    """(old, new) of every shared case where both values exist."""
    out: list[tuple[float, float]] = []
    for old_case, new_case in shared:
        old, new = getter(old_case), getter(new_case)
        if old is not None and new is not None:
            out.append((old, new))
    return out


#: cases named for each regressed metric (the largest paired drops)
MAX_DROPS = 10


def largest_drops(
    shared: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]], getter: Getter, *, lower: bool, limit: int = MAX_DROPS
) -> list[dict[str, Any]]:
    """The shared cases whose value moved the bad way most (down; up for a lower-is-better metric), at most
    ``limit``, worst first (ties by key): whether or not their outcome flipped, these are the cases behind a drop."""
    moved: list[tuple[float, str, float, float]] = []
    for key, (old_case, new_case) in shared.items():
        old, new = getter(old_case), getter(new_case)
        if old is None or new is None:
            continue
        worse = new - old if lower else old - new
        if worse > _SLACK:
            moved.append((-worse, key, old, new))
    moved.sort()
    return [{"case": key, "old": old, "new": new} for _, key, old, new in moved[:limit]]


def paired_delta(
    pairs: Sequence[tuple[float, float]], *, samples: int = 1000, seed: int = 0
) -> tuple[float, float, float, tuple[float, float] | None]:
    """(old mean, new mean, mean difference, 95% interval) over the pairs; the interval contains the difference.

    The percentile bootstrap brackets the mean of the differences in practice;
    the interval is widened to it where resampling noise would leave it just outside.
    """
    n = len(pairs)
    diffs = [new - old for old, new in pairs]
    delta = math.fsum(diffs) / n
    interval = bootstrap_interval(diffs, samples=samples, seed=seed)
    if interval is not None:
        interval = (min(interval[0], delta), max(interval[1], delta))
    return math.fsum(o for o, _ in pairs) / n, math.fsum(v for _, v in pairs) / n, delta, interval


def _latency_delta(pairs: Sequence[tuple[float, float]], q: float) -> tuple[float, float, float]:
    old = percentile(sorted(o for o, _ in pairs), q)
    new = percentile(sorted(v for _, v in pairs), q)
    assert old is not None and new is not None
    return old, new, new - old


# --------------------------------------------------------------------------- compare


def _scalars(metrics_json: Mapping[str, Any]) -> dict[str, float | None]:
    """The comparable scalars of a metrics.json: aggregate_metrics numbers, operational rates, latency percentiles."""
    agg = metrics_json.get("aggregate_metrics") or {}
    out: dict[str, float | None] = {}
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


def gate_names() -> frozenset[str]:
    """Every name a ``[tool.rageval.gate]`` table may set."""
    return frozenset(_order()) | lower_is_better() | {"min_judge_coverage"}


def gate_name(key: str) -> str:
    """The aggregate a gate key means (``recall_at_k`` means ``recall_at_k_avg``); ValueError with a did-you-mean."""
    names = gate_names()
    for name in (key, key + "_avg", key + "_rate"):
        if name in names:
            return name
    import difflib

    close = difflib.get_close_matches(key, sorted(names), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown metric {key!r}{hint}")


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
        return delta > tolerance + _SLACK
    return -delta > tolerance + _SLACK


def _flips(shared: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]]) -> tuple[list[str], list[str]]:
    to_fail: list[str] = []
    to_pass: list[str] = []
    for key, (old_case, new_case) in shared.items():
        old, new = old_case.get("outcome"), new_case.get("outcome")
        if old in _PASS and new in _FAIL:
            to_fail.append(key)
        elif old in _FAIL and new in _PASS:
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


def too_few_shared(comparison: Comparison, minimum: int) -> str | None:
    """Why the unchanged shared cases are too few to gate on (fewer than ``minimum``, or than every case when a
    side has fewer), or None."""
    if comparison.shared_cases is None or comparison.baseline_cases is None or comparison.current_cases is None:
        return None
    needed = min(minimum, comparison.baseline_cases, comparison.current_cases)
    if comparison.shared_cases >= needed:
        return None
    return (
        f"only {comparison.shared_cases} unchanged case{_s(comparison.shared_cases)} shared with the baseline, "
        f"fewer than {needed} (rageval_min_shared_cases)"
    )


def _ratio(value: float, other: float) -> str:
    text = f"{value:.2f}"
    if text == f"{other:.2f}":
        text = f"{value:.4f}"
    return text


def _cases(metrics_json: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    cases = metrics_json.get("cases")
    if not isinstance(cases, Mapping):
        return {}
    return {str(k): v for k, v in cases.items() if isinstance(v, Mapping)}


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
    if not any(_scored(old) and _scored(new) for old, new in shared.values()):
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
    old_scalars, new_scalars = _scalars(baseline), _scalars(current)
    old_cases, new_cases = _cases(baseline), _cases(current)
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

    order, lower, per_case = _order(), lower_is_better(), per_case_getters()
    names = [n for n in order if n in old_scalars or n in new_scalars]
    names += sorted((set(old_scalars) | set(new_scalars)) - set(order))
    pairs_of = list(shared.values())
    for name in names:
        whole_old, whole_new = old_scalars.get(name), new_scalars.get(name)
        if whole_old is None and whole_new is None:
            continue
        old, new = whole_old, whole_new
        delta = new - old if old is not None and new is not None else None
        interval: tuple[float, float] | None = None
        n_pairs = 0
        getter = per_case.get(name, _metric_getter("latency_ms") if name in _LATENCY else None)
        if paired and getter is not None:
            pairs = _pairs(pairs_of, getter)
            n_pairs = len(pairs)
            if not pairs:
                delta = None
            elif name in _LATENCY:
                old, new, delta = _latency_delta(pairs, _LATENCY[name])
            else:
                old, new, delta, interval = paired_delta(pairs, samples=bootstrap_samples, seed=seed)
        tolerance = resolved.get(name)
        ci_low, ci_high = interval if interval is not None else (None, None)
        regressed = False
        if delta is not None and tolerance is not None and _is_regression(name, delta, tolerance, lower):
            regressed = True
            if significance and ci_low is not None and ci_high is not None:
                regressed = ci_low > 0 if name in lower else ci_high < 0
        drops = largest_drops(shared, getter, lower=name in lower) if regressed and paired and getter is not None else []
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
            if value is not None and value < min_judge_coverage - _SLACK:
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
    min_shared_cases: int = DEFAULT_MIN_SHARED_CASES,
) -> Comparison:
    """The gate of the pytest session and of ``rageval compare``: refuse, or compare with ``[tool.rageval.gate]``.

    A baseline whose invariants differ, or that shares fewer than ``min_shared_cases`` unchanged cases with this
    run (every case when a side has fewer), is refused (unless ``ignore_invariants``); ``min_judge_coverage``
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


# --------------------------------------------------------------------------- terminal


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def format_delta(d: MetricDelta) -> str:
    """``mrr_avg: 1.000 → 0.500 (-0.500; 95% CI -0.750..-0.250; tolerance 0.050) REGRESSED``.

    When the paired values differ from the whole-run aggregates (the runs do
    not share every case, or a case was scored in one run only), both are shown.
    """
    parts: list[str] = []
    if d.delta is None:
        parts.append("not comparable")
    else:
        parts.append(f"{d.delta:+.3f}")
    if d.ci_low is not None and d.ci_high is not None:
        parts.append(f"95% CI {d.ci_low:.3f}..{d.ci_high:.3f}")
    if d.tolerance is not None:
        parts.append(f"tolerance {d.tolerance:.3f}")
    if d.delta is not None and (_f(d.whole_old), _f(d.whole_new)) != (_f(d.old), _f(d.new)):
        parts.append(f"on {d.n_shared} paired case{_s(d.n_shared)}; whole runs {_f(d.whole_old)} → {_f(d.whole_new)}")
    line = f"{d.name}: {_f(d.old)} → {_f(d.new)} ({'; '.join(parts)})"
    return line + " REGRESSED" if d.regressed else line


def drop_lines(d: MetricDelta) -> list[str]:
    """A regressed metric's cases that moved it most, indented under its line (flipped or not)."""
    if not d.largest_drops:
        return []
    lines = [f"  cases that moved {d.name} most ({len(d.largest_drops)}, largest drop first):"]
    lines += [f"    {drop['case']}: {_f(drop.get('old'))} → {_f(drop.get('new'))}" for drop in d.largest_drops]
    return lines


def _case_list(title: str, keys: list[str], max_cases: int) -> list[str]:
    if not keys:
        return []
    lines = [title]
    shown = keys[: max(0, max_cases)]
    lines += [f"  {key}" for key in shown]
    if len(keys) > len(shown):
        lines.append(f"  (+{len(keys) - len(shown)} more)")
    return lines


def case_moves(comparison: Comparison, max_cases: int = 20) -> list[str]:
    """The cases not compared, by id: added to the eval set, changed (another definition), not in this run."""
    lines = _case_list("cases added since the baseline (not compared):", comparison.added_cases, max_cases)
    lines += _case_list(
        "cases changed since the baseline (question, gold, reference, thresholds, marks or params; not compared):",
        comparison.changed_cases,
        max_cases,
    )
    lines += _case_list("cases removed since the baseline:", comparison.removed_cases, max_cases)
    return lines


def format_comparison(comparison: Comparison, *, max_cases: int = 20) -> list[str]:
    """Terminal lines: the cases compared, one per metric delta, flipped cases, invariant and coverage messages."""
    if comparison.refused:
        return list(comparison.invariant_differences)
    lines = [comparison.scope()]
    if comparison.not_compared:
        return [*lines, f"not compared: {comparison.not_compared}"]
    for d in comparison.deltas:
        lines.append(format_delta(d))
        lines += drop_lines(d)
    lines += comparison.one_sided
    lines += _case_list("cases that flipped from pass to fail:", comparison.flipped_to_fail, max_cases)
    lines += _case_list("cases that flipped from fail to pass:", comparison.flipped_to_pass, max_cases)
    lines += case_moves(comparison, max_cases)
    lines += list(comparison.invariant_differences)
    lines += list(comparison.coverage_failures)
    return lines
