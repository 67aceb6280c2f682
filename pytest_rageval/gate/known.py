"""Known failures: a case that failed in the baseline and fails now the same way is no regression.

With a baseline, each case's verdict is set against the baseline's entry of the same case (metrics.json
``cases``, paired by key, only while its definition hash is the same):

- ``known``: it failed in the baseline and misses now only metrics it missed then, none of them worse
  (lower, or higher for a lower-is-better metric): reported as xfailed with the reason
  ``known failure since <baseline run_id>: <metric> = <value> (needs <op> <threshold>)``;
- ``worse``: it failed in the baseline too, but now misses another metric or a missed one got worse: it
  fails, and its message says how it moved;
- ``fixed``: it failed in the baseline and passes now (on every metric it missed then, now measured).

A case that passed in the baseline, an added or changed case, and an errored one get no verdict here: they
fail or pass on their thresholds alone. Pure; the case runner reads the baseline (engine/known_failures.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pytest_rageval.evaluation.thresholds import Miss, find_misses

__all__ = ["BaselineFailures", "KnownVerdict", "known_verdict", "miss_name", "missed_metrics"]

#: metrics.json ``cases`` outcomes that count as failed in the baseline (a known failure then is one still)
_FAILED = ("failed",)
_SLACK = 1e-9

Kind = Literal["known", "worse", "fixed"]


@dataclass(frozen=True)
class KnownVerdict:
    """How one case stands against the baseline: its kind and the line that says so."""

    kind: Kind
    text: str


@dataclass(frozen=True)
class BaselineFailures:
    """The baseline's run id and its ``cases`` entries that failed there (key -> entry)."""

    run_id: str
    failed: Mapping[str, Mapping[str, Any]]

    @classmethod
    def from_metrics(cls, baseline: Mapping[str, Any]) -> BaselineFailures:
        """The failed cases of a baseline metrics.json (a known failure there counts as failed)."""
        cases = baseline.get("cases")
        failed: dict[str, Mapping[str, Any]] = {}
        if isinstance(cases, Mapping):
            for key, entry in cases.items():
                if isinstance(entry, Mapping) and (
                    entry.get("outcome") in _FAILED or entry.get("known_failure") is True
                ):
                    failed[str(key)] = entry
        run_id = baseline.get("run_id")
        return cls(run_id=str(run_id) if run_id is not None else "the baseline", failed=failed)

    def __len__(self) -> int:
        return len(self.failed)


def missed_metrics(entry: Mapping[str, Any], thresholds: Mapping[str, Any]) -> set[str]:
    """The metrics a baseline case entry missed: its ``missed`` list, else its values against ``thresholds``
    (this run's thresholds of the case, the same while its definition is)."""
    missed = entry.get("missed")
    if isinstance(missed, list):
        return {str(m) for m in missed}
    values = entry.get("metrics")
    return {miss.metric for miss in find_misses(values if isinstance(values, Mapping) else {}, thresholds)}


def miss_name(miss: Mapping[str, Any]) -> str:
    """A miss as a known failure names it: its metric, and in a conversation its turn first (``turn 2: mrr``)."""
    turn = miss.get("turn")
    return f"turn {turn}: {miss.get('metric')}" if isinstance(turn, int) else str(miss.get("metric"))


def _value(case: Mapping[str, Any], name: str) -> Any:
    """The value behind a miss's name in a record or a metrics.json case entry: its own metric, or its turn's."""
    head, sep, metric = name.partition(": ")
    if sep and head.startswith("turn ") and head[5:].isdigit():
        turns = case.get("turns")
        index = int(head[5:]) - 1
        if not isinstance(turns, list) or not 0 <= index < len(turns) or not isinstance(turns[index], Mapping):
            return None
        values = turns[index].get("metrics")
        return values.get(metric) if isinstance(values, Mapping) else None
    values = case.get("metrics")
    return values.get(name) if isinstance(values, Mapping) else None


def _worse(op: str, new: Any, old: Any) -> bool:
    """Whether ``new`` is further from passing than ``old`` under ``op``."""
    if new is None:
        return old is not None
    if old is None or isinstance(new, bool) or isinstance(old, bool):
        return False if old is None else new != old
    if not isinstance(new, (int, float)) or not isinstance(old, (int, float)):
        return False
    if op == "<=":
        return new > old + _SLACK
    if op == ">=":
        return new < old - _SLACK
    return False


def _fmt(value: Any) -> str:
    if value is None:
        return "not measured"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def known_verdict(baseline: BaselineFailures, record: Mapping[str, Any]) -> KnownVerdict | None:
    """How ``record`` (one CaseRecord, before its outcome) stands against the baseline; None: no verdict."""
    entry = baseline.failed.get(str(record.get("key")))
    if entry is None or record.get("error"):
        return None
    old_def, new_def = entry.get("definition"), record.get("definition")
    if not isinstance(old_def, str) or not isinstance(new_def, str) or old_def != new_def:
        return None
    thresholds = record.get("thresholds") or {}
    was_missed = missed_metrics(entry, thresholds)
    misses: Sequence[Mapping[str, Any]] = record.get("misses") or []
    if not misses:
        if was_missed and all(_value(record, m) is not None for m in was_missed):
            return KnownVerdict("fixed", f"fixed since {baseline.run_id}")
        return None
    moved: list[str] = []
    for miss in misses:
        metric, op = miss_name(miss), str(miss.get("op"))
        if metric not in was_missed:
            moved.append(
                f"{metric} now misses too ({_fmt(miss.get('value'))}, needs {op} {_fmt(miss.get('threshold'))})"
            )
        elif _worse(op, miss.get("value"), _value(entry, metric)):
            moved.append(f"{metric} {_fmt(_value(entry, metric))} → {_fmt(miss.get('value'))}")
    if moved:
        return KnownVerdict("worse", f"failed in {baseline.run_id} too, and got worse: " + "; ".join(moved))
    described = "; ".join(
        Miss(miss_name(m), m.get("value"), m.get("threshold", 0), str(m.get("op"))).describe() for m in misses
    )
    return KnownVerdict("known", f"known failure since {baseline.run_id}: {described}")
