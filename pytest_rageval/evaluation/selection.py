"""Which eval-set cases a run selected out of those its eval set holds.

Pure: no pytest, no I/O. The session counts the eval-set items it collects
(cases and invalid lines, per file) and those deselected before running (``-k``,
``-m``, ``--lf``, a shard); an xdist worker reports its counts to the
controller through ``workeroutput`` (every worker collects the same items).
metrics.json then says whether the run covered its eval set (``partial``), and
the session moves ``latest`` only for runs that did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Selection", "merged_selection", "not_whole", "run_scope_notes"]


@dataclass
class Selection:
    """Eval-set items collected per file, and how many were deselected (by a shard or otherwise)."""

    collected: dict[str, int] = field(default_factory=dict)
    deselected: int = 0  # by -k, -m, --lf, ...: the run is a subset of what it was asked to run
    out_of_shard: int = 0  # not in this run's --rageval-shard share

    def add_collected(self, file: str) -> None:
        self.collected[file] = self.collected.get(file, 0) + 1

    @property
    def in_eval_set(self) -> int:
        return sum(self.collected.values())

    @property
    def selected(self) -> int:
        return self.in_eval_set - self.deselected - self.out_of_shard

    @property
    def whole_share(self) -> bool:
        """Nothing was deselected but for the shard: the run covers its share of the eval set."""
        return self.deselected == 0

    def fields(self, shard: str | None) -> dict[str, Any]:
        """metrics.json's ``partial``, ``cases_in_eval_set``, ``cases_selected`` and ``shard``."""
        if not self.collected:  # nothing known (an xdist controller whose workers all crashed, no eval set)
            return {"partial": False, "cases_in_eval_set": None, "cases_selected": None, "shard": shard}
        return {
            "partial": self.selected < self.in_eval_set,
            "cases_in_eval_set": self.in_eval_set,
            "cases_selected": self.selected,
            "shard": shard,
        }

    def as_dict(self) -> dict[str, Any]:
        """For ``workeroutput`` (plain JSON types)."""
        return {"collected": dict(self.collected), "deselected": self.deselected, "out_of_shard": self.out_of_shard}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Selection:
        collected = data.get("collected") or {}
        return cls(
            collected={str(k): int(v) for k, v in collected.items()},
            deselected=int(data.get("deselected") or 0),
            out_of_shard=int(data.get("out_of_shard") or 0),
        )


def merged_selection(runs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The selection fields of a run merged from shard runs (their metrics.json): selections add up."""
    runs = list(runs)
    sizes = [r["cases_in_eval_set"] for r in runs if isinstance(r.get("cases_in_eval_set"), int)]
    chosen = [r["cases_selected"] for r in runs if isinstance(r.get("cases_selected"), int)]
    if not sizes or len(chosen) != len(runs):
        return {"partial": False, "cases_in_eval_set": None, "cases_selected": None, "shard": None}
    in_eval_set, selected = max(sizes), sum(chosen)
    return {
        "partial": selected < in_eval_set,
        "cases_in_eval_set": in_eval_set,
        "cases_selected": selected,
        "shard": None,
    }


def run_scope_notes(metrics: Mapping[str, Any]) -> list[str]:
    """Short marks for a run that does not stand for its whole eval set: partial, shard, all errors, incomplete."""
    notes: list[str] = []
    if metrics.get("shard"):
        notes.append(f"shard {metrics['shard']}")
    if metrics.get("partial"):
        notes.append(f"partial {metrics.get('cases_selected')}/{metrics.get('cases_in_eval_set')}")
    if metrics.get("all_error"):
        notes.append("all errors")
    if metrics.get("complete") is False:
        notes.append("incomplete")
    return notes


def not_whole(metrics: Mapping[str, Any]) -> str | None:
    """``partial``, ``all-error`` or ``incomplete`` for a run that does not stand for its eval set, else None.

    Trends chart only whole runs: a subset or a failed run beside full runs reads as a change that is not one.
    """
    if metrics.get("all_error"):
        return "all-error"
    if metrics.get("partial"):
        return "partial"
    if metrics.get("complete") is False:
        return "incomplete"
    return None
