"""The records coming in where results are kept: each case's record taken off its test report, streamed to
results.jsonl (with its per-case ``config``) and folded into the aggregates and the spot check's sample.

A resumed run's records are folded in without being written again; ``one_record_per_selected_case`` tells
whether such a run is now complete. A record that cannot be written (disk full) is not counted, and the first
such failure is reported once through ``on_write_error``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_rageval.evaluation.selection import Selection
from pytest_rageval.gate.aggregate import Aggregator
from pytest_rageval.judges.spot_sample import SpotSample
from pytest_rageval.runs.artifacts import with_seed_keys, writable_record
from pytest_rageval.runs.folder import RunFolder

from . import signals

#: the attributes of a test report that carry records (a case's; a handwritten test's several)
REPORT_ATTRIBUTES = ("rageval_case", "rageval_records")


class Intake:
    """The records of the run: results.jsonl (once ``start`` names the run folder), the aggregates, the spot sample."""

    def __init__(self, *, spot_check: int, keep_keys: bool, on_write_error: Callable[[str], None]) -> None:
        self.spot_sample = SpotSample(spot_check)  # the judged cases to re-judge after the run
        self.aggregator = Aggregator()
        self.accepted = 0  # records folded in (resumed ones included)
        self.keep_keys = keep_keys  # a resume: (key, file) of each record kept, one per selected case checked
        self.record_keys: list[tuple[Any, Any]] = []
        self.case_config: dict[str, Any] = {}  # the per-case `config` of results.jsonl
        self.eval_files: set[str] = set()
        self.writer: RunFolder | None = None
        self.write_error: str | None = None  # results.jsonl could not be written (disk full): the session stopped
        self._on_write_error = on_write_error

    def start(self, writer: RunFolder, case_config: dict[str, Any]) -> None:
        """From now on records are written to ``writer``'s results.jsonl, each with ``case_config``."""
        self.writer = writer
        self.case_config = case_config

    def take(self, report: object) -> None:
        """Accept the records a test report carries, then drop them from it.

        Streamed to disk and folded into the aggregates: pytest keeps every report until the end,
        so the report lets go of its records to keep memory flat on long runs.
        """
        record = getattr(report, "rageval_case", None)
        for rec in [record] if record else list(getattr(report, "rageval_records", None) or []):
            with signals.held():  # a Ctrl-C between writing and counting would leave metrics.json one record short
                self.accept(rec, write=True)
        for name in REPORT_ATTRIBUTES:
            if hasattr(report, name):
                delattr(report, name)

    def accept(self, rec: dict[str, Any], *, write: bool) -> None:
        """Stream one CaseRecord to results.jsonl (``write``; a resumed one is there already) and fold it into the aggregates."""
        spot = rec.pop("spot_input", None)  # full contexts: never written
        if write:  # a record that cannot be written becomes an error saying why (counted so in metrics.json too)
            written = self._write(rec)
            if written is None:
                return  # metrics.json counts only what results.jsonl holds
            rec = written
        self.accepted += 1
        if self.keep_keys:
            self.record_keys.append((rec.get("key"), rec.get("file")))
        if spot is not None:
            self.spot_sample.offer(rec["key"], spot)
        self.aggregator.add(rec)
        if rec.get("file") and not rec.get("invalid_line"):  # a bad line's file counts where it was collected
            self.eval_files.add(rec["file"])

    def _write(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        """Append ``rec`` as written (``writable_record``) to results.jsonl and return it; None when the write failed.

        A failed write (disk full) stops the session once, not as an INTERNALERROR.
        """
        assert self.writer is not None
        if self.write_error is not None:
            return None
        rec = writable_record(with_seed_keys(rec, self.config_for(rec)))
        try:
            self.writer.add(rec)
        except OSError as exc:
            self.write_error = (
                f"pytest-rageval: cannot write {self.writer.results_path}: {exc.strerror or exc}; "
                "the run stops here (resume it once it can be written)"
            )
            self._on_write_error(self.write_error)
            return None
        return rec

    def config_for(self, rec: dict[str, Any]) -> dict[str, Any]:
        """The per-case ``config`` of ``rec``; a config of the matrix holds the k it was scored at."""
        params = rec.get("matrix")
        if not isinstance(params, dict):
            return self.case_config
        depth = params.get("k", params.get("top_k"))
        return {**self.case_config, "k": depth if depth is not None else self.case_config["k"]}

    def one_record_per_selected_case(self, selection: Selection) -> bool:
        """A resumed run is complete only when every selected eval-set item has exactly one record."""
        files = set(selection.collected)
        keys = [k for k, f in self.record_keys if f in files]
        return len(keys) == len(set(keys)) == selection.selected
