"""Tests of client.py against real loopback HTTP servers (no mocks)."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from ask_server import SEED_001_RESPONSE_MAP
from loopback import LoopbackServer

from pytest_rageval.evaluation.schema import RagResponse
from pytest_rageval.targets.callable_client import CallableClient
from pytest_rageval.targets.headers import parse_headers
from pytest_rageval.targets.http_client import HttpClient
from pytest_rageval.targets.maps import ResponseMap, map_response, parse_request_map, parse_response_map
from pytest_rageval.targets.protocol import RagCallError, RagClient, RagConfigError, RagReply
from pytest_rageval.targets.resolve import load_target

SEED_001_MAP = "\n".join(SEED_001_RESPONSE_MAP)

DEFAULT_BODY = {
    "answer": "Use EMBEDDING_MODEL.",
    "references": [{"chunk_id": "c1", "rel_path": "docs/config.md", "heading_path": "# Setup > ## Embeddings"}],
    "abstained": False,
    "debug": {
        "retrieved_chunks": [
            {
                "chunk_id": "c1",
                "rel_path": "docs/config.md",
                "heading_path": "# Setup > ## Embeddings",
                "score_vector": 0.8,
                "score_lexical": 2.5,
                "score_final": 0.9,
                "text": "Set EMBEDDING_MODEL",
                "rank": 1,
            },
            {"chunk_id": "c2", "rel_path": "notes/a.md", "heading_path": "# A", "score_final": 0.4, "rank": 2},
        ],
        "folder_selection": {"selected_folders": ["docs"]},
    },
    "timings": {"retrieval_ms": 12.5, "generation_ms": 100},
}


# --------------------------------------------------------------------------- loopback server


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=lambda: DEFAULT_BODY)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    at: float
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


class ScriptServer:
    """A loopback server that answers POSTs from a script and records them."""

    def __init__(self, script: list[Reply]) -> None:
        self.script = script
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                parts = urlsplit(self.path)
                with outer.lock:
                    outer.seen.append(
                        Seen(time.monotonic(), parts.path, parse_qs(parts.query), dict(self.headers), json.loads(raw))
                    )
                    reply = outer.script[min(len(outer.seen), len(outer.script)) - 1]
                if reply.delay:
                    time.sleep(reply.delay)
                data = reply.body if isinstance(reply.body, (str, bytes)) else json.dumps(reply.body)
                data = data.encode() if isinstance(data, str) else data
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout tests)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = LoopbackServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/api/v1/ask"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ScriptServer] = []

    def start(*script: Reply) -> ScriptServer:
        server = ScriptServer(list(script) or [Reply()])
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def ask(client: RagClient, question: str = "How do I configure embeddings?", k: int = 5, **params: Any) -> RagReply:
    async def run() -> RagReply:
        try:
            return await client.aask(question, k=k, params=params)
        finally:
            await client.aclose()

    return asyncio.run(run())


def ask_error(client: RagClient, **params: Any) -> RagCallError:
    with pytest.raises(RagCallError) as info:
        ask(client, **params)
    return info.value


def fast(url: str, **options: Any) -> HttpClient:
    options.setdefault("backoff", 0.01)
    return HttpClient(url, **options)


# --------------------------------------------------------------------------- HTTP happy paths


def test_default_shape_is_parsed(serve: Any) -> None:
    server = serve(Reply())
    reply = ask(fast(server.url))
    response = reply.response
    assert isinstance(response, RagResponse)
    assert reply.attempts == 1 and reply.latency_ms > 0
    assert response.answer == "Use EMBEDDING_MODEL."
    assert [c.chunk_id for c in response.retrieved_chunks] == ["c1", "c2"]
    first = response.retrieved_chunks[0]
    assert (first.rel_path, first.heading_path, first.score_final, first.rank) == (
        "docs/config.md",
        "# Setup > ## Embeddings",
        0.9,
        1,
    )
    assert response.references[0].chunk_id == "c1"
    assert response.abstained is False and response.abstain_reason is None
    assert response.selected_folders == ["docs"]
    assert response.timings == {"retrieval_ms": 12.5, "generation_ms": 100.0}


def test_request_carries_debug_body_and_interpolated_headers(serve: Any) -> None:
    server = serve(Reply())
    headers = parse_headers("Authorization: Bearer ${RAG_TOKEN}\n\nX-Tenant: acme\n", {"RAG_TOKEN": "tok-123"})
    ask(fast(server.url + "?vault=personal", headers=headers), k=7, folder_mode="on")
    (seen,) = server.seen
    assert seen.path == "/api/v1/ask"
    assert seen.query == {"vault": ["personal"], "debug": ["true"]}
    assert seen.body == {"question": "How do I configure embeddings?", "k": 7, "folder_mode": "on"}
    assert seen.headers["Authorization"] == "Bearer tok-123"
    assert seen.headers["X-Tenant"] == "acme"
    assert seen.headers["Content-Type"] == "application/json"


def test_url_credentials_are_basic_auth_unless_an_authorization_header_is_configured(serve: Any) -> None:
    server = serve(Reply())
    with_creds = server.url.replace("http://", "http://ann:s3cret-pw@")
    ask(fast(with_creds))
    ask(fast(with_creds, headers={"authorization": "Bearer tok-123"}))
    basic, bearer = server.seen
    assert basic.headers["Authorization"] == "Basic " + base64.b64encode(b"ann:s3cret-pw").decode()
    assert {k.lower(): v for k, v in bearer.headers.items()}["authorization"] == "Bearer tok-123"


def test_request_map_renames_and_drops_fields(serve: Any) -> None:
    server = serve(Reply())
    request_map = parse_request_map("question = query\nk =\nfolder_mode = options.folders\n")
    assert request_map == {"question": "query", "k": "", "folder_mode": "options.folders"}
    ask(fast(server.url, request_map=request_map), k=3, folder_mode="on", temperature=0)
    assert server.seen[0].body == {
        "query": "How do I configure embeddings?",
        "temperature": 0,
        "options": {"folders": "on"},
    }


def test_seed_001_shape_through_the_mapping(serve: Any) -> None:
    body = {
        "answer": "It was executed.",
        "citations": [
            {"proposal_id": "abc-123", "stage": "tally", "url": "https://x/1", "snippet": "Status: executed"},
            {"proposal_id": 42, "stage": "forum", "url": "https://x/2", "snippet": "Discussion"},
        ],
    }
    server = serve(Reply(body=body))
    response_map = parse_response_map(SEED_001_MAP)
    response = ask(fast(server.url, response_map=response_map)).response
    assert [c.doc_id for c in response.references] == ["abc-123", "42"]
    assert [c.doc_id for c in response.retrieved_chunks] == ["abc-123", "42"]
    assert response.retrieved_chunks[0].text == "Status: executed"
    assert response.references[0].model_extra == {
        "proposal_id": "abc-123",
        "stage": "tally",
        "url": "https://x/1",
        "snippet": "Status: executed",
    }
    assert response.selected_folders is None and response.timings is None and response.abstained is None


# --------------------------------------------------------------------------- retries and failures


def test_500_then_200_succeeds_on_second_attempt(serve: Any) -> None:
    server = serve(Reply(status=500, body="boom"), Reply())
    reply = ask(fast(server.url))
    assert reply.attempts == 2
    assert reply.response.answer == "Use EMBEDDING_MODEL."
    assert len(server.seen) == 2


def test_429_retry_after_is_honoured(serve: Any) -> None:
    server = serve(Reply(status=429, body="slow down", headers={"Retry-After": "1"}), Reply())
    reply = ask(fast(server.url))
    assert reply.attempts == 2
    assert server.seen[1].at - server.seen[0].at >= 0.9


def test_three_503_give_http_error_after_retries(serve: Any) -> None:
    server = serve(Reply(status=503, body="unavailable"))
    error = ask_error(fast(server.url, retries=2))
    assert error.kind == "http"
    assert "503" in error.message and "retried 2 times" in error.message
    assert "unavailable" in error.message and "debug=true" not in error.message
    assert len(server.seen) == 3


def test_slow_server_times_out(serve: Any) -> None:
    server = serve(Reply(delay=5.0))
    start = time.monotonic()
    error = ask_error(fast(server.url, timeout=0.2, retries=1))
    assert error.kind == "timeout"
    assert time.monotonic() - start < 4  # two 0.2 s attempts, never the server's 5 s
    assert len(server.seen) == 2


def test_non_json_body_is_invalid_response(serve: Any) -> None:
    server = serve(Reply(body="<html>Gateway page</html>"))
    error = ask_error(fast(server.url))
    assert error.kind == "invalid_response"
    assert error.message == "response is not JSON: <html>Gateway page</html>"
    assert len(server.seen) == 1


def test_missing_answer_is_invalid_response(serve: Any) -> None:
    server = serve(Reply(body={"result": "x"}))
    error = ask_error(fast(server.url))
    assert error.kind == "invalid_response"
    assert error.message == "response has no 'answer' (looked for 'answer')"


def test_404_is_not_retried(serve: Any) -> None:
    server = serve(Reply(status=404, body="no such route"))
    error = ask_error(fast(server.url + "?x=1"))
    assert error.kind == "http" and error.status == 404
    assert error.message == f"HTTP 404 from {server.url}: no such route"
    assert len(server.seen) == 1


def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = ask_error(fast(f"http://127.0.0.1:{port}/ask", retries=1))
    assert error.kind == "connection"
    assert f"127.0.0.1:{port}/ask" in error.message and "\n" not in error.message


def test_secret_header_never_leaks(serve: Any) -> None:
    secret = "s3cr3t-value-XYZ"
    server = serve(Reply(status=401, body=f"bad token Bearer {secret}"))
    headers = parse_headers("Authorization: Bearer ${TOKEN}", {"TOKEN": secret})
    client = fast(server.url, headers=headers)
    error = ask_error(client)
    assert error.kind == "http" and "401" in error.message
    assert secret not in error.message and secret not in repr(error)
    assert secret not in json.dumps(client.describe()) and secret not in repr(client)
    assert client.describe()["headers"] == ["Authorization"]


def test_client_reused_across_calls_and_loops(serve: Any) -> None:
    server = serve(Reply())
    client = fast(server.url)

    async def many() -> list[RagReply]:
        return await asyncio.gather(*(client.aask(f"q{i}", k=2, params={}) for i in range(20)))

    assert len(asyncio.run(many())) == 20
    assert ask(client).attempts == 1  # a new loop: a new pool
    assert sorted(s.body["question"] for s in server.seen[:20]) == sorted(f"q{i}" for i in range(20))


# --------------------------------------------------------------------------- callable targets


def sync_target(question: str, params: dict[str, Any]) -> dict[str, Any]:
    assert threading.current_thread() is not threading.main_thread()  # ran via to_thread
    return {"answer": f"sync:{question}:{params['k']}", "retrieved_chunks": [{"doc_id": 7, "rank": 1}]}


async def async_target(question: str, params: dict[str, Any]) -> RagResponse:
    await asyncio.sleep(0)
    return RagResponse(answer=f"async:{params}")


def raising_target(question: str, params: dict[str, Any]) -> dict[str, Any]:
    raise KeyError("index not loaded")


def test_callable_sync_target() -> None:
    reply = ask(CallableClient(sync_target), question="q", k=4)
    assert reply.response.answer == "sync:q:4"
    assert reply.response.retrieved_chunks[0].doc_id == "7"
    assert reply.attempts == 1


def test_callable_async_target_gets_params() -> None:
    reply = ask(CallableClient(async_target), k=3, folder_mode="off")
    assert reply.response.answer == "async:{'k': 3, 'folder_mode': 'off'}"


def test_callable_raising_target() -> None:
    error = ask_error(CallableClient(raising_target))
    assert error.kind == "target"
    assert error.message == "KeyError: 'index not loaded'"


def test_callable_target_echoing_the_judge_key_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-canary-" + "7" * 24
    monkeypatch.setenv("RAGEVAL_JUDGE_API_KEY", key)

    def echo(question: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"answer": "x" * 300 + key, "retrieved_chunks": [{"doc_id": key, "text": f"see {key}"}]}

    def leak(question: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("y" * 495 + key)

    response = ask(CallableClient(echo)).response
    assert key[:8] not in response.answer and response.answer.endswith("***")
    assert response.retrieved_chunks[0].doc_id == "***" and response.retrieved_chunks[0].text == "see ***"
    assert key[:8] not in ask_error(CallableClient(leak)).message  # masked before the 500-character cut


def test_callable_timeout_and_bad_result() -> None:
    async def slow(question: str, params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {}

    assert ask_error(CallableClient(slow, timeout=0.05)).kind == "timeout"
    error = ask_error(CallableClient(lambda q, p: "just text", name="mod:fn"))
    assert error.kind == "invalid_response" and "mod:fn returned string" in error.message


def test_load_target() -> None:
    http = load_target("http://127.0.0.1:9/ask", timeout=5, retries=0)
    assert isinstance(http, HttpClient) and http.describe()["kind"] == "http"
    fn = load_target("os.path:join", timeout=5, retries=0)
    assert isinstance(fn, CallableClient)
    assert fn.describe()["callable"] == "os.path:join"
    assert isinstance(fn, RagClient)
    with pytest.raises(RagConfigError, match=r"cannot import module 'no_such_pkg.mod'"):
        load_target("no_such_pkg.mod:ask")
    with pytest.raises(RagConfigError, match="has no attribute 'nope'"):
        load_target("os.path:nope")
    with pytest.raises(RagConfigError, match="rageval_target"):
        load_target("ftp-ish-thing")


# --------------------------------------------------------------------------- configuration parsing


def test_parse_headers_unknown_variable() -> None:
    with pytest.raises(RagConfigError) as info:
        parse_headers("X-Api-Key: ${MISSING_KEY}", {"OTHER": "value-of-other"})
    assert "MISSING_KEY" in str(info.value) and "rageval_headers" in str(info.value)
    assert "value-of-other" not in str(info.value)
    with pytest.raises(RagConfigError, match="line 2") as info:
        parse_headers("A: b\nAuthorization Bearer hidden-token", {})
    assert "hidden-token" not in str(info.value)
    assert parse_headers("X-Lit: $${NOT_A_VAR}", {}) == {"X-Lit": "${NOT_A_VAR}"}


def test_parse_response_map_overrides_and_errors() -> None:
    response_map = parse_response_map("answer = data.text\n# comment\ntimings =\n")
    assert response_map.answer == "data.text" and response_map.timings == ""
    assert response_map.retrieved_chunks == "debug.retrieved_chunks"  # untouched default
    with pytest.raises(RagConfigError, match=r"unknown target 'answr'.*valid targets: answer, references"):
        parse_response_map("answr = text")
    with pytest.raises(RagConfigError, match="not a chunk key"):
        parse_response_map("references.docid = proposal_id")


def test_map_response_type_errors_name_the_field() -> None:
    default = ResponseMap()
    with pytest.raises(RagCallError, match=r"'references' is not a list \(got object; looked for 'references'\)"):
        map_response({"answer": "a", "references": {"x": 1}}, default)
    with pytest.raises(RagCallError, match=r"'retrieved_chunks\[1\]' is not an object"):
        map_response({"answer": "a", "debug": {"retrieved_chunks": [{}, "c2"]}}, default)
    with pytest.raises(RagCallError, match=r"'answer' is null"):
        map_response({"answer": None}, default)
    with pytest.raises(RagCallError, match=r"'retrieved_chunks\[0\].rank' is invalid"):
        map_response({"answer": "a", "debug": {"retrieved_chunks": [{"rank": "first"}]}}, default)
    with pytest.raises(RagCallError, match=r"'answer' \(looked for 'data.text'\)"):
        map_response({"answer": "a"}, parse_response_map("answer = data.text"))
    empty = map_response({"answer": "", "references": None, "debug": None}, default)
    assert empty.answer == "" and empty.references == [] and empty.retrieved_chunks == []
