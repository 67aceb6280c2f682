"""Tests of targets/stream.py: the stream formats, the framing of server-sent events and JSON lines, callable streams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Generator
from typing import Any

import pytest

from pytest_rageval.targets.stream import (
    StreamError,
    StreamFormat,
    StreamReader,
    drain_sync,
    framing_of,
    is_async_stream,
    is_stream,
    parse_stream_format,
    with_answer,
)


def _chunk(text: Any) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + "\n\n"


def _read(body: str, fmt: str = "openai", framing: str = "sse", piece: int = 0) -> tuple[Any, Any, StreamReader]:
    reader = StreamReader(parse_stream_format(fmt), framing)  # type: ignore[arg-type]
    data = body.encode()
    pieces = [data[i : i + piece] for i in range(0, len(data), piece)] if piece else [data]
    for part in pieces:
        reader.feed(part)
    text, response = reader.result()
    return text, response, reader


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", StreamFormat()),
        ("openai", StreamFormat()),
        (" text ", StreamFormat("text")),
        ("json:delta.text", StreamFormat("json", ("delta", "text"))),
        ("json:choices.0.text", StreamFormat("json", ("choices", "0", "text"))),
    ],
)
def test_stream_formats_are_read(value: str, expected: StreamFormat) -> None:
    assert parse_stream_format(value) == expected
    assert str(expected) in ("openai", "text", "json:delta.text", "json:choices.0.text")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("opneai", "unknown value 'opneai'; expected one of openai, text, json:<dotted.path>"),
        ("json:", "needs a dotted path after json:"),
        ("json:a..b", "needs a dotted path after json:"),
    ],
)
def test_a_bad_stream_format_is_named(value: str, message: str) -> None:
    with pytest.raises(ValueError, match="rageval_stream_format") as info:
        parse_stream_format(value)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("content_type", "framing"),
    [
        ("text/event-stream; charset=utf-8", "sse"),
        ("Application/X-NDJSON", "lines"),
        ("application/jsonl", "lines"),
        ("application/json", None),
        (None, None),
    ],
)
def test_framing_follows_the_content_type(content_type: str | None, framing: str | None) -> None:
    assert framing_of(content_type) == framing


@pytest.mark.parametrize("piece", [0, 1, 7])
def test_openai_deltas_join_into_the_answer_whatever_the_pieces(piece: int) -> None:
    body = (
        ": keep-alive\r\n\r\n"
        + 'data: {"choices": [{"delta": {"role": "assistant"}}]}\r\n\r\n'
        + _chunk("Héllo ")
        + "event: ping\ndata: {}\n\n"
        + _chunk("world")
        + 'data: {"choices": []}\n\n'  # a usage chunk
        + 'event: response\ndata: {"references": [], "debug": {"retrieved_chunks": []}}\n\n'
        + "data: [DONE]\n\n"
        + _chunk(" never read")
    )
    text, response, reader = _read(body, piece=piece)
    assert text == "Héllo world"
    assert response == {"references": [], "debug": {"retrieved_chunks": []}}
    assert reader.done and reader.started


def test_first_text_is_reported_once_by_the_piece_that_brought_it() -> None:
    reader = StreamReader(StreamFormat(), "sse")
    assert reader.feed(b'data: {"choices": [{"delta": {"content": ""}}]}\n\n') is False  # empty: no token yet
    assert reader.feed(_chunk("a")[:10].encode()) is False
    assert reader.feed(_chunk("a")[10:].encode()) is True
    assert reader.feed(_chunk("b").encode()) is False


def test_text_format_and_multi_line_data() -> None:
    text, response, _ = _read("data: line one\ndata: line two\n\ndata:  spaced\n\n", fmt="text")
    assert text == "line one\nline two spaced" and response is None


def test_json_path_format_skips_events_without_the_path() -> None:
    body = 'data: {"type": "start"}\n\ndata: {"delta": {"text": "a"}}\n\ndata: {"delta": {"text": "b"}}\n\n'
    assert _read(body, fmt="json:delta.text")[0] == "ab"


def test_json_lines_carry_deltas_and_the_response_object() -> None:
    lines = [{"choices": [{"delta": {"content": "x"}}]}, {"response": {"answer": "ignored", "abstained": False}}]
    text, response, _ = _read("\n".join(json.dumps(line) for line in lines) + "\n\n", framing="lines")
    assert text == "x" and response == {"answer": "ignored", "abstained": False}
    text, _, _ = _read('"a"\n"b"\n', fmt="text", framing="lines")
    assert text == "ab"


def test_a_last_event_without_its_blank_line_counts() -> None:
    assert _read(_chunk("a") + _chunk("b").rstrip("\n"))[0] == "ab"


def test_no_delta_leaves_the_answer_to_the_response_object() -> None:
    text, response, _ = _read('event: response\ndata: {"answer": "whole"}\n\n')
    assert text is None and response == {"answer": "whole"}


@pytest.mark.parametrize(
    ("body", "fmt", "message"),
    [
        (_chunk("a") + _chunk("b") + "data: {not json\n\n", "openai", "event 3 of the stream is not JSON: '{not json'"),
        ('data: {"text": "a"}\n\n', "openai", "event 1 of the stream has no 'choices' list"),
        (_chunk(5), "openai", "event 1 of the stream has a int delta, not text"),
        ('data: {"d": [1]}\n\n', "json:d", "event 1 of the stream has a list 'd', not text"),
        ("event: error\ndata: overloaded\n\n", "openai", "event 1 of the stream is an error event: 'overloaded'"),
        ('data: {"error": {"message": "boom"}}\n\n', "openai", "event 1 of the stream is an error:"),
        ("event: response\ndata: [1]\n\n", "openai", "event 1 of the stream is a response event whose data is not"),
        ("data: NaN1\n\n", "text", None),
    ],
)
def test_a_malformed_event_is_named(body: str, fmt: str, message: str | None) -> None:
    if message is None:  # plain text is never malformed
        assert _read(body, fmt=fmt)[0] == "NaN1"
        return
    with pytest.raises(StreamError) as info:
        _read(body, fmt=fmt)
    assert message in str(info.value)


def test_the_answer_goes_where_the_response_map_reads_it() -> None:
    data: dict[str, Any] = {"result": {"text": "old", "n": 1}, "other": 2}
    assert with_answer(data, "result.text", "new") == {"result": {"text": "new", "n": 1}, "other": 2}
    assert data["result"]["text"] == "old"  # the object itself is left alone
    assert with_answer({}, "a.b", "t") == {"a": {"b": "t"}}


def test_a_generator_is_a_stream_and_a_dict_is_not() -> None:
    def gen() -> Generator[Any, None, dict[str, Any]]:
        yield "a"
        yield {"references": []}
        yield "b"
        return {"abstained": False}

    async def agen() -> AsyncIterator[str]:
        yield "x"

    assert is_stream(gen()) and not is_stream({"answer": "x"}) and not is_stream("text") and not is_stream([1])
    assert is_async_stream(agen()) and not is_stream(agen())
    drained = drain_sync(gen())
    assert drained.joined("answer") == {"abstained": False, "answer": "ab"}  # the last object counts
    assert drained.first_delta_at is not None


def test_a_stream_yielding_something_else_is_refused() -> None:
    with pytest.raises(TypeError, match="the stream yielded a int; a streamed answer yields text"):
        drain_sync(iter(["a", 3]))
