"""What the run controller writes at the end of a run: the contents of metrics.json and config.json,
report.html, and the CI summary (``--rageval-summary-md``, ``$GITHUB_STEP_SUMMARY``).

A write that fails in ``write_report_html`` raises (the controller says the run folder is not complete); one that fails
in ``write_ci_summaries`` is a note. Texts from outside reach the reports through ``public`` (credentials and known
secrets masked).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_rageval import __version__
from pytest_rageval.evaluation.selection import Selection
from pytest_rageval.gate.compare import Comparison
from pytest_rageval.redact import public_args
from pytest_rageval.runs.artifacts import compose_metrics
from pytest_rageval.runs.commit import tree_dirty
from pytest_rageval.runs.folder import (
    RunFolder,
    RunFolderError,
    append_to_regular_file,
    read_records,
    write_text_atomic,
)

from .run_setup import RunSetup

if TYPE_CHECKING:
    from pytest_rageval.report.baseline import BaselineCases, GateOutcome


def metrics_json(
    setup: RunSetup,
    aggregated: dict[str, Any],
    *,
    run_id: str,
    complete: bool,
    config_hash: str,
    digests: dict[str, str],
    selection: Selection,
    served: dict[str, str | None],
    commit: str | None,
) -> dict[str, Any]:
    """metrics.json: the aggregates with the run's identity, selection, target, matrix and judge calibration."""
    s = setup.settings
    return compose_metrics(
        run_id=run_id,
        complete=complete,
        config_hash=config_hash,
        digests=digests,
        judge=setup.judge_info(),
        k=s.k,
        aggregated=aggregated,
        git_commit=commit,
        selection=selection.fields(f"{s.shard[0]}/{s.shard[1]}" if s.shard else None),
        run={
            "target": served,
            "git_dirty": tree_dirty(s.rootdir),
            **({"matrix": s.matrix.snapshot()["axes"]} if s.matrix is not None else {}),
            **({"judge_calibration": setup.calibration} if setup.calibration is not None else {}),
        },
    )


def config_json(
    setup: RunSetup,
    *,
    args: Sequence[str],
    pytest_version: str,
    identity: dict[str, Any],
    run_id: str | None,
    eval_set_hash: str | None,
    digests: dict[str, str],
    served: dict[str, str | None],
    commit: str | None,
) -> dict[str, Any]:
    """config.json: how the run was made (versions, arguments with secrets masked, the configuration and
    selection a resume must repeat, the client and the judge)."""
    s = setup.settings
    client = setup.made_target_client
    judge_setup = setup.judge_setup
    return {
        "run_id": run_id,
        "config_hash": identity["config_hash"],
        "eval_set_hash": eval_set_hash,
        "eval_set_files": digests,
        "git_commit": commit,
        "plugin_version": __version__,
        "python": sys.version.split()[0],
        "pytest": pytest_version,
        "args": public_args(args, s.redactor(os.environ)),
        "config": identity["config"],
        "selection": identity["selection"],  # what a resume must select again (resume.py)
        "client": (
            {"kind": "fixture", "fixture": "rageval_client", "served_by": served["name"]}
            if served["kind"] == "fixture"
            else client.describe()
            if client is not None
            else None
        ),
        "judge": judge_setup.judge.describe() if judge_setup is not None else None,
    }


def write_report_html(
    writer: RunFolder,
    metrics: dict[str, Any],
    *,
    output_dir: Path,
    comparison: Comparison | None,
    outcome: GateOutcome | None,
    baseline_cases: Callable[[], BaselineCases | None],
    baseline: dict[str, Any] | None,
    notes: list[str],
    public: Callable[[str], str],
) -> None:
    """report.html in the run folder, with the output folder's other runs as its history (a run that cannot be
    read is left out and added to ``notes``); ``baseline_cases`` is asked only when a comparison was made."""
    from pytest_rageval.report.html import write_report

    skipped: list[str] = []
    from pytest_rageval.gate.lineage import LINK, linked_history
    from pytest_rageval.report.trends import trend_metrics

    linked = linked_history(output_dir, trend_metrics(), skipped=skipped, known={writer.run_id: metrics})
    history = [m for m in linked if m.get("run_id") != writer.run_id]
    own = next((m for m in linked if m.get("run_id") == writer.run_id), None)
    if own is not None and LINK in own:
        metrics = {**metrics, LINK: own[LINK]}  # the page's copy: how this run relates to the one before it
    notes.extend(public(note) for note in skipped)
    compared = comparison is not None and not comparison.refused
    write_report(
        writer.report_path,
        metrics,
        read_records(writer.run_dir),
        deltas=[dataclasses.asdict(d) for d in comparison.deltas] if comparison else None,
        history=history,
        outcome=outcome,
        baseline_cases=baseline_cases() if compared else None,
        baseline=baseline,
    )


def write_ci_summaries(
    setup: RunSetup,
    writer: RunFolder,
    metrics: dict[str, Any],
    *,
    comparison: Comparison | None,
    gate_failed: bool,
    gate_reason: str,
    notes: list[str],
    cwd: Path,
    public: Callable[[str], str],
) -> None:
    """The CI summary (report/markdown.py): written anew to ``--rageval-summary-md``, appended to
    ``$GITHUB_STEP_SUMMARY`` (GitHub shows what every step appended). A failed write is added to ``notes``
    (and so shown by a summary written after it), not a failure."""
    from pytest_rageval.report.html import case_anchors
    from pytest_rageval.report.markdown import report_href, summary_markdown

    s = setup.settings
    targets = [(path, append) for path, append in ((s.summary_md, False), (s.step_summary, True)) if path is not None]
    if not targets:
        return
    flipped = set(comparison.flipped_to_fail + comparison.flipped_to_pass) if comparison is not None else set()
    try:
        anchors = (
            case_anchors(
                read_records(writer.run_dir),
                flipped,
                to_fail=comparison.flipped_to_fail,
                to_pass=comparison.flipped_to_pass,
            )
            if comparison is not None and flipped
            else {}
        )
    except (RunFolderError, OSError):
        anchors = {}  # the report was not written either (a note says why): cases are listed without links
    report = writer.report_path
    for path, append in targets:
        text = summary_markdown(
            metrics,
            comparison,
            anchors=anchors,
            report=report_href(report, path, cwd) if report.is_file() else None,
            gate_failed=gate_failed,
            gate_reason=public(gate_reason),
            notes=[public(n) for n in notes],
        )
        try:
            if append:
                append_to_regular_file(path, text)
            else:
                write_text_atomic(path, text)
        except OSError as exc:
            notes.append(f"summary not written: cannot write {path}: {exc.strerror or exc}")
