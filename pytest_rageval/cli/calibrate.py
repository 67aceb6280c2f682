"""``rageval calibrate``: how far the configured judge agrees with a labelled set, per metric (the work is
judges/calibration_measure.py's); writes calibration.json."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import nearest_pyproject, say, usage_error


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "calibrate",
        help="how far the configured judge agrees with a labelled set, per metric",
        description="Run the judge configured as for `pytest --rageval` (the project's ini keys and "
        "[tool.rageval.judge]; the options below override them) over a labelled set and print, "
        "per metric: n, accuracy, balanced accuracy, Cohen's kappa, the confusion table (tp fp tn "
        "fn; positive = passes), judge errors (each counted as a disagreement; exit status 1 when there "
        "are any), requests and cost. Long fields are cut as pytest runs cut them (rageval_max_answer_chars, "
        "rageval_max_chunk_chars). Writes calibration.json, which rageval_min_judge_agreement reads. The judge "
        "cache serves re-runs.",
    )
    p.add_argument(
        "--set",
        help="a labelled .jsonl set: one answer a line, {id, question, contexts, answer, "
        "reference_answer?, expected_key_facts?, labels: {metric: true|false}} (default: the set "
        "shipped with the package)",
    )
    p.add_argument(
        "--metric",
        action="append",
        help="a judge metric to calibrate (repeatable; default: the judge metrics the project runs)",
    )
    p.add_argument(
        "-o",
        "--output",
        help="folder of calibration.json (default: <output>/calibration/<id>/, where <output> is the project's rageval_output, else results)",
    )
    p.add_argument("--judge", choices=["lexical", "openai"], help="the judge (default: the project's)")
    p.add_argument("--judge-model", help="the OpenAI-compatible judge's model (default: the project's)")
    p.add_argument(
        "--judge-base-url",
        help="the OpenAI-compatible judge's base URL (default: the project's, else env OPENAI_BASE_URL)",
    )
    p.add_argument("--concurrency", type=int, default=None, help="judge requests in flight at once (default 8)")
    p.add_argument("--no-cache", action="store_true", help="ask the judge again for every answer")
    p.add_argument(
        "--invariance",
        action="store_true",
        help="also judge each answer under meaning-preserving changes (chunks reordered, whitespace, trailing "
        "punctuation, markdown emphasis; for correctness another item's retrieved text) and meaning-changing ones "
        "(a number, a name, a yes/no changed, a negation added): per change and metric the verdict flip rate "
        "(should be 0) and the detection rate",
    )
    p.add_argument(
        "--pyproject", help="the project's pyproject.toml (default: the nearest one above the current folder)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``rageval calibrate``: the configured judge's agreement with a labelled set, per metric (judges/calibration_measure.py)."""
    import asyncio
    import os

    from pytest_rageval.config.settings import SettingsError
    from pytest_rageval.engine.judge_factory import build_judge, judge_info
    from pytest_rageval.judges.base import JudgeAuthError
    from pytest_rageval.judges.calibration_measure import (
        SHIPPED_SET,
        CalibrationError,
        bounded,
        calibrate,
        disagreement_lines,
        format_figures,
        load_set,
        set_hash,
    )
    from pytest_rageval.judges.calibration_store import CALIBRATION_DIR, judge_identity, write_calibration
    from pytest_rageval.judges.invariance import as_json as invariance_json
    from pytest_rageval.judges.invariance import format_invariance, invariance
    from pytest_rageval.runs.artifacts import new_run_id

    path = Path(args.set) if args.set else SHIPPED_SET
    try:
        items = load_set(path)
        settings = _judge_settings(args)
    except (CalibrationError, SettingsError) as exc:
        raise usage_error(f"calibrate: {exc}") from None
    setup = build_judge(settings, os.environ)
    if setup is None:
        raise usage_error("calibrate: rageval_judge is none: there is no judge to calibrate")
    items, cut = bounded(items, settings.limits)  # cut as a pytest run cuts what a target sends
    metrics = tuple(args.metric or settings.judge_metrics)
    unknown = [m for m in metrics if not setup.judge.supports(m)]
    if unknown:
        raise usage_error(f"calibrate: the {setup.judge.name} judge does not score {', '.join(unknown)}")

    async def measure() -> Any:
        try:
            figures = await calibrate(setup.judge, items, metrics, concurrency=settings.concurrency)
            stability = (
                await invariance(setup.judge, items, metrics, concurrency=settings.concurrency)
                if args.invariance
                else None
            )
            return figures, stability
        finally:
            await setup.judge.aclose()

    try:
        figures, stability = asyncio.run(measure())
    except JudgeAuthError as exc:
        raise usage_error(f"calibrate: {exc.message}") from None
    identity = judge_identity(setup.judge.describe(), judge_info(setup.judge))
    folder = Path(args.output) if args.output else settings.output_dir / CALIBRATION_DIR / new_run_id()
    written = write_calibration(
        folder,
        identity,
        "shipped" if args.set is None else _set_name(path, settings.rootdir),
        set_hash(path),
        {m: f.as_dict() for m, f in figures.items()},
        invariance_json(stability) if stability is not None else None,
    )
    say(
        f"judge: {identity['kind']} {identity['model']} (prompt {identity['prompt_version']}); set {path} "
        f"({len(items)} labelled answers, hash {set_hash(path)})"
    )
    for line in [*format_figures(figures), *disagreement_lines(figures)]:
        say(line)
    if stability is not None:
        say(
            "invariance (flip rate: the share of verdicts a meaning-preserving change moved, should be 0; detection rate: "
        )
        say("the share of passing verdicts a meaning-changing change turned to fail):")
        for line in format_invariance(stability):
            say(line)
    if cut:
        say(
            f"{cut} field{'s' if cut != 1 else ''} of the labelled set cut to rageval_max_answer_chars "
            "(contexts: rageval_max_chunk_chars), as pytest runs cut what a target sends"
        )
    say(f"wrote {written}")
    errors = sum(f.errors for f in figures.values())
    if errors:
        say(
            f"calibrate: the judge failed on {errors} verdict{'s' if errors != 1 else ''}: each counted as a "
            "disagreement (exit status 1)"
        )
        return 1
    return 0


def _set_name(path: Path, rootdir: Path) -> str:
    """How calibration.json names a labelled set: relative to the project's folder when inside it (runs check its
    hash from there), else its absolute path."""
    try:
        return path.resolve().relative_to(rootdir.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


class _NoOptions(argparse.Namespace):
    """pytest's ``config.option`` as ``build_settings`` reads it, outside pytest: every option unset."""

    def __getattr__(self, name: str) -> Any:
        return None


def _judge_settings(args: argparse.Namespace) -> Any:
    """The judge settings of the project (``[tool.pytest.ini_options]`` ini keys, ``[tool.rageval]``, the
    environment), as ``pytest --rageval`` resolves them, with ``--judge``, ``--judge-model`` and
    ``--judge-base-url`` over them."""
    import os

    from pytest_rageval.config.pyproject import read_tool_tables
    from pytest_rageval.config.settings import build_settings, read_pyproject_table
    from pytest_rageval.errors import ConfigError

    if args.pyproject is not None and not Path(args.pyproject).is_file():
        raise usage_error(f"calibrate: --pyproject {args.pyproject}: no such file")
    pyproject = Path(args.pyproject) if args.pyproject else nearest_pyproject()
    try:
        ini = read_tool_tables(pyproject)[0] if pyproject is not None else {}
    except ConfigError as exc:
        raise usage_error(f"calibrate: {exc}") from None
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
        rootdir=rootdir,
        invocation_dir=Path.cwd(),
        option=option,
        ini=ini,
        pyproject=read_pyproject_table(pyproject),
        environ=os.environ,
    )
