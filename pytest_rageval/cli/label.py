"""``rageval label SET``: ask each question lacking gold, show its chunks, write the gold picked (the work is
engine/label.py's, which a notebook calls as ``label_set``)."""

from __future__ import annotations

import argparse
import sys

from .common import project_target, say, usage_error

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


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds to wait for each answer (default: the project's rageval_timeout, else 60)",
    )
    p.add_argument(
        "--pyproject",
        help="pyproject.toml whose [tool.pytest.ini_options] rageval_target, rageval_headers, "
        "rageval_request_map, rageval_response_map and rageval_timeout are used (default: "
        "the nearest one above the current folder); the options above win, --header "
        "lines add to the project's headers",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``rageval label SET``: ask the questions, show their chunks, write the gold answered on stdin (engine/label.py)."""
    from pytest_rageval.engine.label import LabelError, LineChooser, label_set

    if args.k < 1:
        raise usage_error(f"label: --k must be at least 1, got {args.k}")
    _, client = project_target(args, "label")
    ids = [i.strip() for i in args.ids.split(",") if i.strip()] if args.ids is not None else None
    if ids is not None and not ids:
        raise usage_error("label: --ids names no id")
    interactive = sys.stdin.isatty()
    out = lambda line: print(line, flush=True)  # noqa: E731 - lines are made terminal-safe by label.py
    chooser = LineChooser(sys.stdin, out, interactive=interactive, read=input if interactive else None)
    try:
        result = label_set(args.set, client, chooser, k=args.k, ids=ids, every=args.all, show=out)
    except LabelError as exc:
        raise usage_error(f"label: {exc}") from None
    except KeyboardInterrupt:  # while a label was written: the file is the old one or the new one, whole
        say("interrupted; the labels written before are kept", file=sys.stderr)
        return 130
    if result.interrupted and interactive:
        print()  # the cursor stood after the prompt
    say(result.summary() + (f"; wrote {args.set}" if result.written else "; nothing written"))
    return 130 if result.interrupted else 0
