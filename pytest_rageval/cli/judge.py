"""``rageval judge RUN``: re-judge a stored run from its stored judge inputs (the work is engine/rejudge.py's)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import report
from .common import say, usage_error


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from pytest_rageval.evaluation import registry

    p = sub.add_parser("judge", help="re-judge a stored run from its stored judge inputs (through the judge cache)")
    p.add_argument("run", help="the run folder (its results.jsonl is rewritten, its report rebuilt)")
    p.add_argument(
        "--judge",
        choices=("lexical", "openai"),
        help="default: the run's own openai judge (model, base URL) if it had one, else lexical",
    )
    p.add_argument("--model", help="judge model (with --judge openai; default: the run's)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: the run's, else env OPENAI_BASE_URL)")
    p.add_argument(
        "--json-mode",
        choices=("json_schema", "json_object", "text"),
        help="how the judge is asked to answer (default: the run's, else json_schema)",
    )
    p.add_argument(
        "--metrics",
        help=f"comma-separated judge metrics (default: the run's, else {','.join(registry.default_judge_metrics())})",
    )
    p.add_argument("--cache-dir", default=".rageval_cache", help="the judge cache (default .rageval_cache)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the judge cache")
    p.add_argument("--k", type=int, default=None, help="judge only the first K stored contexts")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Re-judge RUN with the run's own judge (or ``--judge``), rewrite its results and rebuild its report."""
    import asyncio
    import os

    from pytest_rageval.config.settings import Settings
    from pytest_rageval.engine.judge_factory import build_judge
    from pytest_rageval.engine.rejudge import rejudge_run
    from pytest_rageval.evaluation import registry
    from pytest_rageval.judges.base import JudgeAuthError
    from pytest_rageval.runs.folder import RunFolder

    # By default the run's own judge again ("judge later"), or lexical after a run without an LLM judge.
    used = RunFolder(Path(args.run)).config()
    found = used.get("judge")
    used_judge: dict[str, Any] = found if isinstance(found, dict) else {}
    same = args.judge in (None, "openai") and used_judge.get("name") == "openai"
    judge = args.judge or ("openai" if same else "lexical")
    model = args.model or (used_judge.get("model") if same else None)
    if judge == "openai" and not model:
        raise usage_error("--judge openai needs --model")
    used_config = used.get("config")
    run_metrics = used_config.get("judge_metrics") if isinstance(used_config, dict) else None
    settings = Settings(
        rootdir=Path.cwd(),
        judge=judge,
        judge_model=model,
        judge_base_url=args.base_url
        or (used_judge.get("base_url") if same else None)
        or os.environ.get("OPENAI_BASE_URL"),
        judge_json_mode=args.json_mode or (used_judge.get("json_mode") if same else None) or "json_schema",
        judge_metrics=tuple(args.metrics.split(","))
        if args.metrics
        else tuple(run_metrics or registry.default_judge_metrics()),
        cache_dir=Path(args.cache_dir),
        no_cache=args.no_cache,
    )
    setup = build_judge(settings, os.environ)
    assert setup is not None

    async def rejudge() -> Any:
        try:
            return await rejudge_run(Path(args.run), setup, k=args.k)
        finally:
            await setup.judge.aclose()

    try:
        result = asyncio.run(rejudge())
    except JudgeAuthError as exc:
        raise usage_error(exc.message) from None
    for line in result.lines:
        say(line)
    report.run(argparse.Namespace(run=args.run, baseline=None))
    return 1 if result.errors else 0
