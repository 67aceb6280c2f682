"""``rageval compare BASE NEW``: the session's gate policy on two stored runs, and a matrix run's configs."""

from __future__ import annotations

import argparse
from typing import Any

from .common import gate_table, load_metrics, say


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="compare two runs (metrics.json or run folders); exit 1 on regression, 2 when they cannot be compared",
    )
    p.add_argument("base", help="the baseline: a metrics.json or a run folder")
    p.add_argument("new", help="the run to check: a metrics.json or a run folder")
    p.add_argument("--ignore-invariants", action="store_true", help="compare even if the eval set or judge differ")
    p.add_argument("--significance", action="store_true", help="fail only drops whose 95%% interval excludes zero")
    p.add_argument("--max-cases", type=int, default=20, help="flipped cases listed of each kind (default 20)")
    p.add_argument(
        "--pyproject",
        help="pyproject.toml whose [tool.rageval.gate] sets the tolerances (default: the nearest one above the current folder)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The session's gate policy (gate.gate_verdict) on two stored runs: exit 0, 1 on a regression, 2 when not compared."""
    from pytest_rageval.gate.compare import gate_runs, gate_verdict
    from pytest_rageval.gate.comparison_text import format_comparison

    gate = gate_table(args.pyproject)
    base, new = load_metrics(args.base), load_metrics(args.new)
    comparison = gate_runs(
        base, new, gate=gate, significance=args.significance, ignore_invariants=args.ignore_invariants
    )
    verdict = gate_verdict(comparison)
    if comparison.refused:
        say("runs are not comparable (use --ignore-invariants to compare anyway):")
        for difference in comparison.invariant_differences:
            say(f"  {difference}")
        return verdict.exit_code
    for line in format_comparison(comparison, max_cases=args.max_cases):
        say(line)
    say(comparison.status.upper() if comparison.status == "regression" else comparison.status)
    return _compare_configs(base, new, gate, args, verdict.exit_code)


def _compare_configs(
    base: dict[str, Any], new: dict[str, Any], gate: dict[str, float], args: argparse.Namespace, exit_code: int
) -> int:
    """Matrix runs: each config gated against the same config of the baseline, and the new run's configs ranked."""
    from pytest_rageval.gate.configs import gate_configs, rank_configs
    from pytest_rageval.report.configs import ranking_lines
    from pytest_rageval.sanitize import terminal_safe

    configs = gate_configs(
        base, new, gate=gate, significance=args.significance, ignore_invariants=args.ignore_invariants
    )
    if configs is None:
        return exit_code
    shown = {
        **new,
        "config_ranking": rank_configs(new, (new.get("config_ranking") or {}).get("metric")),
        "comparison": {"by_config": configs.as_dict()},
    }
    for line in ranking_lines(shown):
        say(terminal_safe(line, multiline=False))
    failed = [configs.compared[cid][1].exit_code for cid in configs.failed]
    return exit_code or (min(failed) if failed else 0)
