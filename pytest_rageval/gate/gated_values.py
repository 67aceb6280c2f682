"""What a gate compares: the gated names (the metrics' aggregates, operational rates, latency percentiles), which
way each is bad, the default tolerances, and the comparable values and cases of a metrics.json."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_rageval import defaults
from pytest_rageval.evaluation import registry

from .aggregate import as_number

#: ``[tool.rageval.gate] min_judge_coverage`` when not set
DEFAULT_MIN_JUDGE_COVERAGE = 0.95
#: ``rageval_min_shared_cases`` when not set
DEFAULT_MIN_SHARED_CASES = defaults.MIN_SHARED_CASES

#: compared names that are no metric's aggregate, in delta order
_OPERATIONAL: tuple[str, ...] = (
    "error_rate",
    "timeout_rate",
    "empty_response_rate",
    "latency_p50_ms",
    "latency_p95_ms",
    "ttft_p50_ms",
    "ttft_p95_ms",
)
#: of those (and flake_rate), every one: a rise is the bad direction
_OPERATIONAL_LOWER: frozenset[str] = frozenset({*_OPERATIONAL, "flake_rate"})


def default_tolerances() -> dict[str, float]:
    """Aggregate -> the allowed drop (rise, for a lower-is-better one) when ``[tool.rageval.gate]`` says nothing."""
    return registry.default_tolerances()


def lower_is_better() -> frozenset[str]:
    """Compared names where a rise is the bad direction (everything else: a drop is)."""
    return (
        frozenset(k for k in registry.metric_aggregates() if registry.aggregate_direction(k) == "lower")
        | _OPERATIONAL_LOWER
    )


def compared_order() -> tuple[str, ...]:
    """Order of the deltas (the metrics' aggregates, then operational ones); other numeric scalars follow, sorted."""
    return (*registry.metric_aggregates(), *_OPERATIONAL)


PASSING = ("passed", "xpassed")
FAILING = ("failed", "error", "xfailed")  # an xfail is a failure pytest expected: xfailed -> xpassed is a flip too
UNSCORED = ("error", "skipped")
SLACK = 1e-9
_NUMPY_MIN_DRAWS = 2_000_000  # below this many draws (cases x samples) pure Python is used


def comparable_values(metrics_json: Mapping[str, Any]) -> dict[str, float | None]:
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
        for key in ("ttft_p50_ms", "ttft_p95_ms"):  # streamed answers only
            if key in latency:
                out[key] = as_number(latency.get(key))
    return out


def gate_names() -> frozenset[str]:
    """Every name a ``[tool.rageval.gate]`` table may set."""
    return frozenset(compared_order()) | lower_is_better() | {"min_judge_coverage"}


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


def cases_by_id(metrics_json: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    cases = metrics_json.get("cases")
    if not isinstance(cases, Mapping):
        return {}
    return {str(k): v for k, v in cases.items() if isinstance(v, Mapping)}
