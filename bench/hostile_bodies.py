"""A gzip bomb and an endless body from the RAG: peak memory of the run against the same run without them.

The loopback RAG answers ``q-<i>`` questions as ``servers.rag_answer`` does; question ``bomb`` gets a
gzip body that inflates to ``--gb`` GiB (about 1/1000 of that on the wire) and ``endless`` a chunked
body that never ends. The ideal: both are that case's error naming rageval_max_response_bytes (default
10 MiB), every other case passes, and the peak RSS stays within a few tens of MB of the clean run's.

    python bench/hostile_bodies.py [--gb 3 --cases 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from common import child_env, load_note, python, run_with_rss, source_state, table
from servers import eval_line, rag_answer


def gzip_bomb(gib: int) -> bytes:
    """A gzip body of ``gib`` GiB of zeros, compressed a MiB at a time."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1 << 20)
    return b"".join(z.compress(block) for _ in range(gib * 1024)) + z.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    bomb = b""

    def do_POST(self) -> None:
        question = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["question"]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if question == "endless":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b" " * 65536
            try:
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            except OSError:
                return
        body = self.bomb if question == "bomb" else json.dumps(rag_answer(question)).encode()
        if question == "bomb":
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the client stopped reading at its limit
            pass

    def log_message(self, *args: Any) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """The client hanging up at its limit is the point; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def run(root: Path, url: str, lines: list[dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    sets = root / "eval_sets"
    sets.mkdir(parents=True, exist_ok=True)
    (sets / "s.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    cmd = [
        python(),
        "-m",
        "pytest",
        "--rageval",
        "--rageval-judge=none",
        f"--rageval-target={url}",
        "-p",
        "no:cacheprovider",
        "-q",
    ]
    timed = run_with_rss(cmd, cwd=root, env=child_env(), timeout=900)
    metrics = sorted((root / "results").glob("*/metrics.json"))
    return timed, json.loads(metrics[-1].read_text()) if metrics else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=int, default=3, help="GiB the bomb inflates to (3)")
    parser.add_argument("--cases", type=int, default=20, help="ordinary cases beside the two hostile ones (20)")
    args = parser.parse_args()
    print(source_state())
    print(load_note())
    Handler.bomb = gzip_bomb(args.gb)
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/ask"
    clean = [eval_line(i) for i in range(1, args.cases + 1)]
    hostile = [*clean, {"id": "bomb", "question": "bomb"}, {"id": "endless", "question": "endless"}]
    rows = []
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        base, base_metrics = run(Path(a), url, clean)
        bad, bad_metrics = run(Path(b), url, hostile)
    server.shutdown()
    for name, timed, metrics in (("clean", base, base_metrics), ("with bomb + endless", bad, bad_metrics)):
        rows.append([name, metrics.get("passed"), metrics.get("errors"), timed.max_rss_kb, f"{timed.wall:.1f}"])
    print(f"bomb: {len(Handler.bomb):,} bytes on the wire, {args.gb} GiB inflated")
    print(table(["run", "passed", "errors", "peak RSS (KiB)", "wall (s)"], rows))
    extra = (bad.max_rss_kb or 0) - (base.max_rss_kb or 0)
    print(f"peak RSS above the clean run: {extra / 1024:.1f} MiB (ideal: about rageval_max_response_bytes, 10 MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
