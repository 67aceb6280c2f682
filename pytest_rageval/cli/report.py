"""``rageval report RUN``: rebuild the run's report.html, with the verdict it recorded or a new comparison."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from .common import earlier_runs, gate_table, load_metrics, say


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="rebuild RUN/report.html from its results.jsonl and metrics.json")
    p.add_argument("run", help="the run folder")
    p.add_argument(
        "--baseline",
        help="compare with this baseline (a metrics.json or a run folder) instead of the one "
        "the run recorded; its results.jsonl, when beside it, gives each case's old answer, "
        "and its values are drawn as a line on the trend charts",
    )
    p.add_argument(
        "--pyproject",
        help="with --baseline: pyproject.toml whose [tool.rageval.gate] sets the tolerances (default: the nearest one above the current folder)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Rebuild report.html: with the gate's verdict the run recorded (or, with ``--baseline``, a new comparison)
    and each case's "Since baseline" section when the baseline's cases can be read."""
    from pytest_rageval.report.html import write_report
    from pytest_rageval.runs.folder import RunFolder

    folder = RunFolder(Path(args.run))
    metrics = load_metrics(args.run)
    history = earlier_runs(folder.output_dir, metrics.get("run_id"), metrics)
    outcome, cases = _report_baseline(metrics, getattr(args, "baseline", None), getattr(args, "pyproject", None))
    deltas = [dataclasses.asdict(d) for d in outcome.comparison.deltas] if outcome.comparison is not None else None
    write_report(
        folder.report_path,
        metrics,
        folder.records(),
        history=history,
        deltas=deltas,
        outcome=outcome,
        baseline_cases=cases,
        baseline=cases.metrics if cases is not None else None,
    )
    say(folder.report_path)
    return 0


def _report_baseline(metrics: dict[str, Any], given: str | None, pyproject: str | None) -> tuple[Any, Any]:
    """(the gate outcome, the baseline's cases or None) of a rebuilt report.

    Without ``given``: the verdict metrics.json recorded, and the cases of the baseline it names while that
    baseline is still the run it was compared with (its run id); with ``given``: that baseline compared anew
    under the nearest ``[tool.rageval.gate]`` (reasons masked as the session masks them).
    """
    import os

    from pytest_rageval.gate.compare import gate_runs, gate_verdict
    from pytest_rageval.redact import Redactor, environment_secrets, scrub_urls
    from pytest_rageval.report.baseline import BaselineCases, GateOutcome, outcome_from_metrics

    if given is None:
        outcome = outcome_from_metrics(metrics)
        if outcome.baseline is None or outcome.kind == "refused":
            return outcome, None
        cases = BaselineCases.load(outcome.baseline)
        recorded = (metrics.get("comparison") or {}).get("baseline_run_id")
        if cases is not None and recorded is not None and cases.run_id != recorded:
            say(
                f"note: the baseline {outcome.baseline} is now run {cases.run_id}, not {recorded} the run was compared "
                "with: no 'Since baseline' sections (pass --baseline PATH to compare anew)"
            )
            cases = None
        return outcome, cases
    base = load_metrics(given)
    comparison = gate_runs(base, metrics, gate=gate_table(pyproject))
    verdict = gate_verdict(comparison)
    reason = Redactor(environment_secrets(os.environ)).mask(scrub_urls(verdict.reason))
    outcome = GateOutcome(
        comparison,
        failed=verdict.failed,
        reason=reason,
        refused=comparison.refused,
        baseline=str(Path(given).resolve()),
    )
    return outcome, None if comparison.refused else BaselineCases.load(given)
