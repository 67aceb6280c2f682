"""Response bodies are read with a byte limit after decompression: a gzip bomb or an endless body from the
RAG or the judge is that case's error naming the limit, and every other case runs.

The RAG is a loopback HTTP server that answers by question: a gzip bomb (100 MB of zeros in about
100 KB), an endless chunked body, or a good answer sent gzip- or raw-deflate-compressed. The judge is the
loopback OpenAI-compatible server driven through the real openai SDK.
"""

from __future__ import annotations

import gzip
import json
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from loopback import LoopbackServer
from openai_server import OpenAIServer, metric_of, verdicts

BOMB = gzip.compress(b"0" * 100_000_000, compresslevel=1)
GOOD = {"answer": "The fee is 5 euros.", "retrieved_chunks": [{"rel_path": "a.md", "text": "The fee is 5 euros."}]}
LIMIT = 1_048_576


def _deflate_raw(data: bytes) -> bytes:
    z = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return z.compress(data) + z.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        question = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["question"]
        self.server.accepted.append(self.headers.get("Accept-Encoding", ""))  # type: ignore[attr-defined]
        if question.startswith("endless"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b"x" * 65536
            try:
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            except OSError:  # the client hung up at its limit
                return
        if question.startswith("bomb"):
            body, encoding = BOMB, "gzip"
        elif question.startswith("brotli"):
            body, encoding = b"\x0b\x02\x80{}\x03", "br"
        elif question.startswith("deflate"):
            body, encoding = _deflate_raw(json.dumps(GOOD).encode()), "deflate"
        else:
            body, encoding = gzip.compress(json.dumps(GOOD).encode()), "gzip"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hostile_rag() -> Iterator[LoopbackServer]:
    server = LoopbackServer(("127.0.0.1", 0), Handler)
    server.accepted = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def write_set(pytester: pytest.Pytester, questions: list[str]) -> None:
    lines = [{"id": f"c{i}", "question": q, "gold_supports": [{"rel_path": "a.md"}]} for i, q in enumerate(questions)]
    (pytester.path / "eval_sets").mkdir()
    (pytester.path / "eval_sets" / "s.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    pytester.makeini(f"[pytest]\nrageval_max_response_bytes = {LIMIT}\nrageval_timeout = 120\n")


def results(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    run_id = (pytester.path / "results" / "latest").read_text().strip()
    lines = (pytester.path / "results" / run_id / "results.jsonl").read_text().splitlines()
    return {r["test_case_id"]: r for r in map(json.loads, lines)}


def test_a_bomb_or_an_endless_body_from_the_rag_is_that_cases_error_naming_the_limit(
    pytester: pytest.Pytester, hostile_rag: LoopbackServer
) -> None:
    write_set(pytester, ["bomb?", "endless?", "brotli?", "gzip fine?", "deflate fine?"])
    url = f"http://127.0.0.1:{hostile_rag.server_address[1]}/ask"
    result = pytester.runpytest(
        "--rageval", "--rageval-judge=none", f"--rageval-target={url}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=2, errors=3)
    out = result.stdout.str()
    assert "Traceback" not in out and "timed out" not in out and "within 120 s" not in out
    by_id = results(pytester)
    for case in ("c0", "c1"):
        assert "over 1,048,576 bytes (rageval_max_response_bytes)" in by_id[case]["error"]["message"], by_id[case]
        assert by_id[case]["error"]["kind"] == "invalid_response"
    assert "content-encoding 'br', which is not read" in by_id["c2"]["error"]["message"]
    assert by_id["c3"]["outcome"] == by_id["c4"]["outcome"] == "passed"
    assert set(hostile_rag.accepted) == {"gzip, deflate"}  # type: ignore[attr-defined]


def test_a_bomb_from_the_judge_is_that_cases_judge_error_naming_the_limit(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(rag="def ask(question, params):\n    return " + repr(GOOD) + "\n")
    write_set(pytester, ["What is the fee?"])
    good = verdicts()

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Any:
        if "bomb the judge" in json.dumps(body):
            return 200, {"Content-Encoding": "gzip"}, BOMB
        return good(body, headers)

    with OpenAIServer(respond) as judge:
        (pytester.path / "eval_sets" / "s.jsonl").write_text(
            json.dumps(
                {
                    "id": "bomb",
                    "question": "bomb the judge?",
                    "reference_answer": "5 euros",
                    "gold_supports": [{"rel_path": "a.md"}],
                }
            )
            + "\n"
            + json.dumps(
                {
                    "id": "fine",
                    "question": "What is the fee?",
                    "reference_answer": "5 euros",
                    "gold_supports": [{"rel_path": "a.md"}],
                }
            )
            + "\n"
        )
        result = pytester.runpytest(
            "--rageval",
            "--rageval-target=rag:ask",
            "--rageval-judge=openai",
            "--rageval-judge-model=m",
            f"--rageval-judge-base-url={judge.base_url}",
            "--rageval-no-cache",
            "-p",
            "no:cacheprovider",
        )
        bomb_metrics = [metric_of(r["body"]) for r in judge.requests if "bomb the judge" in json.dumps(r["body"])]
    out = result.stdout.str()
    assert "Traceback" not in out
    by_id = results(pytester)
    assert "over 1,048,576 bytes (rageval_max_response_bytes)" in json.dumps(by_id["bomb"]), by_id["bomb"]
    assert by_id["fine"]["outcome"] == "passed"
    assert "judge endpoint http://127.0.0.1" in by_id["bomb"]["error"]["message"]
    assert bomb_metrics and len(set(bomb_metrics)) == len(bomb_metrics)  # a refused body is not asked for again


def test_the_limit_is_a_whole_number_of_bytes(pytester: pytest.Pytester) -> None:
    write_set(pytester, ["q?"])
    for bad, message in (
        ("nan", "must be a whole number of bytes, got 'nan'"),
        ("1" * 400, "must be a whole number of bytes"),
        ("100", "must be at least 1024 bytes, got 100"),
    ):
        pytester.makeini(f"[pytest]\nrageval_max_response_bytes = {bad}\n")
        result = pytester.runpytest("--rageval", "--rageval-judge=none", "--rageval-target=rag:ask")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert message in result.stdout.str() + result.stderr.str()
