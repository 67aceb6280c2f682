"""Threshold resolution, pass/fail of one case, and failure messages.

Pure: no pytest import. Order of precedence, lowest first: built-in defaults,
``[tool.rageval.thresholds]``, ``[tool.rageval.thresholds.<category>]``, the
case's ``thresholds`` field, ``--rageval-threshold``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_rageval.errors import ConfigError
from pytest_rageval.sanitize import terminal_safe

from . import registry
from .record import MissRecord
from .registry import Threshold
from .schema import EvalCase


def metric_names() -> tuple[str, ...]:
    """Every per-case metric a threshold may name (the metric registry's)."""
    return registry.metric_names()


def judge_metrics() -> frozenset[str]:
    """The metrics a judge scores: thresholds on them apply only when a judge is on."""
    return frozenset(registry.metric_names("judge"))


class ThresholdError(ConfigError):
    """A threshold names an unknown metric or has a value of the wrong type."""


@dataclass(frozen=True)
class Miss:
    """One metric that missed its threshold."""

    metric: str
    value: Any
    threshold: Threshold
    op: str

    def describe(self) -> str:
        shown = "not measured" if self.value is None else _fmt(self.value)
        return f"{self.metric} = {shown} (needs {self.op} {_fmt(self.threshold)})"

    def as_dict(self) -> MissRecord:
        """The miss as a record's ``misses`` holds it."""
        return {"metric": self.metric, "value": self.value, "threshold": self.threshold, "op": self.op}


@dataclass(frozen=True)
class ThresholdConfig:
    """Configured thresholds: global, per category, and command-line overrides."""

    global_: Mapping[str, Threshold]
    by_category: Mapping[str, Mapping[str, Threshold]]
    cli: Mapping[str, Threshold]

    @classmethod
    def empty(cls) -> ThresholdConfig:
        return cls({}, {}, {})


def op_for(metric: str) -> str:
    """The comparison a threshold on ``metric`` means (``>=`` for a name the registry does not know)."""
    known = registry.get(metric)
    return known.op if known is not None else ">="


def check_metric_name(metric: str, where: str) -> None:
    """Raise ThresholdError naming ``where`` when ``metric`` is not a known metric."""
    names = metric_names()
    if metric not in names:
        close = difflib.get_close_matches(metric, names, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ThresholdError(f"{where}: unknown metric '{metric}'{hint}")


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float (an int, a float or the text of one), else None: ``nan``, ``inf``, a bool and
    a number beyond float range (a 400-digit integer) would switch a check off or crash it."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def coerce_threshold(metric: str, value: Any, where: str) -> Threshold:
    """Validate one threshold value: a bool for ``abstained``, a number otherwise."""
    check_metric_name(metric, where)
    if op_for(metric) == "==":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ThresholdError(f"{where}: threshold of '{metric}' must be true or false, got {value!r}")
    number = finite_number(value)
    if number is None:
        raise ThresholdError(f"{where}: threshold of '{metric}' must be a finite number, got {number_text(value)}")
    return number


def number_text(value: Any) -> str:
    """``value`` for a message, a huge number cut (a 400-digit integer)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_threshold_table(
    table: Mapping[str, Any], where: str
) -> tuple[dict[str, Threshold], dict[str, dict[str, Threshold]]]:
    """Split ``[tool.rageval.thresholds]`` into global values and per-category sub-tables."""
    global_: dict[str, Threshold] = {}
    by_category: dict[str, dict[str, Threshold]] = {}
    for name, value in table.items():
        if isinstance(value, Mapping):
            by_category[name] = {m: coerce_threshold(m, v, f"{where}.{name}") for m, v in value.items()}
        else:
            global_[name] = coerce_threshold(name, value, where)
    return global_, by_category


def parse_cli_thresholds(items: list[str], option: str = "--rageval-threshold") -> dict[str, Threshold]:
    """Parse repeated ``--rageval-threshold METRIC=VALUE`` options (``option``: the name errors give)."""
    out: dict[str, Threshold] = {}
    for item in items:
        metric, sep, value = item.partition("=")
        if not sep or not metric.strip() or not value.strip():
            raise ThresholdError(f"{option}: expected METRIC=VALUE, got {item!r}")
        out[metric.strip()] = coerce_threshold(metric.strip(), value.strip(), option)
    return out


def default_thresholds(case: EvalCase, *, judge: bool) -> dict[str, Threshold]:
    """The default thresholds for every metric the configuration does not name: the registry's.

    Each metric's ``default_threshold`` for the cases in its ``default_for``
    (else ``applies_to``); a judge metric's only with a judge. One set of judge
    thresholds for every judge: the lexical judge scores so that 3 separates
    what it passes from what it fails (a contradiction caps its scores at 2), so
    it needs no thresholds of its own.
    """
    out: dict[str, Threshold] = {}
    for metric in registry.metrics():
        if metric.default_threshold is None or (metric.kind == "judge" and not judge):
            continue
        if registry.applies(metric.default_for or metric.applies_to, case):
            out[metric.name] = metric.default_threshold
    return out


def resolve_thresholds(case: EvalCase, config: ThresholdConfig, *, judge: bool) -> dict[str, Threshold]:
    """The thresholds that apply to ``case``, merged in order of precedence."""
    merged = default_thresholds(case, judge=judge)
    merged.update(config.global_)
    merged.update(config.by_category.get(case.category, {}))
    merged.update(case.thresholds)
    merged.update(config.cli)
    if not judge:
        judged = judge_metrics()
        merged = {m: v for m, v in merged.items() if m not in judged}
    return merged


def find_misses(metrics: Mapping[str, Any], thresholds: Mapping[str, Threshold]) -> list[Miss]:
    """Every metric that misses its threshold.

    A metric that does not apply (null) is not checked, except ``abstained``,
    which applies to every case: unknown abstention misses an abstention threshold.
    """
    misses: list[Miss] = []
    for metric, threshold in thresholds.items():
        value = metrics.get(metric)
        op = op_for(metric)
        if value is None:
            if op == "==":
                misses.append(Miss(metric, None, threshold, op))
            continue
        if op == "==":
            ok = bool(value) == bool(threshold)
        elif op == "<=":
            ok = value <= threshold + 1e-12
        else:
            ok = value >= threshold - 1e-12
        if not ok:
            misses.append(Miss(metric, value, threshold, op))
    return misses


def describe_runs(repeats: Sequence[Mapping[str, Any]], shown_run: int | None) -> str | None:
    """For a repeated case's failure message: how many runs passed and which run the message shows."""
    if len(repeats) < 2:
        return None
    passed = sum(bool(run.get("passed")) for run in repeats)
    line = f"{passed} of {len(repeats)} runs passed (a repeated case passes when more than half pass)"
    if shown_run:
        line += f"; the misses, answer and retrieval below are those of run {shown_run}"
    return line


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"  # six significant digits: 0.0001 stays 0.0001, 5.005 stays 5.005
    return str(value)


def shorten(text: str | None, limit: int = 300) -> str:
    """One-line excerpt of ``text`` for messages, safe for a terminal (control characters shown escaped)."""
    flat = terminal_safe(" ".join((text or "")[: limit * 4].split()), multiline=False)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
