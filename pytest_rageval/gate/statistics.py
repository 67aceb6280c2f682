"""The paired statistics of a comparison: per-case values of each compared name, the paired delta and its seeded
bootstrap interval, the largest drops. Deterministic: ``random.Random(seed)`` in every environment."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_rageval.evaluation import registry

from .aggregate import as_number, percentile
from .gated_values import SLACK, UNSCORED

# --------------------------------------------------------------------------- bootstrap


def bootstrap_interval(
    diffs: Sequence[float], *, samples: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float] | None:
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


def is_scored(case: Mapping[str, Any]) -> bool:
    return case.get("outcome") not in UNSCORED


def metric_getter(metric: str) -> Getter:
    def get(case: Mapping[str, Any]) -> float | None:
        if not is_scored(case):
            return None
        metrics = case.get("metrics") or {}
        return as_number(metrics.get(metric))

    return get


def _paired_getter(mean: registry.CaseMean) -> Getter:
    """A scored case's value behind one metric aggregate, as the registry defines it (``mean.paired``)."""

    def get(case: Mapping[str, Any]) -> float | None:
        if not is_scored(case):
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


#: latency percentiles, compared over the latencies (times to first token) of the paired cases (no interval)
LATENCY_QUANTILES: dict[str, float] = {
    "latency_p50_ms": 50.0,
    "latency_p95_ms": 95.0,
    "ttft_p50_ms": 50.0,
    "ttft_p95_ms": 95.0,
}


def paired_values(
    shared: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], getter: Getter
) -> list[tuple[float, float]]:
    """(old, new) of every shared case where both values exist."""
    out: list[tuple[float, float]] = []
    for old_case, new_case in shared:
        old, new = getter(old_case), getter(new_case)
        if old is not None and new is not None:
            out.append((old, new))
    return out


def turn_pairs(
    shared: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]],
) -> dict[str, tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """What the paired statistics pair: each shared case, and a conversation's turns in its place, paired by case
    and turn index (``"<key> turn 2"``; the turns both runs have)."""
    out: dict[str, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
    for key, (old, new) in shared.items():
        old_turns, new_turns = old.get("turns"), new.get("turns")
        if isinstance(old_turns, list) and isinstance(new_turns, list):
            for index, (old_turn, new_turn) in enumerate(zip(old_turns, new_turns), start=1):
                if isinstance(old_turn, Mapping) and isinstance(new_turn, Mapping):
                    out[f"{key} turn {index}"] = (old_turn, new_turn)
        else:
            out[key] = (old, new)
    return out


#: cases named for each regressed metric (the largest paired drops)
MAX_DROPS = 10


def largest_drops(
    shared: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]],
    getter: Getter,
    *,
    lower: bool,
    limit: int = MAX_DROPS,
) -> list[dict[str, Any]]:
    """The shared cases whose value moved the bad way most (down; up for a lower-is-better metric), at most
    ``limit``, worst first (ties by key): whether or not their outcome flipped, these are the cases behind a drop."""
    moved: list[tuple[float, str, float, float]] = []
    for key, (old_case, new_case) in shared.items():
        old, new = getter(old_case), getter(new_case)
        if old is None or new is None:
            continue
        worse = new - old if lower else old - new
        if worse > SLACK:
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


def latency_delta(pairs: Sequence[tuple[float, float]], q: float) -> tuple[float, float, float]:
    old = percentile(sorted(o for o, _ in pairs), q)
    new = percentile(sorted(v for _, v in pairs), q)
    assert old is not None and new is not None
    return old, new, new - old
