"""The gate at the end of a run: this run's metrics.json compared with the baseline (gate.gate_runs, gate.gate_verdict),
each config of a matrix with the same config of the baseline (configs.gate_configs), or the baseline written anew
(``--rageval-update-baseline``, with this run's results.jsonl kept beside a baseline folder's metrics.json).

``gate_run`` adds the comparison to ``metrics`` and says how the gate went (``GateResult``); failing the session
is the run controller's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_rageval.gate.baseline_file import load_baseline
from pytest_rageval.gate.compare import Comparison, gate_runs, gate_verdict
from pytest_rageval.gate.configs import gate_configs
from pytest_rageval.judges.canary import compare_canary
from pytest_rageval.runs.folder import RunFolder, write_json_atomic

if TYPE_CHECKING:
    from pytest_rageval.config.settings import Settings
    from pytest_rageval.report.baseline import GateOutcome


@dataclasses.dataclass
class GateResult:
    """How the gate went: the comparison made (None: none), the compared baseline's metrics.json (trend charts
    draw it), the outcome as the reports show it (None: not gated), notes for the summary, and why the session
    fails (None: it does not)."""

    comparison: Comparison | None = None
    baseline: dict[str, Any] | None = None
    outcome: GateOutcome | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    failure: str | None = None


def gate_run(settings: Settings, metrics: dict[str, Any], *, results: Path, public: Callable[[str], str]) -> GateResult:
    """Compare ``metrics`` with the baseline, or write it; ``results``: this run's results.jsonl (kept beside a
    baseline folder); ``public``: a text with credentials and secrets masked (a hostile baseline may hold either)."""
    from pytest_rageval.report.baseline import GateOutcome

    s = settings
    gated = GateResult()
    if s.baseline is None:
        if s.update_baseline:
            reason = "--rageval-update-baseline needs --rageval-baseline PATH (or ini rageval_baseline)"
            gated.notes.append(reason)
            gated.failure = reason
            gated.outcome = GateOutcome(failed=True, reason=reason)
        return gated
    # A folder, or a new path not naming a .json file, gets metrics.json inside.
    is_folder = s.baseline.is_dir() or (not s.baseline.exists() and s.baseline.suffix != ".json")
    target = RunFolder(s.baseline).metrics_path if is_folder else s.baseline
    if s.update_baseline and metrics.get("complete") is False:
        reason = (
            f"baseline not updated: the run is incomplete (a case has no result: interrupted, stopped, or a worker "
            f"died), so {target} is left as it was; run the whole eval set again to update it"
        )
        gated.notes.append(reason)
        gated.failure = reason
        gated.outcome = GateOutcome(failed=True, reason=reason, refused=True, baseline=str(s.baseline))
        return gated
    if s.update_baseline:
        gated.notes.extend(update_baseline(target, metrics, results=results, is_folder=is_folder))
        return gated
    try:
        baseline = load_baseline(s.baseline)
    except ValueError as exc:
        reason = f"baseline refused: {public(str(exc))}"
        gated.notes.append(reason)
        gated.failure = reason
        gated.outcome = GateOutcome(failed=True, reason=reason, refused=True, baseline=str(s.baseline))
        metrics["comparison"] = {"baseline": str(s.baseline), "status": "refused", "gate": gated.outcome.as_dict()}
        return gated
    if baseline is None:
        gated.notes.append(f"warning: baseline {s.baseline} not found; no regression gate this run")
        return gated
    comparison = gated.comparison = gate_runs(
        baseline,
        metrics,
        gate=s.gate,
        significance=s.gate_significance,
        ignore_invariants=s.ignore_invariants,
        min_shared_cases=s.min_shared_cases,
    )
    metrics["comparison"] = {
        "baseline": str(s.baseline),
        "baseline_run_id": baseline.get("run_id"),
        **comparison.as_dict(),
    }
    gated.baseline = None if comparison.refused else baseline
    verdict = gate_verdict(comparison, allow_regressions=s.allow_regressions)
    canary = gate_canary(baseline, metrics, allow_regressions=s.allow_regressions, notes=gated.notes)
    if canary is not None and not verdict.failed:
        verdict = dataclasses.replace(verdict, failed=True, reason=canary, exit_code=verdict.exit_code or 1)
    gated.outcome = GateOutcome(
        comparison,
        failed=verdict.failed,
        reason=public(verdict.reason),
        refused=comparison.refused,
        baseline=str(s.baseline),
    )
    metrics["comparison"]["gate"] = gated.outcome.as_dict()  # `rageval report` shows the same verdict
    if verdict.note:
        gated.notes.append(verdict.note)
    if verdict.failed:
        gated.failure = verdict.reason
    by_config = gate_each_config(s, baseline, metrics)
    if by_config is not None and gated.failure is None:
        gated.failure = by_config
    return gated


def gate_canary(
    baseline: dict[str, Any], metrics: dict[str, Any], *, allow_regressions: bool, notes: list[str]
) -> str | None:
    """The judge canary against the baseline's (canary.compare_canary): why the gate fails (None: it does not;
    with ``allow_regressions`` the reason is a note instead); what it found goes to ``notes``."""
    current = metrics.get("judge_canary")
    if not isinstance(current, dict):
        return None
    reason, note = compare_canary(baseline.get("judge_canary"), current)
    if note is not None:
        notes.append(note)
    if reason is not None and allow_regressions:
        notes.append(reason + " (allowed by --rageval-allow-regressions)")
        return None
    if reason is not None:
        notes.append(reason)
    return reason


def gate_each_config(settings: Settings, baseline: dict[str, Any], metrics: dict[str, Any]) -> str | None:
    """A matrix run: each config gated against the same config of the baseline (configs.gate_configs), added to
    ``metrics``'s comparison; why the session fails (None: it does not, or no matrix)."""
    s = settings
    configs = gate_configs(
        baseline,
        metrics,
        gate=s.gate,
        significance=s.gate_significance,
        ignore_invariants=s.ignore_invariants,
        allow_regressions=s.allow_regressions,
    )
    if configs is None:
        return None
    metrics["comparison"]["by_config"] = configs.as_dict()
    return configs.reason() if configs.failed else None


def update_baseline(target: Path, metrics: dict[str, Any], *, results: Path, is_folder: bool) -> list[str]:
    """Write ``metrics`` as the baseline at ``target`` (a folder's records kept beside it); the notes saying so,
    and warning of a baseline with failures or made from a partial run."""
    write_json_atomic(target, metrics)
    notes = [f"baseline updated: {target}"]
    notes.extend(keep_baseline_records(target, results=results, is_folder=is_folder))
    m = metrics
    if m.get("failed") or m.get("errors"):
        notes.append(
            f"warning: the new baseline has {m.get('failed', 0)} failed and {m.get('errors', 0)} errored cases"
        )
    if m.get("partial"):
        notes.append(
            f"warning: the new baseline covers {m.get('cases_selected')} of the {m.get('cases_in_eval_set')} "
            "cases of the eval set (a partial run); later runs are compared on the cases it holds"
        )
    return notes


def keep_baseline_records(target: Path, *, results: Path, is_folder: bool) -> list[str]:
    """A baseline folder gets this run's results.jsonl beside its metrics.json, so later reports can show each
    case's old answer and chunks; a baseline named as a .json file gets nothing else (a note says so)."""
    import shutil

    kept = target.parent / RunFolder.RESULTS
    if not is_folder:
        return [
            f"{target} holds metric values only: later reports show no old answers (name a folder "
            "as --rageval-baseline to keep results.jsonl beside it)"
        ]
    try:
        shutil.copyfile(results, kept)
    except OSError as exc:
        return [f"baseline answers not kept: cannot write {kept}: {exc.strerror or exc}"]
    return []
