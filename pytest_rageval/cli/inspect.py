"""``rageval inspect [TARGET] QUESTION``: ask once, show the response as the metrics read it, and the gold that
could never match (the work is targets/inspect_target.py's)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .common import project_target, say, usage_error


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    p.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="a param sent with the question, e.g. top_k=3 (repeatable)",
    )
    p.add_argument(
        "--docs-root",
        help="the folder gold rel_paths are relative to (default: the project's rageval_docs_root, else the project's folder)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds to wait for the answer (default: the project's rageval_timeout, else 60)",
    )
    p.add_argument(
        "--pyproject",
        help="pyproject.toml whose rageval_* keys are used (default: the nearest one above the current folder)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``rageval inspect TARGET QUESTION``: the normalised response, and the gold that could never match (targets/inspect_target.py)."""
    from pytest_rageval.targets.inspect_target import InspectError, inspect_target

    if args.k < 1:
        raise usage_error(f"inspect: --k must be at least 1, got {args.k}")
    project, client = project_target(args, "inspect")
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
            raise usage_error(f"inspect: --param {pair!r}: expected NAME=VALUE")
        try:
            out[name.strip()] = json.loads(value)
        except ValueError:
            out[name.strip()] = value
    return out
