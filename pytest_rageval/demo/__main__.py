"""Command line of the demo RAG.

``python -m pytest_rageval.demo serve [--host 127.0.0.1] [--port 8000]``
``python -m pytest_rageval.demo ask "question" [--k 5] [--alpha 0.0]``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .engine import ask
from .retrieval import default_corpus
from .server import ASK_PATH, make_server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pytest_rageval.demo", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve POST /api/v1/ask over HTTP")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--quiet", action="store_true", help="do not log requests")
    question = sub.add_parser("ask", help="answer one question and print the JSON response")
    question.add_argument("question")
    question.add_argument("--k", type=int, default=5)
    question.add_argument("--alpha", type=float, default=0.0, help="weight of the title match (0..1; 0 = BM25 only)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "ask":
        try:
            response = ask(args.question, {"k": args.k, "alpha": args.alpha})
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(response, indent=2, ensure_ascii=False))
        return 0
    default_corpus()  # index before the first request
    server = make_server(args.host, args.port, verbose=not args.quiet)
    host, port = server.server_address[:2]
    shown = host.decode() if isinstance(host, bytes) else host
    print(f"rageval demo RAG on http://{shown}:{port}{ASK_PATH} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
