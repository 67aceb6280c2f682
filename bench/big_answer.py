"""A hostile RAG answer of 50 MB: what it costs in results.jsonl, report.html and peak memory.

The loopback RAG answers every question with ``--mb`` megabytes of text; one case, judge ``none``.
The ideal is the configured cap (``rageval_max_answer_chars``, 20,000 characters): results.jsonl and
report.html should hold about that much, not the whole answer (once, let alone twice).

    python bench/big_answer.py [--mb 50]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import child_env, load_note, python, run_with_rss, source_state, table
from servers import RagServer, Reply, rag_answer


class BigAnswerServer(RagServer):
    """The ask API, with an answer of ``size`` characters."""

    size = 0

    def handle(self, path: str, body: Any) -> tuple[str, Reply]:
        reply = rag_answer(str(body.get("question", "")))
        reply["answer"] = "A" * self.size
        return "ask", (200, {}, reply)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50, help="answer size in MiB (50)")
    args = parser.parse_args()
    print(source_state())
    print(load_note())
    BigAnswerServer.size = args.mb * 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp, BigAnswerServer() as server:
        root = Path(tmp)
        (root / "eval_sets").mkdir()
        line = {"id": "big", "question": "q-1 what is the budget?", "gold_supports": [{"rel_path": "docs/case1.md"}]}
        (root / "eval_sets" / "big.jsonl").write_text(json.dumps(line) + "\n")
        cmd = [
            python(),
            "-m",
            "pytest",
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "-p",
            "no:cacheprovider",
            "-q",
            "-o",
            f"rageval_max_response_bytes={BigAnswerServer.size + (1 << 20)}",
        ]
        run = run_with_rss(cmd, cwd=root, env=child_env(), timeout=600)
        folders = sorted((root / "results").glob("*/metrics.json"))
        if not folders:
            print(run.tail())
            return 1
        folder = folders[-1].parent
        results = (folder / "results.jsonl").stat().st_size
        report = (folder / "report.html").stat().st_size
        print(
            table(
                ["what", "bytes or KiB", "answer size", "ratio"],
                [
                    ["answer sent (bytes)", BigAnswerServer.size, BigAnswerServer.size, 1.0],
                    ["results.jsonl (bytes)", results, BigAnswerServer.size, results / BigAnswerServer.size],
                    ["report.html (bytes)", report, BigAnswerServer.size, report / BigAnswerServer.size],
                    [
                        "peak RSS (KiB)",
                        run.max_rss_kb,
                        BigAnswerServer.size // 1024,
                        (run.max_rss_kb or 0) * 1024 / BigAnswerServer.size,
                    ],
                ],
            )
        )
        print(f"exit status {run.returncode}, wall {run.wall:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
