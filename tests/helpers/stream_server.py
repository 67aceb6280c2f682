"""The streaming twin of ask_server.AskServer: the same scripted answers, sent as server-sent events or JSON lines.

The answer goes out word by word as text deltas (OpenAI-style chunks by default), then the rest of the response as a
``response`` event, then ``data: [DONE]``. The server sleeps ``first_delay`` seconds before the first delta and
records, per request, how long after the request arrived it sent that delta (``ttft_ms``): the client's time to first
token should match it. ``forever`` streams deltas until the client hangs up; ``events`` sends raw events instead.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback import LoopbackServer

Responder = Callable[[dict[str, Any]], dict[str, Any]]

SSE = "text/event-stream"
JSON_LINES = "application/x-ndjson"


def openai_chunk(text: str | None) -> dict[str, Any]:
    """An OpenAI chat completion chunk carrying ``text`` (None: a chunk without content)."""
    delta = {"role": "assistant"} if text is None else {"content": text}
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def words(text: str) -> list[str]:
    """``text`` cut into deltas that join back to it exactly."""
    parts = text.split(" ")
    return [part + " " for part in parts[:-1]] + [parts[-1]]


class StreamServer:
    """``with StreamServer(responder) as srv: srv.url`` — streams the responder's answer; records bodies and times."""

    def __init__(
        self,
        responder: Responder,
        *,
        content_type: str = SSE,
        first_delay: float | Callable[[dict[str, Any]], float] = 0.0,
        forever: bool = False,
        pause: float = 0.0,
        events: list[str] | None = None,
    ) -> None:
        self.responder = responder
        self.content_type = content_type
        self.first_delay = first_delay
        self.forever = forever
        self.pause = pause  # seconds between events
        self.events = events
        self.requests: list[dict[str, Any]] = []
        self.ttft_ms: dict[str, float] = {}  # question -> ms from the request's arrival to the first delta sent
        self.sent_bytes: list[int] = []  # per finished request, bytes of events written
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                arrived = time.perf_counter()
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                with server._lock:
                    server.requests.append(body)
                self.send_response(200)
                self.send_header("Content-Type", server.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                sent = 0
                try:
                    for index, (event, first) in enumerate(server._events(body)):
                        if first:
                            delay = server.first_delay
                            time.sleep(delay(body) if callable(delay) else delay)
                        elif index and server.pause:
                            time.sleep(server.pause)
                        data = event.encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                        sent += len(data)
                        if first:
                            with server._lock:
                                server.ttft_ms[str(body.get("question"))] = (time.perf_counter() - arrived) * 1000.0
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass
                with server._lock:
                    server.sent_bytes.append(sent)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = LoopbackServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def _frame(self, value: Any, name: str = "") -> str:
        data = value if isinstance(value, str) else json.dumps(value)
        if self.content_type == SSE:
            return (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
        return json.dumps({"response": value} if name == "response" else value) + "\n"

    def _events(self, body: dict[str, Any]) -> Any:
        """(event text, whether it carries the first text delta) pairs."""
        if self.events is not None:
            yield from ((event, index == 0) for index, event in enumerate(self.events))
            return
        full = dict(self.responder(body))
        answer = str(full.pop("answer", ""))
        yield self._frame(openai_chunk(None)), False  # the role chunk: no text yet
        if self.forever:
            first = True
            while True:
                yield self._frame(openai_chunk("more ")), first
                first = False
        for index, piece in enumerate(words(answer)):
            yield self._frame(openai_chunk(piece)), index == 0
        yield self._frame(full, "response"), False
        if self.content_type == SSE:
            yield "data: [DONE]\n\n", False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}/api/v1/ask"

    def __enter__(self) -> StreamServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
