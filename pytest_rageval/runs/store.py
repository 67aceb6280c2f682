"""The output folder: one ``<run id>/`` folder per run (:class:`~.folder.RunFolder`) and ``latest`` naming the
newest whole run.

With :mod:`.folder`, the only code that knows the file names of a run's artifacts: everything else asks a
:class:`RunStore` or a ``RunFolder`` for a path (where a run's metrics.json is, which run ``latest`` names, where
report.html goes, which earlier runs make the history).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_rageval import safejson

from . import readback
from .folder import RunFolder

__all__ = ["RunStore", "metrics_file"]


class RunStore:
    """An output folder of runs (``--rageval-output-dir``): each run in a folder named by its run id."""

    def __init__(self, output_dir: Path | str) -> None:
        self.output_dir = Path(output_dir)

    def run(self, run_id: str) -> RunFolder:
        """The folder of run ``run_id`` (it need not exist)."""
        return RunFolder(self.output_dir / run_id)

    @property
    def latest_path(self) -> Path:
        return self.output_dir / RunFolder.LATEST

    def latest_id(self) -> str | None:
        """The run id ``latest`` names; None when there is no ``latest`` or it is empty; ValueError naming the file
        when it cannot be read."""
        if not self.latest_path.is_file():
            return None
        try:
            run_id = self.latest_path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"{self.latest_path}: cannot read: {exc}") from exc
        return run_id or None

    def history(
        self,
        *,
        limit: int | None = 30,
        skipped: list[str] | None = None,
        known: Mapping[str, dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """The metrics.json of every run here, oldest first (sorted by timestamp, then run id), each without its
        ``cases`` (what the history and the trends read is the run's own fields: a run of 100,000 cases would
        otherwise be kept whole, for each run).

        A file that cannot be read, is no object or holds a value the history cannot use is left out, with one line
        naming it (file, field, problem) added to ``skipped``; only the newest ``limit`` runs are kept (all when
        ``limit`` is None). ``known``: metrics.json of runs at hand already, by run folder name, taken as they are
        instead of reading the file again (the run being written).
        """
        if not self.output_dir.is_dir():
            return []
        paths = sorted(self.output_dir.glob(f"*/{RunFolder.METRICS}"))
        known = known or {}
        entries = (
            _without_cases(known[p.parent.name]) if p.parent.name in known else _history_entry(p, skipped)
            for p in paths
        )
        runs = [m for m in entries if m is not None]
        runs.sort(key=lambda m: (str(m.get("timestamp") or ""), str(m.get("run_id") or "")))
        if limit is None:
            return runs
        return runs[-limit:] if limit > 0 else []


def metrics_file(path: Path | str) -> Path:
    """The metrics.json a path names: the file itself, that of a run folder, or that of the run an output folder's
    ``latest`` names (ValueError when ``latest`` cannot be read)."""
    path = Path(path)
    if not path.is_dir():
        return path
    here = RunFolder(path).metrics_path
    if here.is_file():
        return here
    store = RunStore(path)
    run_id = store.latest_id()
    return store.run(run_id).metrics_path if run_id else here


def _history_entry(path: Path, skipped: list[str] | None) -> dict[str, Any] | None:
    """An older run's metrics.json, checked (readback.HISTORY_ENTRY); None, with a note in ``skipped``, when it
    cannot be read or holds a value the history cannot use."""
    try:
        data = readback.read_json(path, readback.HISTORY_ENTRY)
    except (safejson.JsonFileError, readback.ReadbackError) as exc:
        if skipped is not None:
            skipped.append(f"an older run left out of the history: {exc}")
        return None
    data.pop("cases", None)
    entry: dict[str, Any] = data
    entry.setdefault("run_id", path.parent.name)
    return entry


def _without_cases(metrics: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in metrics.items() if key != "cases"}
