"""Loopback servers for the benchmarks: a RAG ask API and an OpenAI-compatible judge.

Both listen on 127.0.0.1 only, wait a fixed ``latency`` (seconds) before every
answer (in their own handler thread, so concurrent requests overlap like a real
remote service), count what they serve, and refuse (503) anything beyond
``max_requests`` so a runaway client cannot loop forever. Two ways to make them
refuse load, both answering 429 with an OpenAI-style error body and counting it
in ``refused``: ``refuse_above=M`` (no Retry-After) refuses a request that finds
M in flight; ``rate_limit=(R, W)``, a sliding-window budget, refuses a request
that finds R accepted within the last W seconds, with ``Retry-After`` the whole
seconds (at least 1) until the oldest of them leaves the window. Accepted
arrival times are kept in ``arrivals`` (refused ones in ``refused_arrivals``),
``time.monotonic()``, for ``most_in_window``.

- ``RagServer``: the default ask API (``POST /api/v1/ask``). Question ``q-<i> ...``
  gets an answer, one reference and five retrieved chunks, the first of which
  is the gold support ``docs/case<i>.md`` / ``# Case <i>`` (see ``eval_line``),
  and ``abstained: false`` (so pytest-rageval needs no abstention classifier).
- ``JudgeServer``: ``POST /v1/chat/completions``. A pytest-rageval request (its
  ``response_format.json_schema.name`` or prompt marker names the metric) gets
  a passing verdict for that metric. A DeepEval prompt (Faithfulness: truths,
  claims, verdicts, reason; AnswerRelevancy: statements, verdicts, reason) gets
  JSON its pydantic schemas accept: one truth/claim/statement, one ``"yes"``
  verdict, a reason. Anything else is a 400 naming the problem, and the first
  few unknown prompts are kept in ``unknown`` for debugging.

Use as context managers; ``python bench/servers.py`` serves both by hand.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from typing_extensions import Self

Reply = tuple[int, dict[str, Any], Any]  # (status, headers, JSON-able body)

#: Passing verdicts for pytest-rageval's judge metrics (the shapes its prompts ask for).
RAGEVAL_VERDICTS: dict[str, dict[str, Any]] = {
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

_MARKER = re.compile(r"\[prompt ([a-z_]+)/v\d+\]")
_ids = itertools.count(1)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default backlog of 5 stalls bursts of connects for a second


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 answering POSTs with ``self.handle(path, body)`` after ``latency`` s."""

    route = "/"

    def __init__(
        self,
        *,
        latency: float = 0.0,
        max_requests: int = 200_000,
        refuse_above: int | None = None,
        rate_limit: tuple[int, float] | None = None,
    ) -> None:
        self.latency = latency
        self.max_requests = max_requests
        self.refuse_above = refuse_above  # answer 429 (no Retry-After) to a request that finds this many in flight
        if rate_limit is not None and (rate_limit[0] < 1 or rate_limit[1] <= 0):
            raise ValueError(f"rate_limit must be (requests >= 1, window seconds > 0), got {rate_limit!r}")
        self.rate_limit = rate_limit  # (allowed, window s): answer 429 + Retry-After past `allowed` in any window
        self.arrivals: list[float] = []  # time.monotonic() of each accepted request, in order
        self.refused_arrivals: list[float] = []  # and of each refused one
        self.refused = 0
        self.count = 0
        self.kinds: Counter[str] = Counter()
        self.unknown: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = _HTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    # -- to override -------------------------------------------------------------

    def handle(self, path: str, body: Any) -> tuple[str, Reply]:
        """Return (kind of request, reply)."""
        raise NotImplementedError

    # -- plumbing ----------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like a real service

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with server._lock:
                    now = time.monotonic()
                    busy = server.refuse_above is not None and server.in_flight >= server.refuse_above
                    retry_after = None if busy else server._over_rate(now)
                    if busy or retry_after is not None:
                        server.refused += 1
                        server.refused_arrivals.append(now)
                    else:
                        server.count += 1
                        server.in_flight += 1
                        server.max_in_flight = max(server.max_in_flight, server.in_flight)
                        server.arrivals.append(now)
                    over = server.count > server.max_requests
                if busy:
                    self._send(
                        429, {}, {"error": {"message": "bench server: too many in flight", "type": "rate_limit_error"}}
                    )
                    return
                if retry_after is not None:
                    allowed, window = server.rate_limit or (0, 0.0)
                    message = f"bench server: rate limit reached ({allowed} requests per {window:g} s)"
                    self._send(
                        429,
                        {"Retry-After": str(retry_after)},
                        {"error": {"message": message, "type": "rate_limit_error"}},
                    )
                    return
                try:
                    if over:
                        self._send(
                            503,
                            {},
                            {"error": {"message": "bench server: request budget exhausted", "type": "server_error"}},
                        )
                        return
                    try:
                        body = json.loads(raw or b"{}")
                    except json.JSONDecodeError:
                        body = {"_raw": raw.decode("utf-8", "replace")}
                    if server.latency > 0:
                        time.sleep(server.latency)
                    kind, reply = server.handle(self.path, body)
                    with server._lock:
                        server.kinds[kind] += 1
                    self._send(*reply)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def do_GET(self) -> None:
                self._send(404, {}, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def _send(self, status: int, headers: dict[str, Any], payload: Any) -> None:
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

        return Handler

    def _over_rate(self, now: float) -> int | None:
        """Seconds to put in Retry-After when a request at ``now`` would pass the rate limit (the lock held), else None."""
        if self.rate_limit is None:
            return None
        allowed, window = self.rate_limit
        inside = bisect.bisect_right(self.arrivals, now - window)  # the first accepted arrival still in the window
        if len(self.arrivals) - inside < allowed:
            return None
        return max(1, math.ceil(self.arrivals[len(self.arrivals) - allowed] + window - now))

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"  # bound to 127.0.0.1 above

    def reset(self) -> None:
        """Forget the counts (between runs of one benchmark)."""
        with self._lock:
            self.count = 0
            self.refused = 0
            self.kinds.clear()
            self.unknown.clear()
            self.max_in_flight = self.in_flight
            self.arrivals.clear()
            self.refused_arrivals.clear()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def most_in_window(times: list[float], window: float) -> int:
    """The most of ``times`` (sorted) in any window of ``window`` seconds, as the rate limit counts: (t - window, t]."""
    return max((i + 1 - bisect.bisect_right(times, t - window, 0, i + 1) for i, t in enumerate(times)), default=0)


# --------------------------------------------------------------------------- the RAG


def eval_line(i: int) -> dict[str, Any]:
    """Eval-set line ``i``: answerable, one gold support, a reference answer (so correctness applies)."""
    return {
        "id": f"case-{i}",
        "question": f"q-{i} What does note {i} say about the budget?",
        "gold_supports": [{"rel_path": f"docs/case{i}.md", "heading_path": f"# Case {i}"}],
        "reference_answer": f"Note {i} says the budget is {i} ARB.",
        "tags": ["bench"],
    }


def _chunk(rel_path: str, heading: str, rank: int, text: str) -> dict[str, Any]:
    return {
        "chunk_id": f"{rel_path}#{rank}",
        "doc_id": rel_path,
        "rel_path": rel_path,
        "heading_path": heading,
        "text": text,
        "rank": rank,
        "score_final": round(1.0 / rank, 3),
    }


def rag_answer(question: str) -> dict[str, Any]:
    """The ask-API body for a ``q-<i> ...`` question: gold chunk first."""
    match = re.match(r"q-(\d+)", question or "")
    i = int(match.group(1)) if match else 0
    gold = _chunk(f"docs/case{i}.md", f"# Case {i}", 1, f"Note {i}: the budget is {i} ARB.")
    others = [_chunk(f"docs/other{j}.md", f"# Other {j}", j, f"Unrelated note {j}.") for j in range(2, 6)]
    return {
        "answer": f"Note {i} says the budget is {i} ARB.",
        "references": [gold],
        "abstained": False,
        "debug": {"retrieved_chunks": [gold, *others], "folder_selection": {"selected_folders": [""]}},
        "timings": {"retrieval_ms": 1.0, "generation_ms": 1.0},
    }


class RagServer(LoopbackServer):
    """``POST /api/v1/ask`` in the default shape; ``url`` is the target for pytest-rageval."""

    def handle(self, path: str, body: Any) -> tuple[str, Reply]:
        if path.split("?")[0].rstrip("/") != "/api/v1/ask":
            return "404", (404, {}, {"error": f"no route {path}"})
        return "ask", (200, {}, rag_answer(str(body.get("question", ""))))

    @property
    def url(self) -> str:
        return f"{self.root}/api/v1/ask"


# --------------------------------------------------------------------------- the judge


def _completion(content: str, model: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def rageval_metric(body: Mapping[str, Any]) -> str | None:
    """The pytest-rageval judge metric of a request: the json_schema name, else the prompt's version marker."""
    fmt = body.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name") if isinstance(fmt, Mapping) else None
    if name in RAGEVAL_VERDICTS:
        return str(name)
    for message in body.get("messages") or []:
        found = _MARKER.search(str(message.get("content") or ""))
        if found and found.group(1) in RAGEVAL_VERDICTS:
            return found.group(1)
    return None


def _text(body: Mapping[str, Any]) -> str:
    """All message text of a request (content may be a string or a list of parts)."""
    parts: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "\n".join(parts)


#: DeepEval prompt recognisers, first match wins: (kind, needle in the prompt, answer).
DEEPEVAL_PROMPTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("deepeval.faithfulness.verdicts", "indicate whether EACH claim", {"verdicts": [{"verdict": "yes"}]}),
    ("deepeval.faithfulness.truths", '"truths" key', {"truths": ["The budget is stated in the note."]}),
    ("deepeval.faithfulness.claims", '"claims" key', {"claims": ["The note states the budget."]}),
    (
        "deepeval.faithfulness.reason",
        "faithfulness score",
        {"reason": "The score is 1.00 because there are no contradictions."},
    ),
    ("deepeval.answer_relevancy.verdicts", "whether each statement is relevant", {"verdicts": [{"verdict": "yes"}]}),
    ("deepeval.answer_relevancy.statements", '"statements" key', {"statements": ["The note states the budget."]}),
    (
        "deepeval.answer_relevancy.reason",
        "answer relevancy score",
        {"reason": "The score is 1.00 because every statement is relevant."},
    ),
)


def deepeval_reply(text: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, JSON answer) for a DeepEval Faithfulness/AnswerRelevancy prompt, else None."""
    lowered = text.lower()
    for kind, needle, answer in DEEPEVAL_PROMPTS:
        if needle.lower() in lowered:
            return kind, answer
    return None


class JudgeServer(LoopbackServer):
    """An OpenAI-compatible ``/v1/chat/completions``; ``base_url`` ends in ``/v1``."""

    def handle(self, path: str, body: Any) -> tuple[str, Reply]:
        if path.split("?")[0].rstrip("/") != "/v1/chat/completions":
            return "404", (404, {}, {"error": {"message": f"no route {path}", "type": "not_found"}})
        model = str(body.get("model") or "bench-judge")
        metric = rageval_metric(body)
        if metric is not None:
            return f"rageval.{metric}", (200, {}, _completion(json.dumps(RAGEVAL_VERDICTS[metric]), model))
        text = _text(body)
        found = deepeval_reply(text)
        if found is not None:
            kind, answer = found
            return kind, (200, {}, _completion(json.dumps(answer), model))
        with self._lock:
            if len(self.unknown) < 5:
                self.unknown.append(text[:2000])
        return "unknown", (
            400,
            {},
            {"error": {"message": "bench judge: unrecognised prompt", "type": "invalid_request_error"}},
        )

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def judge_requests(self) -> int:
        """Requests answered with a verdict (not 404s, unknown prompts or refusals)."""
        with self._lock:
            return sum(n for kind, n in self.kinds.items() if kind not in ("404", "unknown"))


def _main() -> None:  # pragma: no cover - manual use
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rag-latency-ms", type=float, default=100)
    parser.add_argument("--judge-latency-ms", type=float, default=200)
    args = parser.parse_args()
    with (
        RagServer(latency=args.rag_latency_ms / 1000) as rag,
        JudgeServer(latency=args.judge_latency_ms / 1000) as judge,
    ):
        print(f"RAG   {rag.url}\njudge {judge.base_url}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print(f"served: rag {dict(rag.kinds)}, judge {dict(judge.kinds)}")


if __name__ == "__main__":
    _main()
