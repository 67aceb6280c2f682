"""What the reports know of the baseline: the gate's outcome (:class:`GateOutcome`) and its cases (:class:`BaselineCases`).

The run controller builds a :class:`GateOutcome` from its gate (reasons already masked: a hostile baseline may
hold secrets) and metrics.json keeps it (``comparison.gate``), so ``rageval report RUN`` rebuilds the same
verdict (:func:`outcome_from_metrics`). :class:`BaselineCases` is the baseline's per-case data: the ``cases``
of its metrics.json (outcome and metric values) and, when a results.jsonl lies beside it (a run folder, or a
baseline folder written by ``--rageval-update-baseline``), each old record looked up by key through
``runs.folder.RecordIndex`` (one at a time, never the whole run). :func:`verdict_kind` is the one wording of the
verdict that report.html and the CI summary (markdown.py) share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_rageval import defaults
from pytest_rageval.gate.baseline_file import load_baseline
from pytest_rageval.gate.compare import Comparison, MetricDelta
from pytest_rageval.runs.folder import RecordIndex, RunFolder
from pytest_rageval.runs.store import metrics_file
from pytest_rageval.sanitize import cap

__all__ = ["BaselineCases", "GateOutcome", "comparison_from_dict", "outcome_from_metrics", "verdict_kind"]


def verdict_kind(comparison: Comparison | None, gate_failed: bool, refused: bool = False) -> str:
    """``refused``, ``failed``, ``not gated``, ``allowed`` (regressions let through) or ``passed``."""
    if refused or (comparison is not None and comparison.refused):
        return "refused"
    if gate_failed:
        return "failed"
    if comparison is None:
        return "not gated"
    if comparison.regressed:  # and yet not failed: --rageval-allow-regressions
        return "allowed"
    return "passed"


@dataclass(frozen=True)
class GateOutcome:
    """The gate's decision on a run, as the reports show it.

    ``comparison`` is None when no baseline was compared (none given, none found, ``--rageval-update-baseline``,
    or one refused while it was read); ``reason`` is the gate's one line, masked; ``baseline`` the path given.
    """

    comparison: Comparison | None = None
    failed: bool = False
    reason: str = ""
    refused: bool = False
    baseline: str | None = None

    @property
    def kind(self) -> str:
        """See :func:`verdict_kind`."""
        return verdict_kind(self.comparison, self.failed, self.refused)

    @property
    def flipped_to_fail(self) -> list[str]:
        return list(self.comparison.flipped_to_fail) if self.comparison is not None else []

    @property
    def flipped_to_pass(self) -> list[str]:
        return list(self.comparison.flipped_to_pass) if self.comparison is not None else []

    def as_dict(self) -> dict[str, Any]:
        """What metrics.json keeps of it (``comparison.gate``) beside the comparison itself."""
        return {"failed": self.failed, "reason": self.reason, "refused": self.refused}


def comparison_from_dict(data: Mapping[str, Any]) -> Comparison | None:
    """A :class:`Comparison` back from metrics.json's ``comparison`` block (None when it holds none)."""
    if not isinstance(data, Mapping) or "status" not in data or "deltas" not in data:
        return None
    names = {f.name for f in fields(MetricDelta)}
    unknown = {"old": None, "new": None, "delta": None, "tolerance": None, "regressed": False}  # a field not recorded
    deltas = [
        MetricDelta(**{**unknown, **{k: v for k, v in d.items() if k in names}})
        for d in data.get("deltas") or []
        if isinstance(d, Mapping) and "name" in d
    ]
    lists = (
        "flipped_to_fail",
        "flipped_to_pass",
        "invariant_differences",
        "coverage_failures",
        "added_cases",
        "removed_cases",
        "changed_cases",
    )
    return Comparison(
        deltas=deltas,
        **{name: [str(x) for x in data.get(name) or []] for name in lists},
        shared_cases=data.get("shared_cases"),
        baseline_cases=data.get("baseline_cases"),
        current_cases=data.get("current_cases"),
        not_compared=data.get("not_compared"),
        refused=data.get("status") == "refused",
    )


def outcome_from_metrics(metrics: Mapping[str, Any]) -> GateOutcome:
    """The outcome a run recorded in its metrics.json (no ``comparison`` block: not gated)."""
    block = metrics.get("comparison")
    if not isinstance(block, Mapping):
        return GateOutcome()
    found = block.get("gate")
    gate: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    comparison = comparison_from_dict(block)
    failed = bool(gate.get("failed")) if "failed" in gate else (comparison is not None and not comparison.passed)
    baseline = block.get("baseline")
    return GateOutcome(
        comparison=comparison,
        failed=failed,
        reason=str(gate.get("reason") or ""),
        refused=bool(gate.get("refused")) or block.get("status") == "refused",
        baseline=str(baseline) if baseline else None,
    )


@dataclass
class BaselineCases:
    """The baseline's cases: ``cases`` of its metrics.json, and its old records when its results.jsonl is there.

    ``records_missing`` says why old answers and chunks cannot be shown ("" when they can).
    """

    cases: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    records: RecordIndex | None = None
    records_missing: str = ""
    run_id: str | None = None
    metrics: Mapping[str, Any] | None = None  # its metrics.json (trend charts draw its values)

    @classmethod
    def load(cls, path: str | Path) -> BaselineCases | None:
        """From a baseline path as ``--rageval-baseline`` takes it; None when there is no usable metrics.json."""
        try:
            metrics_path = metrics_file(path)
            metrics = load_baseline(metrics_path)
        except (ValueError, OSError):
            return None
        if metrics is None:
            return None
        return cls.from_metrics(metrics, metrics_path.parent)

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any], folder: Path | None) -> BaselineCases:
        raw = metrics.get("cases")
        cases = {str(k): v for k, v in raw.items() if isinstance(v, Mapping)} if isinstance(raw, Mapping) else {}
        run_id = str(metrics["run_id"]) if metrics.get("run_id") else None
        found = cls._from_folder(cases, run_id, folder)
        found.metrics = metrics
        return found

    @classmethod
    def _from_folder(
        cls, cases: dict[str, Mapping[str, Any]], run_id: str | None, folder: Path | None
    ) -> BaselineCases:
        """The cases with the old records of ``folder``'s results.jsonl, or the reason there are none."""
        results = folder / RunFolder.RESULTS if folder is not None else None
        if folder is None or results is None or not results.is_file():
            where = f" beside {folder / RunFolder.METRICS}" if folder is not None else ""
            return cls(
                cases,
                None,
                f"the baseline has no {RunFolder.RESULTS}{where} (a lone metrics.json holds metric "
                "values only; point the baseline at a run folder, or at a folder that "
                "--rageval-update-baseline fills, to keep old answers)",
                run_id,
            )
        try:
            index = RunFolder(folder).record_index()
        except (OSError, ValueError) as exc:
            return cls(cases, None, f"{results} cannot be read: {exc}", run_id)
        return cls(cases, index, "", run_id)

    def case(self, key: Any) -> Mapping[str, Any] | None:
        """The baseline's metrics.json entry of ``key`` (outcome, metrics), or None."""
        return self.cases.get(key) if isinstance(key, str) else None

    def record(self, key: Any) -> dict[str, Any] | None:
        """The baseline's record of ``key`` from its results.jsonl, or None; its answer cut to the default
        ``rageval_max_answer_chars`` (a record edited by hand, or made with a larger cap, stays that long)."""
        if self.records is None or not isinstance(key, str):
            return None
        record = self.records.get(key)
        if record is not None:
            for name in ("answer", "abstain_reason"):
                if isinstance(record.get(name), str):
                    record[name] = cap(record[name], defaults.MAX_ANSWER_CHARS, name)[0]
        return record
