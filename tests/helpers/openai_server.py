"""A loopback OpenAI-compatible chat server for tests (no mocks of the SDK).

``with OpenAIServer(responder) as srv:`` serves ``POST /v1/chat/completions`` on
127.0.0.1 (any other path: 404), records every request in ``srv.requests``
(``{"path", "body", "headers"}``; header names lower-cased) and answers with
``responder(body, headers) -> (status, headers, body)`` (a ``Content-Type`` among the
headers replaces the one chosen from the body's type). ``srv.base_url`` is
``http://127.0.0.1:PORT/v1``. The responder can be swapped at any time
(``srv.responder = ...``). Works for in-process tests and for pytester
subprocess runs (pass ``srv.base_url`` on the command line).

Ready responders: ``verdicts`` (a fixed answer per metric), ``content`` (always
the same message text), ``truncated``, ``fail_times`` (N errors first, optionally
with Retry-After), ``reject_json_schema`` (llama.cpp's 500), ``sequence``,
``drop_fields`` (a verdict missing fields, the first N times), ``refuse_bounds``
(a strict json_schema subset without maxLength/maxItems), ``refuse_extras``
(unknown request fields refused), and ``OneSlot`` (one request at a time, in
arrival order, each taking a fixed time: a local server with one slot).
Run ``python tests/helpers/openai_server.py`` to serve ``verdicts()`` by hand; ``--die-after N`` serves N chat
completions and then kills its own process (a judge server that crashes mid-run).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback import LoopbackServer

Body = dict[str, Any] | list[Any] | str | bytes
Reply = tuple[int, dict[str, Any], Body]
Responder = Callable[[dict[str, Any], dict[str, Any]], Reply]

#: A plausible answer for every judge metric (used by ``verdicts()`` for metrics not given).
DEFAULT_VERDICTS: dict[str, dict[str, Any]] = {
    "groundedness": {
        "reasoning": "All claims are supported.",
        "supported_claims": ["claim"],
        "unsupported_claims": [],
        "score": 4,
    },
    "correctness": {"reasoning": "Matches the reference.", "score": 4},
    "faithfulness": {"reasoning": "Supported by the context.", "passing": True},
    "relevancy": {"reasoning": "Addresses the question.", "passing": True},
    "completeness": {"reasoning": "Covers the question.", "score": 0.8},
    "reasoning_quality": {"reasoning": "Clear and logical.", "score": 0.8},
    "abstention": {"abstained": False, "confidence": 0.9},
    "conflict_ack": {"reasoning": "Mentions both sources.", "acknowledges_conflict": True},
}

LLAMA_CPP_REJECTION = {
    "error": {"code": 500, "message": "Input should be 'text' or 'json_object'", "type": "server_error"}
}

_ids = itertools.count(1)
_MARKER = re.compile(r"\[prompt ([a-z_]+)/v\d+\]")


# --------------------------------------------------------------------------- reply helpers


def completion(
    content: str | None,
    *,
    model: str = "judge-model",
    finish_reason: str = "stop",
    prompt_tokens: int | None = 100,
    completion_tokens: int | None = 20,
) -> dict[str, Any]:
    """A chat.completion body; ``prompt_tokens=None`` leaves ``usage`` out."""
    body: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
    }
    if prompt_tokens is not None:
        completion_tokens = completion_tokens or 0
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return body


def ok(content: str, **kwargs: Any) -> Reply:
    """A 200 reply carrying ``content`` as the assistant message."""
    return 200, {}, completion(content, **kwargs)


def error(status: int, message: str, *, type_: str = "server_error", headers: dict[str, Any] | None = None) -> Reply:
    """An error reply in OpenAI's ``{"error": {...}}`` shape."""
    return status, dict(headers or {}), {"error": {"message": message, "type": type_, "code": status}}


def metric_of(body: Mapping[str, Any]) -> str | None:
    """The judge metric of a request: the json_schema name, else the prompt's version marker."""
    fmt = body.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name") if isinstance(fmt, Mapping) else None
    if name:
        return str(name)
    for message in body.get("messages") or []:
        found = _MARKER.search(str(message.get("content") or ""))
        if found:
            return found.group(1)
    return None


def metric_named(body: Mapping[str, Any]) -> str:
    """The judge metric of a request that must name one (an assertion names the request that does not)."""
    metric = metric_of(body)
    assert metric is not None, f"a judge request naming no metric: {body}"
    return metric


def user_text(body: Mapping[str, Any]) -> str:
    """The first user message of a request."""
    return next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")


# --------------------------------------------------------------------------- responders


def verdicts(answers: Mapping[str, Any] | None = None, **kwargs: Any) -> Responder:
    """Answer each metric with ``answers[metric]`` (a dict is sent as JSON, a str as is), else its default."""
    table: dict[str, Any] = {**DEFAULT_VERDICTS, **(answers or {})}

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Reply:
        metric = metric_of(body)
        if metric not in table:
            return error(400, f"test server: no verdict for metric {metric!r}", type_="invalid_request_error")
        answer = table[metric]
        return ok(answer if isinstance(answer, str) else json.dumps(answer), **kwargs)

    return respond


def content(text: str, **kwargs: Any) -> Responder:
    """Always answer with this message text (e.g. not JSON)."""
    return lambda body, headers: ok(text, **kwargs)


def truncated(text: str = '{"reasoning": "The answer is supported by', **kwargs: Any) -> Responder:
    """Always answer with a cut-off message (finish_reason "length")."""
    return lambda body, headers: ok(text, finish_reason="length", **kwargs)


def sequence(*responders: Responder) -> Responder:
    """The i-th request goes to ``responders[i]``; the last one answers everything after."""
    lock, calls = threading.Lock(), itertools.count()

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Reply:
        with lock:
            index = next(calls)
        return responders[min(index, len(responders) - 1)](body, headers)

    return respond


def fail_times(
    n: int,
    status: int = 429,
    *,
    then: Responder | None = None,
    retry_after: str | None = None,
    message: str = "Rate limit reached",
) -> Responder:
    """The first ``n`` requests get ``status`` (with ``Retry-After`` when given), later ones go to ``then``."""
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    failing: Responder = lambda body, hdrs: error(status, message, type_="rate_limit_error", headers=headers)  # noqa: E731
    return sequence(*([failing] * n), then or verdicts())


def reject_json_schema(then: Responder | None = None) -> Responder:
    """Answer json_schema requests like llama.cpp's server (500); pass the others to ``then``."""
    after = then or verdicts()

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Reply:
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return 500, {}, LLAMA_CPP_REJECTION
        return after(body, headers)

    return respond


def drop_fields(*fields: str, times: int | None = None, then: Responder | None = None) -> Responder:
    """Answer with the default verdict minus ``fields`` (the first ``times`` requests; all when None)."""
    after = then or verdicts()
    lock, calls = threading.Lock(), itertools.count()

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Reply:
        with lock:
            index = next(calls)
        if times is not None and index >= times:
            return after(body, headers)
        metric = metric_of(body) or "correctness"
        answer = {k: v for k, v in DEFAULT_VERDICTS[metric].items() if k not in fields}
        return ok(json.dumps(answer))

    return respond


BOUND_KEYWORDS = ("maxLength", "maxItems", "minLength", "minItems")


def _has_bounds(schema: Any) -> bool:
    if isinstance(schema, Mapping):
        return any(k in BOUND_KEYWORDS for k in schema) or any(_has_bounds(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_bounds(v) for v in schema)
    return False


def refuse_bounds(then: Responder | None = None) -> Responder:
    """Refuse a json_schema whose schema has length/item bounds, as a strict subset would (400)."""
    after = then or verdicts()

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Reply:
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema" and _has_bounds(fmt.get("json_schema", {}).get("schema")):
            return error(
                400,
                "Invalid schema for response_format 'x': In context=('properties', 'reasoning'), 'maxLength' is not permitted.",
                type_="invalid_request_error",
            )
        return after(body, headers)

    return respond


def refuse_extras(then: Responder | None = None) -> Responder:
    """Refuse json_schema, and any request with fields beyond OpenAI's (``format``, ``guided_json``,
    ``response_format.schema``), naming the field, as a strict server does (400)."""
    after = then or verdicts()

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Reply:
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return error(400, "response_format json_schema is not supported", type_="invalid_request_error")
        for name in ("format", "guided_json"):
            if name in body:
                return error(400, f"Unrecognized request argument supplied: {name}", type_="invalid_request_error")
        if "schema" in fmt:
            return error(
                400,
                "Additional properties are not allowed ('schema' was unexpected) - 'response_format'",
                type_="invalid_request_error",
            )
        return after(body, headers)

    return respond


class OneSlot:
    """A responder that serves one request at a time in arrival order, ``seconds`` each (a one-slot
    local server), and records what it served: ``served`` holds (question, metric) in serving order."""

    def __init__(self, seconds: float, then: Responder | None = None) -> None:
        self.seconds = seconds
        self.then = then or verdicts()
        self.served: list[tuple[str, str | None]] = []
        self._tickets = itertools.count()
        self._serving = 0
        self._turn = threading.Condition()

    def __call__(self, body: dict[str, Any], headers: dict[str, Any]) -> Reply:
        with self._turn:
            ticket = next(self._tickets)
            self._turn.wait_for(lambda: self._serving == ticket)
        try:
            time.sleep(self.seconds)
            question = re.search(r"<question>\n(.*?)\n</question>", user_text(body), re.DOTALL)
            self.served.append((question.group(1) if question else "", metric_of(body)))
            return self.then(body, headers)
        finally:
            with self._turn:
                self._serving += 1
                self._turn.notify_all()


def slow(seconds: float, then: Responder | None = None) -> Responder:
    """Sleep before answering (for timeouts)."""
    after = then or verdicts()

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Reply:
        time.sleep(seconds)
        return after(body, headers)

    return respond


# --------------------------------------------------------------------------- server


class OpenAIServer:
    """``with OpenAIServer(responder) as srv: srv.base_url`` — a loopback chat-completions endpoint."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder: Responder = responder or verdicts()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd = LoopbackServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)
        self._started = False

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
                    self._send(404, {}, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append({"path": self.path, "body": body, "headers": headers})
                self._send(*server.responder(body, headers))

            def do_GET(self) -> None:
                self._send(404, {}, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def _send(self, status: int, headers: dict[str, Any], payload: Body) -> None:
                if isinstance(payload, bytes):
                    data, ctype = payload, "application/octet-stream"
                elif isinstance(payload, str):
                    data, ctype = payload.encode(), "text/plain; charset=utf-8"
                else:
                    data, ctype = json.dumps(payload).encode(), "application/json"
                headers = dict(headers)
                for name in [n for n in headers if n.lower() == "content-type"]:
                    ctype = headers.pop(name)  # the responder's own Content-Type wins (e.g. JSON that is not)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}/v1"  # bound to 127.0.0.1 above

    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of all requests so far."""
        with self._lock:
            return [r["body"] for r in self.requests]

    def metrics(self) -> list[str]:
        """The judge metric of each request so far."""
        return [metric_named(b) for b in self.bodies()]

    def start(self) -> OpenAIServer:
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            self._httpd.shutdown()
            self._started = False
        self._httpd.server_close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve_then_die(after: int) -> None:
    """Serve ``verdicts()`` in this process, print the base URL, and after answering ``after`` chat completions die
    with SIGKILL, as a judge server that crashes does (nothing listens on the port afterwards)."""
    answered = itertools.count(1)
    good = verdicts()
    one_at_a_time = threading.Lock()  # no answer goes out after the last one: the kill comes first

    class Dying(OpenAIServer):
        def _handler(self) -> type[BaseHTTPRequestHandler]:
            base = super()._handler()

            class Handler(base):  # type: ignore[valid-type, misc]
                def do_POST(self) -> None:
                    with one_at_a_time:
                        super().do_POST()
                        if next(answered) >= after:
                            self.wfile.flush()
                            os.kill(os.getpid(), signal.SIGKILL)

            return Handler

    with Dying(good) as srv:
        print(srv.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":  # pragma: no cover - manual use, and tests that need a judge process that dies
    if len(sys.argv) == 3 and sys.argv[1] == "--die-after":
        serve_then_die(int(sys.argv[2]))
    with OpenAIServer() as srv:
        print(srv.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
