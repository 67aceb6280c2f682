"""The demo RAG over HTTP (standard library only).

``POST /api/v1/ask[?debug=true]`` with a JSON object body
``{"question": str, "k": int?, ...params}`` answers the default response shape
(``debug`` only when the query parameter ``debug`` is true). A bad body gets
400 with ``{"error": ...}``; any other path or method gets 404.
``GET /health`` answers ``{"status": "ok"}`` for readiness checks.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .engine import ask

ASK_PATH = "/api/v1/ask"
MAX_BODY = 1_000_000
_TRUE = {"1", "true", "yes", "on"}


class BadRequest(Exception):
    """A request body the API cannot answer."""


def parse_body(raw: bytes) -> tuple[str, dict[str, Any]]:
    """The question and the remaining params of a request body."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    question = body.pop("question", None)
    if not isinstance(question, str) or not question.strip():
        raise BadRequest("field 'question' must be a non-empty string")
    return question, body


class AskHandler(BaseHTTPRequestHandler):
    """Routes ``POST /api/v1/ask``; everything else is 404."""

    server_version = "rageval-demo/0.1"
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes; avoid ~40 ms stalls

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self) -> None:
        self._drain()
        self._send(HTTPStatus.NOT_FOUND, {"error": f"not found: {self.command} {urlsplit(self.path).path}"})

    def _content_length(self) -> int:
        """The declared body length; a missing header means no body."""
        raw = self.headers.get("Content-Length")
        try:
            length = int(raw) if raw is not None else 0
        except ValueError:
            length = -1
        if length < 0:
            raise BadRequest(f"invalid Content-Length: {raw!r}")
        return length

    def _drain(self) -> None:
        """Read and drop a body, or close the connection when that is not possible."""
        try:
            length = self._content_length()
        except BadRequest:
            length = MAX_BODY + 1
        if length > MAX_BODY:
            self.close_connection = True
        elif length:
            self.rfile.read(length)

    def do_GET(self) -> None:
        if urlsplit(self.path).path == "/health":
            self._send(HTTPStatus.OK, {"status": "ok"})
        else:
            self._not_found()

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        if url.path.rstrip("/") != ASK_PATH:
            self._not_found()
            return
        try:
            length = self._content_length()
        except BadRequest as exc:
            self.close_connection = True
            self._send(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        if length > MAX_BODY:
            self.close_connection = True
            self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": f"body larger than {MAX_BODY} bytes"})
            return
        try:
            question, params = parse_body(self.rfile.read(length))
            response = ask(question, params)
        except (BadRequest, ValueError) as exc:
            self._send(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        if parse_qs(url.query).get("debug", ["false"])[-1].lower() not in _TRUE:
            response.pop("debug", None)
        self._send(HTTPStatus.OK, response)

    do_PUT = do_DELETE = do_PATCH = _not_found

    def log_message(self, format: str, *args: Any) -> None:
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)


def make_server(host: str = "127.0.0.1", port: int = 8000, verbose: bool = False) -> ThreadingHTTPServer:
    """A ready (bound, not yet serving) server; port 0 picks a free port (see ``server_address``)."""
    server = ThreadingHTTPServer((host, port), AskHandler)
    server.daemon_threads = True
    server.verbose = verbose  # type: ignore[attr-defined]
    return server
