"""``rageval history DIR``: key metrics per run, grouped by eval set, with what each run ran."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import say, usage_error


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("history", help="aggregate metrics over the runs in an output folder, per eval set")
    p.add_argument("dir", nargs="?", default="results", help="the output folder (default results)")
    p.add_argument("--limit", type=int, default=30, help="the newest N runs (default 30)")
    p.add_argument(
        "--metric",
        help="also draw this aggregate (mrr_avg, or a metric name: mrr) as an ASCII sparkline per "
        "eval set, oldest run first, on the metric's own scale",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Key metrics per run, grouped by eval set (oldest first); partial, shard, all-error and incomplete runs marked."""
    from pytest_rageval.evaluation import registry
    from pytest_rageval.evaluation.selection import run_scope_notes
    from pytest_rageval.gate.lineage import edit_between, lineages, linked_history
    from pytest_rageval.report.html import trend_metrics
    from pytest_rageval.report.sparkline import aggregate_key, scale_of, sparkline
    from pytest_rageval.report.trends import run_label
    from pytest_rageval.runs.store import RunStore
    from pytest_rageval.sanitize import terminal_safe
    from pytest_rageval.suggest import did_you_mean

    names = trend_metrics()
    key = None
    if args.metric is not None:
        key = aggregate_key(args.metric)
        if key is None:
            choices = sorted({m.aggregate for m in registry.metrics() if m.aggregate} | set(registry.metric_names()))
            raise usage_error(f"--metric {args.metric}: unknown metric{did_you_mean(args.metric, choices)}")
    width = max(16, *(len(n) + 2 for n in names))
    skipped: list[str] = []
    # one series across eval-set edits (a run that shares unchanged cases with the one before continues it)
    for number, runs in enumerate(lineages(linked_history(Path(args.dir), names, limit=args.limit, skipped=skipped))):
        eval_set = str(runs[-1].get("eval_set_hash") or "unknown")
        files = runs[-1].get("eval_set_files")
        label = ", ".join(sorted(files)) if isinstance(files, dict) and files else "files not recorded"
        edits = {i: edit for i in range(1, len(runs)) if (edit := edit_between(runs[i - 1], runs[i])) is not None}
        if number:
            say()
        edited = f", {len(edits)} eval-set edit{'s' if len(edits) != 1 else ''} (marked ~)" if edits else ""
        say(f"eval set {eval_set[:12]} ({label}): {len(runs)} run{'s' if len(runs) != 1 else ''}{edited}")
        say(
            "run_id".ljust(24)
            + "made (UTC), commit".ljust(26)
            + "".join(n.rjust(width) for n in names)
            + "  passed/total  target, matrix, tree; note"
        )
        odd: list[str] = []
        for i, metrics in enumerate(runs):
            if i in edits:
                change = ", ".join(_versus(runs[i - 1], metrics, names))
                say(
                    terminal_safe(
                        f"~ {edits[i].describe()}" + (f"; vs the run before on them: {change}" if change else "")
                    )
                )
            agg = _aggregates(metrics)
            cells = "".join(_history_cell(agg.get(n)).rjust(width) for n in names)
            counts = f"{metrics.get('passed', 0)}/{metrics.get('total_tests', 0)}"
            notes = [*_what_ran(metrics), *run_scope_notes(metrics)]
            say(
                terminal_safe(
                    f"{metrics.get('run_id')!s:<24}{run_label(metrics):<26}{cells}  {counts:<12}  {', '.join(notes)}".rstrip()
                )
            )
            bad = [n for n in names if _history_cell(agg.get(n)) == "?"]
            if bad:
                where = RunStore(args.dir).run(str(metrics.get("run_id"))).metrics_path
                odd.append(f"? {where}: {', '.join(bad)} not a number")
        for line in odd:
            say(line)
        if key is not None:
            values = [_aggregates(m).get(key) for m in runs]
            low, high = scale_of(key)
            say(
                f"{key} [{low:g}..{high:g}] |{sparkline(values, (low, high))}| oldest {_history_cell(values[0])}, newest {_history_cell(values[-1])}"
            )
    for note in skipped:
        say(f"note: {note}")
    return 0


def _versus(old: dict[str, Any], new: dict[str, Any], names: tuple[str, ...]) -> list[str]:
    """``mrr_avg +0.010`` per charted aggregate: how it moved over the cases both runs share unchanged."""
    from pytest_rageval.gate.lineage import paired_change

    out = []
    for name in names:
        delta, _ = paired_change(old, new, name)
        if delta is not None:
            out.append(f"{name} {delta:+.3f}")
    return out


def _what_ran(metrics: dict[str, Any]) -> list[str]:
    """``rageval history``'s marks of what a run ran: its target, its matrix axes, an uncommitted tree."""
    marks = []
    target = metrics.get("target")
    if isinstance(target, dict) and (target.get("name") or target.get("kind")):
        marks.append(str(target.get("name") or target.get("kind"))[:60])
    matrix = metrics.get("matrix")
    if isinstance(matrix, dict) and matrix:
        marks.append(
            "matrix "
            + ";".join(
                f"{axis}={','.join(map(str, values)) if isinstance(values, list) else values}"
                for axis, values in matrix.items()
            )[:80]
        )
    if metrics.get("git_dirty") is True:
        marks.append("uncommitted changes")
    return marks


def _aggregates(metrics: dict[str, Any]) -> dict[str, Any]:
    agg = metrics.get("aggregate_metrics")
    return agg if isinstance(agg, dict) else {}


def _history_cell(value: Any) -> str:
    """An aggregate as ``rageval history`` shows it: ``0.812``, ``—`` for null, ``?`` for what is not a number."""
    import math

    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "?"
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        return "?"
    return f"{number:.3f}" if math.isfinite(number) else "?"
