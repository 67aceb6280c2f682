"""The baseline read from disk: a metrics.json file, a run folder or an output folder with ``latest``, its gated
values checked."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_rageval import safejson
from pytest_rageval.errors import BaselineError
from pytest_rageval.runs import readback
from pytest_rageval.runs.store import metrics_file

from .gated_values import gate_names

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
    """The values :func:`comparable_values` compares, as stored: the known metrics' aggregates, rates and latency percentiles."""
    agg = metrics_json.get("aggregate_metrics") or {}
    raw = {key: agg[key] for key in sorted(gate_names()) if key in agg}
    operational = agg.get("operational_metrics")
    if isinstance(operational, Mapping):
        raw.update(
            {
                key: operational[key]
                for key in ("error_rate", "timeout_rate", "empty_response_rate")
                if key in operational
            }
        )
    latency = agg.get("latency")
    if isinstance(latency, Mapping):
        raw.update({f"latency_{key}": latency[key] for key in ("p50_ms", "p95_ms") if key in latency})
        raw.update({key: latency[key] for key in ("ttft_p50_ms", "ttft_p95_ms") if key in latency})
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
