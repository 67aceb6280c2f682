"""Repeated cases: how many runs a case gets, its stability class, and the ``repeats`` part of metrics.json.

Pure logic (layer 1): no pytest, no I/O. A case runs ``repeat`` times when it
says so, 3 times when it is ``flaky`` without a ``repeat``, else
``--rageval-repeat N`` times when it is judge-dependent (:func:`runs_for`), else
once. A repeated case passes on the majority of its runs (engine/evaluate.py) and is
classed by its runs' verdicts (:func:`classify`): ``stable_pass`` (every run
passed), ``flaky`` (some did, some did not) or ``stable_fail`` (none did).

:class:`RepeatTally` folds records into metrics.json ``repeats``: the class
counts, the flake rate (flaky / repeated cases; null when no case was
repeated), the flaky cases with "k of n runs passed", and per metric the
spread across runs, measured as the *mean range*: for each repeated case the
max minus the min of the metric over the runs that scored it (booleans as
1/0), averaged over the repeated cases where at least two runs scored it
(timings, ``*_ms``, are left out: wall time differs every run).
Every number is independent of the order records arrive in (math.fsum over
values sorted by case key), so serial runs, xdist workers and merged shards agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, get_args

from pytest_rageval.errors import ConfigError

from .record import Stability
from .schema import MAX_REPEAT, EvalCase

__all__ = [
    "CLASSES",
    "RepeatError",
    "RepeatTally",
    "Stability",
    "classify",
    "judge_dependent",
    "parse_repeat",
    "passed_runs",
    "runs_for",
    "stability_of",
    "with_repeat",
]

CLASSES: tuple[Stability, ...] = get_args(Stability)

#: The measure ``repeats.spread`` reports (metrics.json names it, so a reader need not guess).
SPREAD_MEASURE = "mean_range"
_UNSCORED = ("error", "skipped")


class RepeatError(ConfigError):
    """``--rageval-repeat`` / ``rageval_repeat`` is not a whole number from 1 to MAX_REPEAT."""


def parse_repeat(value: Any, where: str) -> int | None:
    """``--rageval-repeat N`` or ini ``rageval_repeat``: None when unset, else a whole number 1..MAX_REPEAT."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    try:
        number = int(text)
    except ValueError:
        raise RepeatError(f"{where}: must be a whole number of runs from 1 to {MAX_REPEAT}, got {value!r}") from None
    if not 1 <= number <= MAX_REPEAT:
        raise RepeatError(f"{where}: must be from 1 to {MAX_REPEAT} runs, got {number}")
    return number


def judge_dependent(thresholds: Iterable[str], judge_metrics: Iterable[str], *, judge_in_use: bool) -> bool:
    """Whether ``--rageval-repeat`` repeats a case with these thresholds.

    With a judge in use: when a threshold is on a judge metric (the case's
    outcome depends on a verdict; the ``judge`` marker of collect.py). Without
    one (``--rageval-judge none``, ``--rageval-retrieval-only``, a conftest
    ``rageval_judge`` returning None): every case, since the RAG's own
    variation is all that is left to sample and a flag that silently repeats
    nothing would mislead.
    """
    if not judge_in_use:
        return True
    return not frozenset(judge_metrics).isdisjoint(thresholds)


def runs_for(case: EvalCase, repeat: int | None, *, dependent: bool) -> int:
    """How many times ``case`` runs: its own ``repeat``, else 3 when ``flaky``, else ``repeat`` when dependent, else 1."""
    if case.repeat is not None or case.flaky or repeat is None or not dependent:
        return case.runs
    return repeat


def with_repeat(
    case: EvalCase, repeat: int | None, thresholds: Iterable[str], judge_metrics: Iterable[str], *, judge_in_use: bool
) -> EvalCase:
    """``case`` as it runs under ``--rageval-repeat`` (its ``runs`` from :func:`runs_for`); itself when unchanged."""
    runs = runs_for(case, repeat, dependent=judge_dependent(thresholds, judge_metrics, judge_in_use=judge_in_use))
    return case if runs == case.runs else case.model_copy(update={"repeat": runs})


def classify(verdicts: Sequence[bool]) -> Stability | None:
    """The stability class of a case's per-run verdicts; None for fewer than two runs."""
    if len(verdicts) < 2:
        return None
    passed = sum(bool(v) for v in verdicts)
    return "stable_pass" if passed == len(verdicts) else "stable_fail" if passed == 0 else "flaky"


def passed_runs(record: Mapping[str, Any]) -> tuple[int, int] | None:
    """(runs passed, runs) of a repeated record; None for a record with fewer than two runs."""
    repeats = record.get("repeats")
    if not isinstance(repeats, list) or len(repeats) < 2:
        return None
    return sum(bool(r.get("passed")) for r in repeats if isinstance(r, Mapping)), len(repeats)


def stability_of(record: Mapping[str, Any]) -> Stability | None:
    """A record's class: its ``stability``, else (records of older versions) derived from ``repeats``."""
    value = record.get("stability")
    for klass in CLASSES:
        if value == klass:
            return klass
    repeats = record.get("repeats")
    if not isinstance(repeats, list):
        return None
    return classify([bool(r.get("passed")) for r in repeats if isinstance(r, Mapping)])


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def run_ranges(repeats: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per metric (timings left out), max minus min over the runs that scored it (two runs at least)."""
    values: dict[str, list[float]] = {}
    for run in repeats:
        metrics = run.get("metrics") if isinstance(run, Mapping) else None
        for name, value in (metrics or {}).items():
            if str(name).endswith("_ms"):
                continue  # wall time: it differs every run, and latency has its own percentiles
            number = _number(value)
            if number is not None:
                values.setdefault(str(name), []).append(number)
    return {name: max(v) - min(v) for name, v in values.items() if len(v) >= 2}


class RepeatTally:
    """Folds CaseRecords into metrics.json ``repeats`` (see the module docstring). Keeps a few numbers per repeated case."""

    def __init__(self) -> None:
        self._cases: dict[str, tuple[Stability, int, int, dict[str, float]]] = {}

    def add(self, key: str, record: Mapping[str, Any], outcome: str) -> None:
        """Count ``record`` (its ``key`` is its node id) when it is a repeated case that ran to a verdict."""
        if outcome in _UNSCORED:
            return
        klass, counts = stability_of(record), passed_runs(record)
        if klass is None or counts is None:
            return
        repeats = [r for r in record.get("repeats") or [] if isinstance(r, Mapping)]
        self._cases[key] = (klass, counts[0], counts[1], run_ranges(repeats))

    def result(self) -> dict[str, Any]:
        """``{repeated_cases, stable_pass, flaky, stable_fail, flake_rate, flaky_cases, spread_measure, spread}``."""
        keys = sorted(self._cases)
        counts: dict[str, int] = {name: sum(self._cases[k][0] == name for k in keys) for name in CLASSES}
        ranges: dict[str, list[float]] = {}
        for key in keys:
            for name, value in self._cases[key][3].items():
                ranges.setdefault(name, []).append(value)
        return {
            "repeated_cases": len(keys),
            **counts,
            "flake_rate": counts["flaky"] / len(keys) if keys else None,
            "flaky_cases": [
                {"key": k, "passed_runs": self._cases[k][1], "runs": self._cases[k][2]}
                for k in keys
                if self._cases[k][0] == "flaky"
            ],
            "spread_measure": SPREAD_MEASURE,
            "spread": {name: math.fsum(v) / len(v) for name, v in sorted(ranges.items())},
        }


def runs_passed_text(passed: int, runs: int) -> str:
    """``"2 of 3 runs passed"``: the words every report uses for a repeated case."""
    return f"{passed} of {runs} runs passed"
