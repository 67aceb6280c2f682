"""A loopback HTTP server speaking seed 003's ask API, scripted per question, for tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback import LoopbackServer

Reply = dict[str, Any] | tuple[Any, ...]  # a JSON body, or (status, body[, headers])
Responder = Callable[[dict[str, Any]], Reply]

#: rageval_response_map lines reading seed 001's ``{answer, citations: [{proposal_id, stage, url, snippet}]}``.
SEED_001_RESPONSE_MAP = (
    "references = citations",
    "references.doc_id = proposal_id",
    "references.text = snippet",
    "retrieved_chunks = citations",
    "retrieved_chunks.doc_id = proposal_id",
    "retrieved_chunks.text = snippet",
)


def seed_001_ini(*more_response_map: str) -> str:
    """A pytest ini for seed 001's API: ``POST {query, topK}`` answered as above (plus ``more_response_map`` lines)."""
    lines = ["[pytest]", "rageval_request_map =", "    question = query", "    k = topK", "rageval_response_map ="]
    lines += [f"    {line}" for line in (*SEED_001_RESPONSE_MAP, *more_response_map)]
    return "\n".join(lines) + "\n"


def chunk(
    rel_path: str, heading: Any, rank: int | None = None, *, doc_id: str | None = None, text: str = "text"
) -> dict[str, Any]:
    """A retrieved chunk in the default response shape."""
    data: dict[str, Any] = {
        "chunk_id": f"{rel_path}#{heading}#{rank}",
        "rel_path": rel_path,
        "heading_path": heading,
        "text": text,
    }
    if rank is not None:
        data["rank"] = rank
    if doc_id is not None:
        data["doc_id"] = doc_id
    return data


def answer(
    text: str,
    chunks: list[dict[str, Any]],
    *,
    references: list[dict[str, Any]] | None = None,
    abstained: bool | None = False,
    folders: list[str] | None = None,
) -> dict[str, Any]:
    """A full ask-API response body."""
    body: dict[str, Any] = {"answer": text, "references": references if references is not None else chunks[:1]}
    if abstained is not None:
        body["abstained"] = abstained
    debug: dict[str, Any] = {"retrieved_chunks": chunks}
    if folders is not None:
        debug["folder_selection"] = {"selected_folders": folders}
    body["debug"] = debug
    return body


class AskServer:
    """``with AskServer(responder) as srv: srv.url`` — records every request body and query."""

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = {}
                with server._lock:
                    server.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                reply = server.responder(body)
                payload: Any  # the reply, or its body when it is (status, body[, headers])
                headers: dict[str, Any]
                status, payload, headers = 200, reply, {}
                if isinstance(reply, tuple):
                    status, payload = reply[0], reply[1]
                    headers = reply[2] if len(reply) > 2 else {}
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = LoopbackServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}/api/v1/ask"  # bound to 127.0.0.1 above

    def questions(self) -> list[str]:
        with self._lock:
            return [r["body"].get("question") for r in self.requests]

    def __enter__(self) -> AskServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
