"""The ``rageval`` command: schema, compare, report, history."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Optional, Sequence


def say(text: Any = "", *, file: Any = None) -> None:
    """``print`` for what comes from run folders (ids, messages, run ids): control characters shown escaped."""
    from .sanitize import terminal_safe

    print(terminal_safe(text), file=file)


def _schema(args: argparse.Namespace) -> int:
    from .evalset import line_json_schema

    print(json.dumps(line_json_schema(), indent=2, sort_keys=True))
    return 0


def _usage_error(message: str) -> SystemExit:
    """Exit status 2 (like argparse): what was asked cannot be done, which is not a regression."""
    say(f"rageval: {message}", file=sys.stderr)
    return SystemExit(2)


def _load(path: str) -> dict:
    from .gate import load_baseline

    try:
        data = load_baseline(Path(path))
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    if data is None:
        raise _usage_error(f"no metrics.json at {path}")
    return data


def _gate_table(pyproject: Optional[str]) -> dict[str, float]:
    """``[tool.rageval.gate]`` of ``pyproject`` or of the nearest pyproject.toml above the current folder."""
    from .settings import SettingsError, parse_gate, read_pyproject_table

    path: Optional[Path]
    if pyproject is not None:
        path = Path(pyproject)
        if not path.is_file():
            raise _usage_error(f"--pyproject {pyproject}: no such file")
    else:
        here = Path.cwd()
        path = next((d / "pyproject.toml" for d in (here, *here.parents) if (d / "pyproject.toml").is_file()), None)
    try:
        return parse_gate(read_pyproject_table(path).gate, "[tool.rageval.gate]")
    except SettingsError as exc:
        raise _usage_error(str(exc)) from None


def _compare(args: argparse.Namespace) -> int:
    """The session's gate policy (gate.gate_verdict) on two stored runs: exit 0, 1 on a regression, 2 when not compared."""
    from .gate import format_comparison, gate_runs, gate_verdict

    gate = _gate_table(args.pyproject)
    base, new = _load(args.base), _load(args.new)
    comparison = gate_runs(base, new, gate=gate, significance=args.significance, ignore_invariants=args.ignore_invariants)
    verdict = gate_verdict(comparison)
    if comparison.refused:
        say("runs are not comparable (use --ignore-invariants to compare anyway):")
        for difference in comparison.invariant_differences:
            say(f"  {difference}")
        return verdict.exit_code
    for line in format_comparison(comparison, max_cases=args.max_cases):
        say(line)
    say(comparison.status.upper() if comparison.status == "regression" else comparison.status)
    return verdict.exit_code


def _report(args: argparse.Namespace) -> int:
    """Rebuild report.html: with the gate's verdict the run recorded (or, with ``--baseline``, a new comparison)
    and each case's "Since baseline" section when the baseline's cases can be read."""
    from .report.html import load_history, write_report
    from .runfolder import RunFolder

    run_dir = Path(args.run)
    metrics = _load(args.run)
    history = [m for m in load_history(run_dir.parent) if m.get("run_id") != metrics.get("run_id")]
    outcome, baseline = _report_baseline(metrics, getattr(args, "baseline", None), getattr(args, "pyproject", None))
    deltas = [dataclasses.asdict(d) for d in outcome.comparison.deltas] if outcome.comparison is not None else None
    write_report(run_dir / "report.html", metrics, RunFolder(run_dir).records(), history=history, deltas=deltas,
                 outcome=outcome, baseline=baseline)
    say(run_dir / "report.html")
    return 0


def _report_baseline(metrics: dict[str, Any], given: Optional[str], pyproject: Optional[str]) -> tuple[Any, Any]:
    """(the gate outcome, the baseline's cases or None) of a rebuilt report.

    Without ``given``: the verdict metrics.json recorded, and the cases of the baseline it names while that
    baseline is still the run it was compared with (its run id); with ``given``: that baseline compared anew
    under the nearest ``[tool.rageval.gate]`` (reasons masked as the session masks them).
    """
    import os

    from .gate import gate_runs, gate_verdict
    from .redact import Redactor, environment_secrets, scrub_urls
    from .report.baseline import BaselineCases, GateOutcome, outcome_from_metrics

    if given is None:
        outcome = outcome_from_metrics(metrics)
        if outcome.baseline is None or outcome.kind == "refused":
            return outcome, None
        cases = BaselineCases.load(outcome.baseline)
        recorded = (metrics.get("comparison") or {}).get("baseline_run_id")
        if cases is not None and recorded is not None and cases.run_id != recorded:
            say(f"note: the baseline {outcome.baseline} is now run {cases.run_id}, not {recorded} the run was compared "
                "with: no 'Since baseline' sections (pass --baseline PATH to compare anew)")
            cases = None
        return outcome, cases
    base = _load(given)
    comparison = gate_runs(base, metrics, gate=_gate_table(pyproject))
    verdict = gate_verdict(comparison)
    reason = Redactor(environment_secrets(os.environ)).mask(scrub_urls(verdict.reason))
    outcome = GateOutcome(comparison, failed=verdict.failed, reason=reason, refused=comparison.refused,
                          baseline=str(Path(given).resolve()))
    return outcome, None if comparison.refused else BaselineCases.load(given)


def _history(args: argparse.Namespace) -> int:
    """Key metrics per run, grouped by eval set (oldest first); partial, shard, all-error and incomplete runs marked."""
    from . import registry
    from .report.html import load_history, trend_metrics
    from .report.sparkline import aggregate_key, scale_of, sparkline
    from .selection import run_scope_notes
    from .suggest import did_you_mean

    names = trend_metrics()
    key = None
    if args.metric is not None:
        key = aggregate_key(args.metric)
        if key is None:
            choices = sorted({m.aggregate for m in registry.metrics() if m.aggregate} | set(registry.metric_names()))
            raise _usage_error(f"--metric {args.metric}: unknown metric{did_you_mean(args.metric, choices)}")
    width = max(16, *(len(n) + 2 for n in names))
    groups: dict[str, list[dict[str, Any]]] = {}
    for metrics in load_history(Path(args.dir), limit=args.limit):
        groups.setdefault(str(metrics.get("eval_set_hash") or "unknown"), []).append(metrics)
    for number, (eval_set, runs) in enumerate(groups.items()):
        files = runs[-1].get("eval_set_files")
        label = ", ".join(sorted(files)) if isinstance(files, dict) and files else "files not recorded"
        if number:
            say()
        say(f"eval set {eval_set[:12]} ({label}): {len(runs)} run{'s' if len(runs) != 1 else ''}")
        say("run_id".ljust(24) + "".join(n.rjust(width) for n in names) + "  passed/total  note")
        odd: list[str] = []
        for metrics in runs:
            agg = _aggregates(metrics)
            cells = "".join(_history_cell(agg.get(n)).rjust(width) for n in names)
            counts = f"{metrics.get('passed', 0)}/{metrics.get('total_tests', 0)}"
            say(f"{str(metrics.get('run_id')):<24}{cells}  {counts:<12}  {', '.join(run_scope_notes(metrics))}".rstrip())
            bad = [n for n in names if _history_cell(agg.get(n)) == "?"]
            if bad:
                where = Path(args.dir) / str(metrics.get("run_id")) / "metrics.json"
                odd.append(f"? {where}: {', '.join(bad)} not a number")
        for line in odd:
            say(line)
        if key is not None:
            values = [_aggregates(m).get(key) for m in runs]
            low, high = scale_of(key)
            say(f"{key} [{low:g}..{high:g}] |{sparkline(values, (low, high))}| "
                f"oldest {_history_cell(values[0])}, newest {_history_cell(values[-1])}")
    return 0


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


def _merge(args: argparse.Namespace) -> int:
    from .merge import MergeError, merge_runs
    from .report.html import write_report
    from .runfolder import RunFolder

    try:
        run_dir, metrics, notes = merge_runs([Path(r) for r in args.runs], Path(args.output))
    except MergeError as exc:
        raise _usage_error(str(exc)) from None
    write_report(run_dir / "report.html", metrics, RunFolder(run_dir).records())
    for note in notes:
        say(note)
    say(f"{run_dir} ({metrics['total_tests']} cases: {metrics['passed']} passed, {metrics['failed']} failed, {metrics['errors']} errors)")
    return 0


def _judge(args: argparse.Namespace) -> int:
    import asyncio
    import os

    from .judges.base import JudgeAuthError
    from .judges.factory import build_judge
    from .rejudge import rejudge_run
    from .runfolder import RunFolder
    from .settings import Settings

    # By default the run's own judge again ("judge later"), or lexical after a run without an LLM judge.
    used = RunFolder(Path(args.run)).config()
    found = used.get("judge")
    used_judge: dict[str, Any] = found if isinstance(found, dict) else {}
    same = args.judge in (None, "openai") and used_judge.get("name") == "openai"
    judge = args.judge or ("openai" if same else "lexical")
    model = args.model or (used_judge.get("model") if same else None)
    if judge == "openai" and not model:
        raise _usage_error("--judge openai needs --model")
    used_config = used.get("config")
    run_metrics = used_config.get("judge_metrics") if isinstance(used_config, dict) else None
    settings = Settings(
        rootdir=Path.cwd(),
        judge=judge,
        judge_model=model,
        judge_base_url=args.base_url or (used_judge.get("base_url") if same else None) or os.environ.get("OPENAI_BASE_URL"),
        judge_json_mode=args.json_mode or (used_judge.get("json_mode") if same else None) or "json_schema",
        judge_metrics=tuple(args.metrics.split(",")) if args.metrics else tuple(run_metrics or ("groundedness", "correctness")),
        cache_dir=Path(args.cache_dir),
        no_cache=args.no_cache,
    )
    setup = build_judge(settings, os.environ)
    assert setup is not None

    async def run() -> Any:
        try:
            return await rejudge_run(Path(args.run), setup, k=args.k)
        finally:
            await setup.judge.aclose()

    try:
        result = asyncio.run(run())
    except JudgeAuthError as exc:
        raise _usage_error(exc.message) from None
    for line in result.lines:
        say(line)
    _report(argparse.Namespace(run=args.run))
    return 1 if result.errors else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rageval", description="pytest-rageval helper commands")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("schema", help="print the JSON Schema of an eval-set line").set_defaults(func=_schema)
    p = sub.add_parser("compare", help="compare two runs (metrics.json or run folders); exit 1 on regression, "
                                       "2 when they cannot be compared")
    p.add_argument("base", help="the baseline: a metrics.json or a run folder")
    p.add_argument("new", help="the run to check: a metrics.json or a run folder")
    p.add_argument("--ignore-invariants", action="store_true", help="compare even if the eval set or judge differ")
    p.add_argument("--significance", action="store_true", help="fail only drops whose 95%% interval excludes zero")
    p.add_argument("--max-cases", type=int, default=20, help="flipped cases listed of each kind (default 20)")
    p.add_argument("--pyproject", help="pyproject.toml whose [tool.rageval.gate] sets the tolerances "
                                       "(default: the nearest one above the current folder)")
    p.set_defaults(func=_compare)
    p = sub.add_parser("report", help="rebuild RUN/report.html from its results.jsonl and metrics.json")
    p.add_argument("run", help="the run folder")
    p.add_argument("--baseline", help="compare with this baseline (a metrics.json or a run folder) instead of the one "
                                      "the run recorded; its results.jsonl, when beside it, gives each case's old answer")
    p.add_argument("--pyproject", help="with --baseline: pyproject.toml whose [tool.rageval.gate] sets the tolerances "
                                       "(default: the nearest one above the current folder)")
    p.set_defaults(func=_report)
    p = sub.add_parser("judge", help="re-judge a stored run from its stored judge inputs (through the judge cache)")
    p.add_argument("run", help="the run folder (its results.jsonl is rewritten, its report rebuilt)")
    p.add_argument("--judge", choices=("lexical", "openai"),
                   help="default: the run's own openai judge (model, base URL) if it had one, else lexical")
    p.add_argument("--model", help="judge model (with --judge openai; default: the run's)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: the run's, else env OPENAI_BASE_URL)")
    p.add_argument("--json-mode", choices=("json_schema", "json_object", "text"), help="how the judge is asked to answer "
                                                                                       "(default: the run's, else json_schema)")
    p.add_argument("--metrics", help="comma-separated judge metrics (default: the run's, else groundedness,correctness)")
    p.add_argument("--cache-dir", default=".rageval_cache", help="the judge cache (default .rageval_cache)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the judge cache")
    p.add_argument("--k", type=int, default=None, help="judge only the first K stored contexts")
    p.set_defaults(func=_judge)
    p = sub.add_parser("merge", help="join shard runs (--rageval-shard I/N) into one run")
    p.add_argument("runs", nargs="+", help="the shard run folders")
    p.add_argument("-o", "--output", default="results", help="output folder of the merged run (default results)")
    p.set_defaults(func=_merge)
    p = sub.add_parser("history", help="aggregate metrics over the runs in an output folder, per eval set")
    p.add_argument("dir", nargs="?", default="results", help="the output folder (default results)")
    p.add_argument("--limit", type=int, default=30, help="the newest N runs (default 30)")
    p.add_argument("--metric", help="also draw this aggregate (mrr_avg, or a metric name: mrr) as an ASCII sparkline per "
                                    "eval set, oldest run first, on the metric's own scale")
    p.set_defaults(func=_history)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    from .runfolder import RunFolderError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except RunFolderError as exc:  # e.g. a results.jsonl line that cannot be read: never dropped, never rewritten
        raise _usage_error(str(exc)) from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
