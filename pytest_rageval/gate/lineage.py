"""Trends across eval-set edits: which runs form one series, where the eval set was edited, and how each run
compares with the one before it on the cases both share unchanged (same key, same definition hash).

A run continues the series of the run before it when both ran the same eval set (``eval_set_hash``) or they
share at least one unchanged case; an edit (cases added, changed or removed) is a mark on the series, not a
new one. Pure: metrics.json dicts in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_rageval import safejson
from pytest_rageval.runs.store import RunStore

from .statistics import per_case_getters

__all__ = ["Edit", "edit_between", "lineages", "linked_history", "paired_change"]

#: the key of a history entry that says how the run relates to the one before it (``linked_history``)
LINK = "since_previous"


def _cases(run: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    cases = run.get("cases")
    return {str(k): v for k, v in cases.items() if isinstance(v, Mapping)} if isinstance(cases, Mapping) else {}


def _unchanged(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Keys of the cases both runs hold with the same definition (a side without one taken as unchanged)."""
    a, b = _cases(old), _cases(new)
    same = []
    for key in sorted(set(a) & set(b)):
        da, db = a[key].get("definition"), b[key].get("definition")
        if not (isinstance(da, str) and isinstance(db, str) and da != db):
            same.append(key)
    return same


@dataclass(frozen=True)
class Edit:
    """An eval-set edit between two runs: cases added, changed and removed, and how many both share unchanged."""

    added: int
    changed: int
    removed: int
    shared: int

    def describe(self) -> str:
        """``eval set edited: 2 added, 1 changed, 0 removed (18 cases unchanged)``."""
        return f"eval set edited: {self.added} added, {self.changed} changed, {self.removed} removed ({self.shared} cases unchanged)"


def _link(new: Mapping[str, Any]) -> Mapping[str, Any] | None:
    link = new.get(LINK)
    return link if isinstance(link, Mapping) else None


def edit_between(old: Mapping[str, Any], new: Mapping[str, Any]) -> Edit | None:
    """The edit between two consecutive runs, or None when they ran the same eval set."""
    link = _link(new)
    if link is not None and link.get("previous") == old.get("run_id"):
        edit = link.get("edit")
        return Edit(**edit) if isinstance(edit, Mapping) else None
    a, b = old.get("eval_set_hash"), new.get("eval_set_hash")
    if a == b or a is None or b is None:
        return None
    a, b = _cases(old), _cases(new)
    shared = _unchanged(old, new)
    both = set(a) & set(b)
    return Edit(
        added=len(set(b) - set(a)), changed=len(both) - len(shared), removed=len(set(a) - set(b)), shared=len(shared)
    )


def _continues(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    link = _link(new)
    if link is not None and link.get("previous") == old.get("run_id"):
        return bool(link.get("continues"))
    a, b = old.get("eval_set_hash"), new.get("eval_set_hash")
    if a == b or a is None or b is None:  # a run that recorded no eval set is taken as of this one (as before)
        return True
    return bool(_unchanged(old, new))


def lineages(runs: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The runs (oldest first) cut into series: each run joins the most recent series whose last run it
    continues (runs of another eval set in between do not cut a series), else starts one."""
    series: list[list[dict[str, Any]]] = []
    for run in runs:
        home = next((s for s in reversed(series) if _continues(s[-1], run)), None)
        if home is None:
            series.append([run])
        else:
            home.append(run)
    return series


def paired_change(old: Mapping[str, Any], new: Mapping[str, Any], metric: str) -> tuple[float | None, int]:
    """How ``metric`` (an aggregate) moved from ``old`` to ``new`` over the cases both share unchanged and scored:
    the mean per-case difference and the number of pairs (None, 0 when there is none)."""
    link = _link(new)
    if link is not None and link.get("previous") == old.get("run_id") and isinstance(link.get("changes"), Mapping):
        change = link["changes"].get(metric)
        return (float(change[0]), int(change[1])) if isinstance(change, list) and len(change) == 2 else (None, 0)
    getter = per_case_getters().get(metric)
    if getter is None:
        return None, 0
    a, b = _cases(old), _cases(new)
    diffs = []
    for key in _unchanged(old, new):
        before, after = getter(a[key]), getter(b[key])
        if before is not None and after is not None:
            diffs.append(after - before)
    return (sum(diffs) / len(diffs), len(diffs)) if diffs else (None, 0)


def _full(store: RunStore, run: Mapping[str, Any], known: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]:
    """A history entry's whole metrics.json (its ``cases`` included), or the entry itself when it cannot be read."""
    run_id = str(run.get("run_id"))
    if run_id in known:
        return known[run_id]
    try:
        data = safejson.read_file(store.run(run_id).metrics_path)
    except (safejson.JsonFileError, OSError, ValueError):
        return run
    return data if isinstance(data, Mapping) else run


def linked_history(
    output_dir: Path,
    metrics: Sequence[str],
    *,
    limit: int | None = 30,
    skipped: list[str] | None = None,
    known: Mapping[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """``RunStore.history`` (entries without their ``cases``), each entry after the first told how it relates to
    the one before it (``since_previous``: continues the series, the eval-set edit, and each of ``metrics`` moved
    over the cases both share unchanged), read two metrics.json files at a time."""
    store = RunStore(output_dir)
    runs = store.history(limit=limit, skipped=skipped, known=known)
    known = known or {}
    previous: Mapping[str, Any] | None = None
    for run in runs:
        full = _full(store, run, known)
        if previous is not None:
            edit = edit_between(previous, full)
            run[LINK] = {
                "previous": previous.get("run_id"),
                "continues": _continues(previous, full),
                "edit": asdict(edit) if edit is not None else None,
                "changes": {m: [d, n] for m in metrics for d, n in [paired_change(previous, full, m)] if d is not None},
            }
        previous = full
    return runs
