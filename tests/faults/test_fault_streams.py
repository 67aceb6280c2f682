"""Hostile answer streams: never-ending (bounded by the body cap or the timeout, in bounded memory), malformed, error
events; callables whose streams misbehave. Each is that case's error, naming what went wrong."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from ask_server import answer, chunk
from stream_server import JSON_LINES, StreamServer

from pytest_rageval.targets.callable_client import CallableClient
from pytest_rageval.targets.http_client import HttpClient
from pytest_rageval.targets.protocol import RagCallError


def _system(body: dict[str, Any]) -> dict[str, Any]:
    return answer("an answer", [chunk("docs/a.md", "# A", 1)])


def _fails(client: Any) -> RagCallError:
    async def ask() -> None:
        try:
            await client.aask("q", k=5, params={})
        finally:
            await client.aclose()

    with pytest.raises(RagCallError) as info:
        asyncio.run(ask())
    return info.value


@pytest.mark.parametrize("content_type", ["text/event-stream", JSON_LINES])
def test_a_never_ending_stream_stops_at_the_body_cap_in_bounded_memory(content_type: str) -> None:
    cap = 256 * 1024
    with StreamServer(_system, content_type=content_type, forever=True) as server:
        tracemalloc.start()
        try:
            error = _fails(HttpClient(server.url, max_response_bytes=cap, timeout=30))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert error.kind == "invalid_response" and error.attempts == 1
    assert f"answer stream from {server.url} refused: response body over 262,144 bytes" in error.message
    assert peak < 8 * cap, peak  # the answer is held once, never the whole endless stream


def test_a_stream_that_never_ends_slowly_errors_at_the_timeout_without_retry() -> None:
    with StreamServer(_system, forever=True, pause=0.05) as server:
        start = time.perf_counter()
        error = _fails(HttpClient(server.url, timeout=0.6))
        took = time.perf_counter() - start
        asked = len(server.requests)
    assert error.kind == "timeout" and asked == 1 and took < 1.5, (error, asked, took)
    assert error.message.startswith(f"the answer stream from {server.url} did not end within 0.6 s (rageval_timeout;")
    assert "send data: [DONE]" in error.message


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (
            ['data: {"choices": [{"delta": {"content": "a"}}]}\n\n', "data: {'bad': json}\n\n"],
            "answer stream from URL: event 2 of the stream is not JSON: \"{'bad': json}\"",
        ),
        (["event: error\ndata: model overloaded\n\n"], "event 1 of the stream is an error event: 'model overloaded'"),
        (['data: {"delta": "x"}\n\n'], "event 1 of the stream has no 'choices' list"),
        (["data: [DONE]\n\n"], "ended after 1 events without a text delta or a response event"),
        (['event: response\ndata: {"debug": {}}\n\n'], "answer stream's response has no 'answer'"),
    ],
)
def test_a_malformed_stream_is_the_cases_error_naming_the_event(events: list[str], message: str) -> None:
    with StreamServer(_system, events=events) as server:
        error = _fails(HttpClient(server.url))
        asked = len(server.requests)
    assert error.kind == "invalid_response" and asked == 1, error  # not retried: it would come again
    assert message.replace("URL", server.url) in error.message, error.message


def test_a_callable_stream_that_misbehaves_is_that_cases_error() -> None:
    def yields_a_number(question: str, params: dict[str, Any]) -> Iterator[Any]:
        yield "a"
        yield 3

    def raises(question: str, params: dict[str, Any]) -> Iterator[str]:
        yield "a"
        raise KeyError("index")

    async def endless(question: str, params: dict[str, Any]) -> AsyncIterator[str]:
        while True:
            await asyncio.sleep(0.01)
            yield "more "

    def endless_sync(question: str, params: dict[str, Any]) -> Iterator[str]:
        while True:
            time.sleep(0.01)
            yield "more "

    error = _fails(CallableClient(yields_a_number, name="t:yields"))
    assert error.kind == "target" and "the stream yielded a int; a streamed answer yields text" in error.message
    assert _fails(CallableClient(raises, name="t:raises")).message == "streaming: KeyError: 'index'"
    for fn in (endless, endless_sync):
        start = time.perf_counter()
        error = _fails(CallableClient(fn, name="t:endless", timeout=0.3))
        assert error.kind == "timeout" and error.message == "t:endless's stream did not end within 0.3 s"
        assert time.perf_counter() - start < 1.5


def test_a_secret_echoed_in_a_malformed_event_is_masked_before_the_message_cuts_it() -> None:
    secret = "sk-live-0123456789abcdefghij"
    events = ["data: " + "x" * 60 + f" {secret} {{not json\n\n"]  # a message quotes 80 characters
    with StreamServer(_system, events=events) as server:
        error = _fails(HttpClient(server.url, headers={"Authorization": f"Bearer {secret}"}))
    assert "event 1 of the stream is not JSON" in error.message
    assert "sk-live" not in error.message and "0123" not in error.message, error.message
