"""What a framework object returns is read within bounds, as an HTTP body is (real LlamaIndex, offline parts).

One subprocess builds LlamaIndex query engines (``CustomQueryEngine``, real ``Response``, ``StreamingResponse``,
``TextNode`` and ``NodeWithScore``) whose output is hostile, asks each through the plugin's framework client and
prints what came back; the tests read that. A subprocess, because LlamaIndex brings numpy, which a ``pytester``
run elsewhere in this process could not import again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from needs import need_installed

pytestmark = pytest.mark.e2e  # one process of its own

SCRIPT = r"""
import asyncio, json, sys, time
from llama_index.core.base.response.schema import Response, StreamingResponse
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode
from pytest_rageval.targets.frameworks import recognise
from pytest_rageval.targets.frameworks.client import FrameworkClient
from pytest_rageval.targets.protocol import RagCallError

read = {"parts": 0}

def stream():
    for _ in range(3_000):  # 3 MB, not endless, so that code before the bound ends too
        read["parts"] += 1
        yield "x" * 1_000

def node(metadata=None, score=1.0):
    return NodeWithScore(node=TextNode(text="t", metadata={"file_path": "docs/a.md", **(metadata or {})}), score=score)

def deep():
    value = {}
    for _ in range(100_000):
        value = {"a": value}
    return value

class Engine(CustomQueryEngine):
    mode: str

    def custom_query(self, query_str):
        if self.mode == "stream":
            return StreamingResponse(response_gen=stream(), source_nodes=[node()])
        if self.mode == "nodes":
            return Response("A.", source_nodes=[node() for _ in range(5_000)])
        if self.mode == "keys":
            return Response("A.", source_nodes=[node({f"k{i}": i for i in range(100_000)})])
        if self.mode == "deep":
            return Response("A.", source_nodes=[node({"deep": deep()})])
        found = node()
        found.score = 10**400  # pydantic checks the score only when the node is made
        return Response("A.", source_nodes=[found])

out = {}
for mode in ("stream", "nodes", "keys", "deep", "score"):
    client = FrameworkClient(recognise(Engine(mode=mode)), name=f"apps:{mode}", timeout=60)
    start = time.monotonic()
    try:
        reply = asyncio.run(client.aask("q", k=5, params={}))
    except RagCallError as exc:
        out[mode] = {"error": exc.message, "kind": exc.kind}
    else:
        chunks = reply.response.retrieved_chunks
        out[mode] = {
            "answer_chars": len(reply.response.answer),
            "notes": list(reply.notes),
            "chunks": len(chunks),
            "metadata_keys": len(chunks[0].model_dump().get("metadata") or {}) if chunks else 0,
        }
    out[mode]["seconds"] = time.monotonic() - start
out["stream"]["parts_read"] = read["parts"]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    need_installed("llama_index.core")
    script = Path(tmp_path_factory.mktemp("framework_output")) / "ask.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_streamed_answer_is_read_up_to_the_answer_limit(outcomes: dict[str, Any]) -> None:
    stream = outcomes["stream"]
    assert stream["parts_read"] <= 21  # 20,000 characters of 1,000-character parts, not the 3,000 parts there are
    assert stream["answer_chars"] == 20_000
    assert "answer: the response stream was read up to 20,000 characters (rageval_max_answer_chars)" in stream["notes"]


def test_the_nodes_of_an_answer_are_read_up_to_a_thousand(outcomes: dict[str, Any]) -> None:
    nodes = outcomes["nodes"]
    assert "retrieved nodes: the first 1,000 of 5,000 were read" in nodes["notes"]
    assert nodes["chunks"] == 1_000


def test_a_nodes_metadata_is_capped(outcomes: dict[str, Any]) -> None:
    keys = outcomes["keys"]
    assert keys["metadata_keys"] == 200
    assert "metadata: 200 values were kept of a retrieved node's metadata" in keys["notes"]


def test_deep_metadata_or_a_huge_score_is_that_cases_error_naming_the_field(outcomes: dict[str, Any]) -> None:
    deep, score = outcomes["deep"], outcomes["score"]
    assert deep["kind"] == score["kind"] == "invalid_response"
    assert deep["error"].startswith("LlamaIndex query engine: retrieved node 1: field 'metadata.deep.a.a.a")
    assert deep["error"].endswith("' nests deeper than 64 levels")
    assert score["error"] == (
        "LlamaIndex query engine: retrieved node 1: field 'score' is an integer of more than 100 digits"
    )
