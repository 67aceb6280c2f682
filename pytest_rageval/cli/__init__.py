"""cli: the ``rageval`` command: schema, compare, report, history, judge, merge, rescore, label, inspect, calibrate.

Every command first registers the metrics of the installed ``pytest_rageval.metrics`` entry points.

``main`` and the argument parser live here; the larger commands in their own modules (merge, rescore, rejudge,
label, inspect_target). The top layer: may import every other subpackage; nothing imports it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def say(text: Any = "", *, file: Any = None) -> None:
    """``print`` for what comes from run folders (ids, messages, run ids): control characters shown escaped."""
    from pytest_rageval.sanitize import terminal_safe

    print(terminal_safe(text), file=file)


def _schema(args: argparse.Namespace) -> int:
    from pytest_rageval.evaluation.evalset import line_json_schema

    print(json.dumps(line_json_schema(), indent=2, sort_keys=True))
    return 0


def _usage_error(message: str) -> SystemExit:
    """Exit status 2 (like argparse): what was asked cannot be done, which is not a regression."""
    say(f"rageval: {message}", file=sys.stderr)
    return SystemExit(2)


def _load(path: str) -> dict[str, Any]:
    from pytest_rageval.gate.compare import load_baseline

    try:
        data = load_baseline(Path(path))
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    if data is None:
        raise _usage_error(f"no metrics.json at {path}")
    return data


def _nearest_pyproject() -> Path | None:
    """The pyproject.toml of the current folder or the nearest folder above it, or None."""
    here = Path.cwd()
    return next((d / "pyproject.toml" for d in (here, *here.parents) if (d / "pyproject.toml").is_file()), None)


def _gate_table(pyproject: str | None) -> dict[str, float]:
    """``[tool.rageval.gate]`` of ``pyproject`` or of the nearest pyproject.toml above the current folder."""
    from pytest_rageval.plugin.settings import SettingsError, parse_gate, read_pyproject_table

    path: Path | None
    if pyproject is not None:
        path = Path(pyproject)
        if not path.is_file():
            raise _usage_error(f"--pyproject {pyproject}: no such file")
    else:
        path = _nearest_pyproject()
    try:
        return parse_gate(read_pyproject_table(path).gate, "[tool.rageval.gate]")
    except SettingsError as exc:
        raise _usage_error(str(exc)) from None


def _compare(args: argparse.Namespace) -> int:
    """The session's gate policy (gate.gate_verdict) on two stored runs: exit 0, 1 on a regression, 2 when not compared."""
    from pytest_rageval.gate.compare import format_comparison, gate_runs, gate_verdict

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
    return _compare_configs(base, new, gate, args, verdict.exit_code)


def _compare_configs(base: dict[str, Any], new: dict[str, Any], gate: dict[str, float], args: argparse.Namespace, exit_code: int) -> int:
    """Matrix runs: each config gated against the same config of the baseline, and the new run's configs ranked."""
    from pytest_rageval.gate.configs import gate_configs, rank_configs
    from pytest_rageval.report.configs import ranking_lines
    from pytest_rageval.sanitize import terminal_safe

    configs = gate_configs(base, new, gate=gate, significance=args.significance, ignore_invariants=args.ignore_invariants)
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


def _report(args: argparse.Namespace) -> int:
    """Rebuild report.html: with the gate's verdict the run recorded (or, with ``--baseline``, a new comparison)
    and each case's "Since baseline" section when the baseline's cases can be read."""
    from pytest_rageval.report.html import write_report
    from pytest_rageval.runs.folder import RunFolder

    run = RunFolder(Path(args.run))
    metrics = _load(args.run)
    history = _earlier_runs(run.output_dir, metrics.get("run_id"))
    outcome, cases = _report_baseline(metrics, getattr(args, "baseline", None), getattr(args, "pyproject", None))
    deltas = [dataclasses.asdict(d) for d in outcome.comparison.deltas] if outcome.comparison is not None else None
    write_report(
        run.report_path,
        metrics,
        run.records(),
        history=history,
        deltas=deltas,
        outcome=outcome,
        baseline_cases=cases,
        baseline=cases.metrics if cases is not None else None,
    )
    say(run.report_path)
    return 0


def _earlier_runs(output_dir: Path, run_id: Any) -> list[dict[str, Any]]:
    """The runs in ``output_dir`` but ``run_id``, as a rebuilt report charts them; each one left out is a note."""
    from pytest_rageval.runs.store import RunStore

    skipped: list[str] = []
    history = [m for m in RunStore(output_dir).history(skipped=skipped) if m.get("run_id") != run_id]
    for note in skipped:
        say(f"note: {note}")
    return history


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
    base = _load(given)
    comparison = gate_runs(base, metrics, gate=_gate_table(pyproject))
    verdict = gate_verdict(comparison)
    reason = Redactor(environment_secrets(os.environ)).mask(scrub_urls(verdict.reason))
    outcome = GateOutcome(comparison, failed=verdict.failed, reason=reason, refused=comparison.refused, baseline=str(Path(given).resolve()))
    return outcome, None if comparison.refused else BaselineCases.load(given)


def _history(args: argparse.Namespace) -> int:
    """Key metrics per run, grouped by eval set (oldest first); partial, shard, all-error and incomplete runs marked."""
    from pytest_rageval.evaluation import registry
    from pytest_rageval.evaluation.selection import run_scope_notes
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
            raise _usage_error(f"--metric {args.metric}: unknown metric{did_you_mean(args.metric, choices)}")
    width = max(16, *(len(n) + 2 for n in names))
    groups: dict[str, list[dict[str, Any]]] = {}
    skipped: list[str] = []
    for metrics in RunStore(args.dir).history(limit=args.limit, skipped=skipped):
        groups.setdefault(str(metrics.get("eval_set_hash") or "unknown"), []).append(metrics)
    for number, (eval_set, runs) in enumerate(groups.items()):
        files = runs[-1].get("eval_set_files")
        label = ", ".join(sorted(files)) if isinstance(files, dict) and files else "files not recorded"
        if number:
            say()
        say(f"eval set {eval_set[:12]} ({label}): {len(runs)} run{'s' if len(runs) != 1 else ''}")
        say(
            "run_id".ljust(24)
            + "made (UTC), commit".ljust(26)
            + "".join(n.rjust(width) for n in names)
            + "  passed/total  target, matrix, tree; note"
        )
        odd: list[str] = []
        for metrics in runs:
            agg = _aggregates(metrics)
            cells = "".join(_history_cell(agg.get(n)).rjust(width) for n in names)
            counts = f"{metrics.get('passed', 0)}/{metrics.get('total_tests', 0)}"
            notes = [*_what_ran(metrics), *run_scope_notes(metrics)]
            say(terminal_safe(f"{metrics.get('run_id')!s:<24}{run_label(metrics):<26}{cells}  {counts:<12}  {', '.join(notes)}".rstrip()))
            bad = [n for n in names if _history_cell(agg.get(n)) == "?"]
            if bad:
                where = RunStore(args.dir).run(str(metrics.get("run_id"))).metrics_path
                odd.append(f"? {where}: {', '.join(bad)} not a number")
        for line in odd:
            say(line)
        if key is not None:
            values = [_aggregates(m).get(key) for m in runs]
            low, high = scale_of(key)
            say(f"{key} [{low:g}..{high:g}] |{sparkline(values, (low, high))}| oldest {_history_cell(values[0])}, newest {_history_cell(values[-1])}")
    for note in skipped:
        say(f"note: {note}")
    return 0


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
            + ";".join(f"{axis}={','.join(map(str, values)) if isinstance(values, list) else values}" for axis, values in matrix.items())[:80]
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


def _merge(args: argparse.Namespace) -> int:
    from pytest_rageval.gate.aggregate import xfail_counts
    from pytest_rageval.report.html import write_report
    from pytest_rageval.runs.folder import RunFolder

    from .merge import MergeError, merge_runs

    try:
        run_dir, metrics, notes = merge_runs([Path(r) for r in args.runs], Path(args.output))
    except MergeError as exc:
        raise _usage_error(str(exc)) from None
    write_report(RunFolder(run_dir).report_path, metrics, RunFolder(run_dir).records())
    for note in notes:
        say(note)
    say(
        f"{run_dir} ({metrics['total_tests']} cases: {metrics['passed']} passed, {metrics['failed']} failed, {metrics['errors']} errors"
        f"{xfail_counts(metrics)})"
    )
    return 0


def _judge(args: argparse.Namespace) -> int:
    import asyncio
    import os

    from pytest_rageval.evaluation import registry
    from pytest_rageval.judges.base import JudgeAuthError
    from pytest_rageval.plugin.judge_factory import build_judge
    from pytest_rageval.plugin.settings import Settings
    from pytest_rageval.runs.folder import RunFolder

    from .rejudge import rejudge_run

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
        judge_metrics=tuple(args.metrics.split(",")) if args.metrics else tuple(run_metrics or registry.default_judge_metrics()),
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
    _report(argparse.Namespace(run=args.run, baseline=None))
    return 1 if result.errors else 0


def _project_target(args: argparse.Namespace, command: str) -> tuple[Any, Any]:
    """The project's settings (label.ProjectClient) and a client of the target that ``args`` and the project
    name, as the plugin would make it: the command line, then the project's ini keys, then the environment."""
    import os

    from pytest_rageval.targets.client import RagConfigError, parse_request_map, parse_response_map
    from pytest_rageval.targets.resolve import load_target

    from .label import LabelError, project_client

    if args.pyproject is not None and not Path(args.pyproject).is_file():
        raise _usage_error(f"{command}: --pyproject {args.pyproject}: no such file")
    try:
        project = project_client(Path(args.pyproject) if args.pyproject else _nearest_pyproject())
    except LabelError as exc:
        raise _usage_error(f"{command}: {exc}") from None
    if getattr(args, "docs_root", None):
        project = dataclasses.replace(project, docs_root=Path(args.docs_root).resolve())
    target = args.target or project.target or os.environ.get("RAGEVAL_TARGET")
    if not target:
        raise _usage_error(
            f"{command}: --target URL or module:function is needed (or rageval_target in [tool.pytest.ini_options], or env RAGEVAL_TARGET)"
        )
    folders = [os.getcwd(), *([str(project.path.parent)] if project.path else [])]
    try:
        client = load_target(
            target,
            folders=folders,
            headers=_label_headers(project, getattr(args, "header", None) or [], os.environ),
            timeout=args.timeout or project.timeout or 60.0,
            request_map=parse_request_map("\n".join(args.request_map) if getattr(args, "request_map", None) else project.request_map),
            response_map=parse_response_map("\n".join(args.response_map) if getattr(args, "response_map", None) else project.response_map),
            docs_root=project.docs_root_or_folder,
            params_hook=project.params_hook,
        )
    except RagConfigError as exc:
        given = {
            "rageval_target": args.target,
            "rageval_request_map": getattr(args, "request_map", None),
            "rageval_response_map": getattr(args, "response_map", None),
            "rageval_timeout": args.timeout,
        }
        key = str(exc).split(" ", 1)[0].rstrip(":")
        where = f"{project.path}: " if project.path and key.startswith("rageval_") and not given.get(key) else ""
        raise _usage_error(f"{command}: {where}{exc}") from None
    origin = "--target" if args.target else (str(project.path) if project.target else "env RAGEVAL_TARGET")
    described = client.describe()
    say(f"target: {described.get('url') or described.get('callable')} (from {origin}), k={args.k}")
    return project, client


def _label(args: argparse.Namespace) -> int:
    """``rageval label SET``: ask the questions, show their chunks, write the gold answered on stdin (label.py)."""
    from .label import LabelError, LineChooser, label_set

    if args.k < 1:
        raise _usage_error(f"label: --k must be at least 1, got {args.k}")
    _, client = _project_target(args, "label")
    ids = [i.strip() for i in args.ids.split(",") if i.strip()] if args.ids is not None else None
    if ids is not None and not ids:
        raise _usage_error("label: --ids names no id")
    interactive = sys.stdin.isatty()
    out = lambda line: print(line, flush=True)  # noqa: E731 - lines are made terminal-safe by label.py
    chooser = LineChooser(sys.stdin, out, interactive=interactive, read=input if interactive else None)
    try:
        result = label_set(args.set, client, chooser, k=args.k, ids=ids, every=args.all, show=out)
    except LabelError as exc:
        raise _usage_error(f"label: {exc}") from None
    except KeyboardInterrupt:  # while a label was written: the file is the old one or the new one, whole
        say("interrupted; the labels written before are kept", file=sys.stderr)
        return 130
    if result.interrupted and interactive:
        print()  # the cursor stood after the prompt
    say(result.summary() + (f"; wrote {args.set}" if result.written else "; nothing written"))
    return 130 if result.interrupted else 0


def _inspect(args: argparse.Namespace) -> int:
    """``rageval inspect TARGET QUESTION``: the normalised response, and the gold that could never match (inspect.py)."""
    from .inspect_target import InspectError, inspect_target

    if args.k < 1:
        raise _usage_error(f"inspect: --k must be at least 1, got {args.k}")
    project, client = _project_target(args, "inspect")
    try:
        lines, unreachable = inspect_target(
            client,
            args.question,
            k=args.k,
            params=_params(args.param or []),
            eval_set=Path(args.eval_set) if args.eval_set else None,
            docs_root=project.docs_root_or_folder,
        )
    except InspectError as exc:
        say(f"rageval inspect: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        say(line)
    return 1 if unreachable else 0


def _params(pairs: list[str]) -> dict[str, Any]:
    """``--param NAME=VALUE`` pairs; a VALUE that reads as JSON (``3``, ``true``) is that value, else text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name.strip():
            raise _usage_error(f"inspect: --param {pair!r}: expected NAME=VALUE")
        try:
            out[name.strip()] = json.loads(value)
        except ValueError:
            out[name.strip()] = value
    return out


def _calibrate(args: argparse.Namespace) -> int:
    """``rageval calibrate``: the configured judge's agreement with a labelled set, per metric (judges/calibrate.py)."""
    import asyncio
    import os

    from pytest_rageval.judges.base import JudgeAuthError
    from pytest_rageval.judges.calibrate import SHIPPED_SET, CalibrationError, calibrate, format_figures, load_set, set_hash
    from pytest_rageval.judges.calibrations import CALIBRATION_DIR, judge_identity, write_calibration
    from pytest_rageval.plugin.judge_factory import build_judge, judge_info
    from pytest_rageval.plugin.settings import SettingsError
    from pytest_rageval.runs.artifacts import new_run_id

    path = Path(args.set) if args.set else SHIPPED_SET
    try:
        items = load_set(path)
        settings = _judge_settings(args)
    except (CalibrationError, SettingsError) as exc:
        raise _usage_error(f"calibrate: {exc}") from None
    setup = build_judge(settings, os.environ)
    if setup is None:
        raise _usage_error("calibrate: rageval_judge is none: there is no judge to calibrate")
    metrics = tuple(args.metric or settings.judge_metrics)
    unknown = [m for m in metrics if not setup.judge.supports(m)]
    if unknown:
        raise _usage_error(f"calibrate: the {setup.judge.name} judge does not score {', '.join(unknown)}")

    async def run() -> Any:
        try:
            return await calibrate(setup.judge, items, metrics, concurrency=settings.concurrency)
        finally:
            await setup.judge.aclose()

    try:
        figures = asyncio.run(run())
    except JudgeAuthError as exc:
        raise _usage_error(f"calibrate: {exc.message}") from None
    identity = judge_identity(setup.judge.describe(), judge_info(setup.judge))
    folder = Path(args.output) if args.output else settings.output_dir / CALIBRATION_DIR / new_run_id()
    written = write_calibration(
        folder, identity, "shipped" if args.set is None else str(path), set_hash(path), {m: f.as_dict() for m, f in figures.items()}
    )
    say(
        f"judge: {identity['kind']} {identity['model']} (prompt {identity['prompt_version']}); set {path} "
        f"({len(items)} labelled answers, hash {set_hash(path)})"
    )
    for line in format_figures(figures):
        say(line)
    say(f"wrote {written}")
    return 0


class _NoOptions(argparse.Namespace):
    """pytest's ``config.option`` as ``build_settings`` reads it, outside pytest: every option unset."""

    def __getattr__(self, name: str) -> Any:
        return None


def _judge_settings(args: argparse.Namespace) -> Any:
    """The judge settings of the project (``[tool.pytest.ini_options]`` ini keys, ``[tool.rageval]``, the
    environment), as ``pytest --rageval`` resolves them, with ``--judge``, ``--judge-model`` and
    ``--judge-base-url`` over them."""
    import os

    from pytest_rageval.plugin.settings import build_settings, read_pyproject_table

    if args.pyproject is not None and not Path(args.pyproject).is_file():
        raise _usage_error(f"calibrate: --pyproject {args.pyproject}: no such file")
    pyproject = Path(args.pyproject) if args.pyproject else _nearest_pyproject()
    from pytest_rageval.errors import ConfigError
    from pytest_rageval.plugin.config import read_tool_tables

    try:
        ini = read_tool_tables(pyproject)[0] if pyproject is not None else {}
    except ConfigError as exc:
        raise _usage_error(f"calibrate: {exc}") from None
    option = _NoOptions(
        rageval_judge=args.judge,
        rageval_judge_model=args.judge_model,
        rageval_judge_base_url=args.judge_base_url,
        rageval_threshold=[],
        rageval_concurrency=args.concurrency,
        rageval_no_cache=args.no_cache,
    )
    rootdir = pyproject.parent if pyproject is not None else Path.cwd()
    return build_settings(
        rootdir=rootdir, invocation_dir=Path.cwd(), option=option, ini=ini, pyproject=read_pyproject_table(pyproject), environ=os.environ
    )


def _label_headers(project: Any, lines: list[str], environ: Any) -> dict[str, str]:
    """The project's rageval_headers, then each --header (a later one replaces a header of the same name)."""
    from pytest_rageval.targets.client import RagConfigError, parse_headers

    headers = parse_headers(project.headers, environ)
    for number, line in enumerate(lines, start=1):
        try:
            extra = parse_headers(line, environ)
        except RagConfigError as exc:  # the line may hold a secret: named by its number only
            raise RagConfigError(
                str(exc).replace("rageval_headers line 1", f"--header number {number}").replace("rageval_headers", f"--header number {number}")
            ) from None
        for name, value in extra.items():
            headers = {n: v for n, v in headers.items() if n.lower() != name.lower()}
            headers[name] = value
    return headers


def _rescore(args: argparse.Namespace) -> int:
    """A new run recomputed from RUN's stored records at --k, with --threshold overriding; nothing is sent."""
    from pytest_rageval.evaluation.thresholds import ThresholdError, parse_cli_thresholds
    from pytest_rageval.report.html import write_report
    from pytest_rageval.runs.folder import RunFolder

    from .rescore import RescoreError, rescore_run

    try:
        overrides = parse_cli_thresholds(list(args.threshold or []), option="--threshold")
        result = rescore_run(Path(args.run), k=args.k, thresholds=overrides, output_dir=Path(args.output) if args.output else None)
    except (RescoreError, ThresholdError) as exc:
        raise _usage_error(str(exc)) from None
    run_id = result.metrics.get("run_id")
    history = _earlier_runs(result.run_dir.parent, run_id)
    run = RunFolder(result.run_dir)
    write_report(run.report_path, result.metrics, run.records(), history=history)
    for line in result.lines:
        say(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from pytest_rageval.evaluation import registry

    parser = argparse.ArgumentParser(prog="rageval", description="pytest-rageval helper commands")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("schema", help="print the JSON Schema of an eval-set line").set_defaults(func=_schema)
    p = sub.add_parser("compare", help="compare two runs (metrics.json or run folders); exit 1 on regression, 2 when they cannot be compared")
    p.add_argument("base", help="the baseline: a metrics.json or a run folder")
    p.add_argument("new", help="the run to check: a metrics.json or a run folder")
    p.add_argument("--ignore-invariants", action="store_true", help="compare even if the eval set or judge differ")
    p.add_argument("--significance", action="store_true", help="fail only drops whose 95%% interval excludes zero")
    p.add_argument("--max-cases", type=int, default=20, help="flipped cases listed of each kind (default 20)")
    p.add_argument(
        "--pyproject", help="pyproject.toml whose [tool.rageval.gate] sets the tolerances (default: the nearest one above the current folder)"
    )
    p.set_defaults(func=_compare)
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
    p.set_defaults(func=_report)
    p = sub.add_parser("judge", help="re-judge a stored run from its stored judge inputs (through the judge cache)")
    p.add_argument("run", help="the run folder (its results.jsonl is rewritten, its report rebuilt)")
    p.add_argument("--judge", choices=("lexical", "openai"), help="default: the run's own openai judge (model, base URL) if it had one, else lexical")
    p.add_argument("--model", help="judge model (with --judge openai; default: the run's)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: the run's, else env OPENAI_BASE_URL)")
    p.add_argument(
        "--json-mode", choices=("json_schema", "json_object", "text"), help="how the judge is asked to answer (default: the run's, else json_schema)"
    )
    p.add_argument("--metrics", help=f"comma-separated judge metrics (default: the run's, else {','.join(registry.default_judge_metrics())})")
    p.add_argument("--cache-dir", default=".rageval_cache", help="the judge cache (default .rageval_cache)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the judge cache")
    p.add_argument("--k", type=int, default=None, help="judge only the first K stored contexts")
    p.set_defaults(func=_judge)
    p = sub.add_parser("merge", help="join shard runs (--rageval-shard I/N) into one run")
    p.add_argument("runs", nargs="+", help="the shard run folders")
    p.add_argument("-o", "--output", default="results", help="output folder of the merged run (default results)")
    p.set_defaults(func=_merge)
    p = sub.add_parser(
        "rescore",
        help="a new run recomputed from a run stored with --rageval-store-full-text, at a "
        "smaller K or other thresholds; sends nothing (no RAG, no judge request)",
    )
    p.add_argument("run", help="the run folder (made with --rageval-store-full-text; it is left as it is)")
    p.add_argument("--k", type=int, default=None, help="score only the top K stored chunks (default: the run's K; at most the run's K)")
    p.add_argument(
        "--threshold",
        action="append",
        metavar="METRIC=VALUE",
        help="override a threshold, as --rageval-threshold does (repeatable); outcomes are recomputed",
    )
    p.add_argument("-o", "--output", help="output folder of the new run (default: the folder holding RUN); its latest is moved")
    p.set_defaults(func=_rescore)
    p = sub.add_parser("history", help="aggregate metrics over the runs in an output folder, per eval set")
    p.add_argument("dir", nargs="?", default="results", help="the output folder (default results)")
    p.add_argument("--limit", type=int, default=30, help="the newest N runs (default 30)")
    p.add_argument(
        "--metric",
        help="also draw this aggregate (mrr_avg, or a metric name: mrr) as an ASCII sparkline per "
        "eval set, oldest run first, on the metric's own scale",
    )
    p.set_defaults(func=_history)
    _add_label_parser(sub)
    _add_inspect_parser(sub)
    _add_calibrate_parser(sub)
    return parser


LABEL_PROTOCOL = """answers, one line per question (typed, or piped through stdin):
  1 3       chunks 1 and 3 support the answer, both needed (gold_supports in the order typed)
  1,3       the same
  1 3 | 2   support groups: 1 and 3 together, or 2 alone (required_support_groups [[0, 1], [2]])
  u         unanswerable: "answerable": false, no gold
  s         skip this question
  q         quit; labels written so far are kept (the end of the input does the same)
  ?         help
Each answer is written at once: only that line of SET changes (atomically), every other line, comment and blank
line stays byte for byte. A wrong answer is explained and asked again on a terminal; piped, it stops the labelling
(exit 2) naming its input line. Gold supports are anchors: rel_path, heading_path and a short snippet of the
chunk's text that the chunk matches under rageval_require_snippets."""


def _add_label_parser(sub: Any) -> None:
    p = sub.add_parser(
        "label",
        help="label gold supports: ask each question with debug on, pick the supporting chunks",
        description="Ask each question of SET that lacks gold (answerable, no gold_supports and no "
        "gold_doc_ids) with debug on, show the retrieved chunks numbered (rel_path, heading "
        "path, score, excerpt) and write the gold you pick back into SET.",
        epilog=LABEL_PROTOCOL,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("set", help="the eval-set .jsonl file to label (rewritten in place, one line per answer)")
    p.add_argument(
        "--target",
        help="the system: an http(s):// ask URL or package.module:function (default: rageval_target "
        "of the project's [tool.pytest.ini_options], else env RAGEVAL_TARGET)",
    )
    p.add_argument("--k", type=int, default=20, help="chunks asked for and shown per question (default 20)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--ids", help="comma-separated ids of the questions to ask (labelled again if they have gold)")
    which.add_argument("--all", action="store_true", help="ask every question, also those that have gold")
    p.add_argument(
        "--header",
        action="append",
        metavar="'NAME: VALUE'",
        help="an HTTP header to send, ${VAR} read from the environment (repeatable; like ini rageval_headers)",
    )
    p.add_argument(
        "--request-map",
        action="append",
        metavar="'FIELD = SENT_AS'",
        help="rename a request body field, e.g. 'question = query' (repeatable; like ini rageval_request_map)",
    )
    p.add_argument(
        "--response-map",
        action="append",
        metavar="'TARGET = SOURCE'",
        help="where to read a response field, e.g. 'retrieved_chunks = hits' (repeatable; like ini rageval_response_map)",
    )
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait for each answer (default: the project's rageval_timeout, else 60)")
    p.add_argument(
        "--pyproject",
        help="pyproject.toml whose [tool.pytest.ini_options] rageval_target, rageval_headers, "
        "rageval_request_map, rageval_response_map and rageval_timeout are used (default: "
        "the nearest one above the current folder); the options above win, --header "
        "lines add to the project's headers",
    )
    p.set_defaults(func=_label)


def _add_calibrate_parser(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help="how far the configured judge agrees with a labelled set, per metric",
        description="Run the judge configured as for `pytest --rageval` (the project's ini keys and "
        "[tool.rageval.judge]; the options below override them) over a labelled set and print, "
        "per metric: n, accuracy, balanced accuracy, Cohen's kappa, the confusion table (tp fp tn "
        "fn; positive = passes), judge errors, requests and cost. Writes calibration.json, which "
        "rageval_min_judge_agreement reads. The judge cache serves re-runs.",
    )
    p.add_argument(
        "--set",
        help="a labelled .jsonl set: one answer a line, {id, question, contexts, answer, "
        "reference_answer?, expected_key_facts?, labels: {metric: true|false}} (default: the set "
        "shipped with the package)",
    )
    p.add_argument("--metric", action="append", help="a judge metric to calibrate (repeatable; default: the judge metrics the project runs)")
    p.add_argument(
        "-o",
        "--output",
        help="folder of calibration.json (default: <output>/calibration/<id>/, where <output> is the project's rageval_output, else results)",
    )
    p.add_argument("--judge", choices=["lexical", "openai"], help="the judge (default: the project's)")
    p.add_argument("--judge-model", help="the OpenAI-compatible judge's model (default: the project's)")
    p.add_argument("--judge-base-url", help="the OpenAI-compatible judge's base URL (default: the project's, else env OPENAI_BASE_URL)")
    p.add_argument("--concurrency", type=int, default=None, help="judge requests in flight at once (default 8)")
    p.add_argument("--no-cache", action="store_true", help="ask the judge again for every answer")
    p.add_argument("--pyproject", help="the project's pyproject.toml (default: the nearest one above the current folder)")
    p.set_defaults(func=_calibrate)


def _add_inspect_parser(sub: Any) -> None:
    p = sub.add_parser(
        "inspect",
        help="ask one question and show the response as the plugin reads it; with --eval-set, the gold supports that could never match",
        description="Ask QUESTION once and print the normalised response: the answer, and each chunk's "
        "rel_path, heading path, doc_id and score, as the metrics see them. With --eval-set, "
        "also each gold support that no chunk could ever match (a file outside docs_root, "
        "a heading the file does not have, chunk paths or headings of another form). "
        "Exit 1 when there is such a support or the call failed.",
    )
    p.add_argument(
        "target",
        nargs="?",
        help="the system: an http(s):// URL or package.module:name (a callable, or a "
        "LlamaIndex, LangChain, LangGraph or Haystack object); default: the project's",
    )
    p.add_argument("question", help="the question to ask")
    p.add_argument("--eval-set", help="an eval-set .jsonl file whose gold supports are checked")
    p.add_argument("--k", type=int, default=5, help="chunks shown (default 5)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="a param sent with the question, e.g. top_k=3 (repeatable)")
    p.add_argument(
        "--docs-root", help="the folder gold rel_paths are relative to (default: the project's rageval_docs_root, else the project's folder)"
    )
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait for the answer (default: the project's rageval_timeout, else 60)")
    p.add_argument("--pyproject", help="pyproject.toml whose rageval_* keys are used (default: the nearest one above the current folder)")
    p.set_defaults(func=_inspect)


def _load_metric_entry_points() -> None:
    """The metrics of the installed ``pytest_rageval.metrics`` entry points, before any command: a merged, rescored
    or re-judged run aggregates them as ``pytest --rageval`` does (a conftest.py is not read here)."""
    from pytest_rageval.evaluation.metric_plugins import MetricPluginError, load_entry_points

    try:
        load_entry_points()
    except MetricPluginError as exc:
        raise _usage_error(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_rageval.runs.folder import RunFolderError

    args = build_parser().parse_args(argv)
    _load_metric_entry_points()
    try:
        return int(args.func(args))
    except RunFolderError as exc:  # e.g. a results.jsonl line that cannot be read: never dropped, never rewritten
        raise _usage_error(str(exc)) from None
    except BrokenPipeError:  # `rageval ... | head`: the reader left; say nothing more (and no traceback at exit)
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
