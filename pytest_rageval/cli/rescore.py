"""``rageval rescore RUN``: a new run recomputed from a run's stored records (the work is engine/rescore.py's)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import earlier_runs, say, usage_error


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "rescore",
        help="a new run recomputed from a run stored with --rageval-store-full-text, at a "
        "smaller K or other thresholds; sends nothing (no RAG, no judge request)",
    )
    p.add_argument("run", help="the run folder (made with --rageval-store-full-text; it is left as it is)")
    p.add_argument(
        "--k",
        type=int,
        default=None,
        help="score only the top K stored chunks (default: the run's K; at most the run's K)",
    )
    p.add_argument(
        "--threshold",
        action="append",
        metavar="METRIC=VALUE",
        help="override a threshold, as --rageval-threshold does (repeatable); outcomes are recomputed",
    )
    p.add_argument(
        "-o", "--output", help="output folder of the new run (default: the folder holding RUN); its latest is moved"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """A new run recomputed from RUN's stored records at --k, with --threshold overriding; nothing is sent."""
    from pytest_rageval.engine.rescore import RescoreError, rescore_run
    from pytest_rageval.evaluation.thresholds import ThresholdError, parse_cli_thresholds
    from pytest_rageval.report.html import write_report
    from pytest_rageval.runs.folder import RunFolder

    try:
        overrides = parse_cli_thresholds(list(args.threshold or []), option="--threshold")
        result = rescore_run(
            Path(args.run), k=args.k, thresholds=overrides, output_dir=Path(args.output) if args.output else None
        )
    except (RescoreError, ThresholdError) as exc:
        raise usage_error(str(exc)) from None
    run_id = result.metrics.get("run_id")
    history = earlier_runs(result.run_dir.parent, run_id)
    folder = RunFolder(result.run_dir)
    write_report(folder.report_path, result.metrics, folder.records(), history=history)
    for line in result.lines:
        say(line)
    return 0
