"""An ASCII sparkline of one aggregate over runs (``rageval history --metric``): pure, no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pytest_rageval.evaluation import registry

__all__ = ["LEVELS", "MISSING", "aggregate_key", "scale_of", "sparkline"]

#: lowest to highest, one character a run
LEVELS = "_.-~=+*#"
#: a run without a number for the metric
MISSING = " "


def aggregate_key(name: str) -> str | None:
    """The metrics.json aggregate a name means: an aggregate key as is (``mrr_avg``), or a metric's (``mrr``)."""
    metric = registry.get(name)
    if metric is not None:
        return metric.aggregate
    known = {m.aggregate for m in registry.metrics() if m.aggregate} | set(registry.abstention_aggregates())
    return name if name in known else None


def scale_of(key: str) -> tuple[float, float]:
    """The axis of an aggregate: its metric's scale (0-1, or 0-5 for a five-point judge score)."""
    for metric in registry.metrics():
        if metric.aggregate == key:
            return metric.scale
    return (0.0, 1.0)  # the abstention aggregates: rates


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def sparkline(values: Sequence[Any], scale: tuple[float, float]) -> str:
    """One character per value on the metric's own scale (not min to max: a small dip stays small)."""
    low, high = scale
    span = (high - low) or 1.0
    out = []
    for value in values:
        number = _number(value)
        if number is None:
            out.append(MISSING)
            continue
        share = min(1.0, max(0.0, (number - low) / span))
        out.append(LEVELS[min(len(LEVELS) - 1, int(share * len(LEVELS)))])
    return "".join(out)
