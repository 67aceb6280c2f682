"""``rageval merge RUN...``: join shard runs into one run (the work is runs/merge.py's) and write its report."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import say, usage_error


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("merge", help="join shard runs (--rageval-shard I/N) into one run")
    p.add_argument("runs", nargs="+", help="the shard run folders")
    p.add_argument("-o", "--output", default="results", help="output folder of the merged run (default results)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Merge the shard runs into a new run under ``--output``, write its report and print its counts."""
    from pytest_rageval.gate.aggregate import xfail_counts
    from pytest_rageval.report.html import write_report
    from pytest_rageval.runs.folder import RunFolder
    from pytest_rageval.runs.merge import MergeError, merge_runs

    try:
        run_dir, metrics, notes = merge_runs([Path(r) for r in args.runs], Path(args.output))
    except MergeError as exc:
        raise usage_error(str(exc)) from None
    write_report(RunFolder(run_dir).report_path, metrics, RunFolder(run_dir).records())
    for note in notes:
        say(note)
    say(
        f"{run_dir} ({metrics['total_tests']} cases: {metrics['passed']} passed, {metrics['failed']} failed, {metrics['errors']} errors"
        f"{xfail_counts(metrics)})"
    )
    return 0
