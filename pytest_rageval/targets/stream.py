"""Streamed answers: server-sent events and JSON lines read into one response, and the text deltas of a callable.

Pure: bytes in, one response dict out; the clients time the first delta. What a stream may carry:

- **framing**, told by the response's ``Content-Type``: ``text/event-stream`` (server-sent events: ``data:``
  lines, a blank line ends an event; ``event:`` names it; comments and ``id:``/``retry:`` are skipped) or JSON
  lines (``application/x-ndjson``, ``application/jsonl``, ``application/json-lines``, ``application/x-jsonlines``:
  one JSON value a line);
- **format** (ini ``rageval_stream_format``), where each event's text delta is: ``openai`` (the default)
  ``{"choices": [{"delta": {"content": "..."}}]}`` of the first choice, a null or absent content being no text;
  ``text``, the event's data itself (in JSON lines, a JSON string); ``json:<dotted.path>``, the string at that
  path of each JSON event (an event without it carries no text). ``data: [DONE]`` ends a stream in every format.
- **the response object**: the rest of the ask API's response (references, ``debug.retrieved_chunks``,
  ``abstained``, timings) comes as one event named ``response`` (``event: response``) whose data is that JSON
  object, or, in any framing, as an event ``{"response": {...}}`` (an object whose only key is ``response``). The
  last one counts; it is read with the response map like a whole JSON answer.
- **the answer** is the streamed text (the deltas joined) when any delta came, else the response object's own
  answer.

An event named ``error``, or a JSON event with an ``error`` key, is that call's error; so is an event that is not
JSON where JSON is expected or whose delta is not text (:class:`StreamError`, naming the event by number).

A callable target streams by returning an iterator or async iterator (a generator): each ``str`` it yields is a
text delta, a ``dict`` (or a pydantic model, a dataclass) it yields or returns is the response object; the last
one counts.
"""

from __future__ import annotations

import codecs
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from pytest_rageval import safejson
from pytest_rageval.errors import RagevalError

__all__ = [
    "FORMATS",
    "Drained",
    "StreamError",
    "StreamFormat",
    "StreamReader",
    "drain_async",
    "drain_sync",
    "framing_of",
    "is_async_stream",
    "is_stream",
    "parse_stream_format",
    "with_answer",
]

Framing = Literal["sse", "lines"]

#: the values ``rageval_stream_format`` takes, for messages and the docs
FORMATS = ("openai", "text", "json:<dotted.path>")

_LINE_TYPES = frozenset(
    {"application/x-ndjson", "application/jsonl", "application/json-lines", "application/x-jsonlines"}
)
_EXCERPT = 80


class StreamError(RagevalError):
    """A stream that cannot be read: a malformed event (named by its number), an error event, no answer."""


@dataclass(frozen=True)
class StreamFormat:
    """Where an event's text delta is: ``kind`` ``openai``, ``text`` or ``json`` (with its ``path``)."""

    kind: Literal["openai", "text", "json"] = "openai"
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"json:{'.'.join(self.path)}" if self.kind == "json" else self.kind


def parse_stream_format(text: str) -> StreamFormat:
    """``rageval_stream_format``'s value (empty: ``openai``); ValueError naming the values it takes."""
    value = text.strip()
    if value in ("", "openai"):
        return StreamFormat()
    if value == "text":
        return StreamFormat("text")
    if value.startswith("json:"):
        path = tuple(value[5:].strip().split("."))
        if all(part.strip() == part and part for part in path):
            return StreamFormat("json", path)
        raise ValueError(f"rageval_stream_format: {value!r} needs a dotted path after json: (e.g. json:delta.text)")
    raise ValueError(f"rageval_stream_format: unknown value {value[:60]!r}; expected one of {', '.join(FORMATS)}")


def framing_of(content_type: str | None) -> Framing | None:
    """How a body of ``content_type`` is framed as a stream; None: it is no stream (read it whole)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media == "text/event-stream":
        return "sse"
    return "lines" if media in _LINE_TYPES else None


def _excerpt(text: str, mask: Callable[[str], str]) -> str:
    flat = " ".join(mask(text).split())  # secrets masked before the cut
    return repr(flat if len(flat) <= _EXCERPT else flat[: _EXCERPT - 3] + "...")


def _at(data: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` (a numeric segment indexes a list); None when absent."""
    for part in path:
        if isinstance(data, Mapping):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def with_answer(data: Mapping[str, Any], path: str, text: str) -> dict[str, Any]:
    """A copy of ``data`` with ``text`` at the dotted ``path`` (the response map's answer source), dicts made on the way."""
    out = dict(data)
    node = out
    parts = path.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        node[part] = child = dict(child) if isinstance(child, Mapping) else {}
        node = child
    node[parts[-1]] = text
    return out


class StreamReader:
    """One stream read piece by piece: ``feed`` bytes as they come, then ``result``.

    ``feed`` returns True when the piece brought the first non-empty text delta (the clients time it);
    ``done`` is set by ``[DONE]`` (nothing after it is read). Memory stays within what was fed: the clients cap
    that (``rageval_max_response_bytes``).
    """

    def __init__(self, fmt: StreamFormat, framing: Framing, *, mask: Callable[[str], str] = str) -> None:
        self.format = fmt
        self.framing = framing
        self._mask = mask  # what an event's text goes through before a message quotes it
        self.events = 0  # events read so far
        self.done = False
        self.notes: list[str] = []
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""  # text after the last line end
        self._data: list[str] = []  # the data lines of the event being read (server-sent events)
        self._name = ""
        self._parts: list[str] = []
        self._deltas = 0
        self._response: dict[str, Any] | None = None
        self._texted = False

    @property
    def started(self) -> bool:
        """Whether some non-empty text delta came."""
        return self._texted

    def feed(self, data: bytes) -> bool:
        """Read ``data``; True when it brought the first non-empty text delta."""
        before = self._texted
        text = self._pending + self._decoder.decode(data)
        lines = text.splitlines(keepends=True)
        self._pending = lines.pop() if lines and not lines[-1].endswith(("\n", "\r")) else ""
        if self._pending.endswith("\r"):  # a CR may be the first half of CRLF: wait for the next piece
            lines.append(self._pending)
            self._pending = ""
        for line in lines:
            if self.done:
                break
            self._line(line.rstrip("\r\n"))
        return self._texted and not before

    def result(self) -> tuple[str | None, dict[str, Any] | None]:
        """(the streamed text, None when no delta came; the last response object, None when none came)."""
        tail = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        if tail and not self.done:
            self._line(tail)
        if self.framing == "sse" and self._data and not self.done:
            self._dispatch()  # a last event without its blank line
        return ("".join(self._parts) if self._deltas else None), self._response

    # ------------------------------------------------------------------ framing

    def _line(self, line: str) -> None:
        if self.framing == "lines":
            if line.strip():
                self._name = ""
                self._data = [line]
                self._dispatch()
            return
        if not line:
            if self._data:
                self._dispatch()
            self._name = ""
            return
        if line.startswith(":"):
            return  # a comment (keep-alive)
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._name = value.strip()

    def _dispatch(self) -> None:
        data, name = "\n".join(self._data), self._name
        self._data, self._name = [], ""
        self.events += 1
        if data.strip() == "[DONE]":
            self.done = True
            return
        if name == "error":
            raise StreamError(f"event {self.events} of the stream is an error event: {_excerpt(data, self._mask)}")
        if name == "response":
            self._set_response(self._json(data), data)
            return
        if name not in ("", "message"):
            return  # another named event (a ping, a progress note): not the answer
        if self.format.kind == "text" and self.framing == "sse":
            self._delta(data)
            return
        value = self._json(data)
        if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("response"), dict):
            self._set_response(value["response"], data)
        elif isinstance(value, dict) and "error" in value:
            raise StreamError(f"event {self.events} of the stream is an error: {_excerpt(data, self._mask)}")
        else:
            self._delta(self._text_of(value, data))

    # ------------------------------------------------------------------ events

    def _json(self, data: str) -> Any:
        try:
            value, notes = safejson.loads(data, nonfinite="repair")
        except ValueError as exc:
            reason = "refused" if isinstance(exc, safejson.JsonLimitError) else "is not JSON"
            raise StreamError(f"event {self.events} of the stream {reason}: {_excerpt(data, self._mask)}") from None
        self.notes += [note for note in notes if note not in self.notes]
        return value

    def _text_of(self, value: Any, data: str) -> str | None:
        """The event's text delta (None: it carries none); StreamError when it is not the format's shape."""
        if self.format.kind == "text":
            delta = value
        elif self.format.kind == "json":
            delta = _at(value, self.format.path)
        else:
            choices = value.get("choices") if isinstance(value, dict) else None
            if not isinstance(choices, list):
                raise StreamError(
                    f"event {self.events} of the stream has no 'choices' list (an OpenAI-style chunk was expected; "
                    f"rageval_stream_format sets another shape): {_excerpt(data, self._mask)}"
                )
            delta = _at(choices[0], ("delta", "content")) if choices else None
        if delta is None or isinstance(delta, str):
            return delta
        where = "delta" if self.format.kind != "json" else f"'{'.'.join(self.format.path)}'"
        raise StreamError(
            f"event {self.events} of the stream has a {type(delta).__name__} {where}, not text "
            f"(rageval_stream_format {self.format}): {_excerpt(data, self._mask)}"
        )

    def _delta(self, text: str | None) -> None:
        if text is None:
            return
        self._deltas += 1
        self._parts.append(text)
        self._texted = self._texted or bool(text)

    def _set_response(self, value: Any, data: str) -> None:
        if not isinstance(value, dict):
            raise StreamError(
                f"event {self.events} of the stream is a response event whose data is not a JSON object: "
                f"{_excerpt(data, self._mask)}"
            )
        self._response = value


# --------------------------------------------------------------------------- callable targets


@dataclass
class Drained:
    """A callable's stream read to its end: its text deltas, its last response object, and when the first
    non-empty delta came (``time.perf_counter()``)."""

    parts: list[str] = field(default_factory=list)
    response: Any = None
    first_delta_at: float | None = None

    def take(self, item: Any) -> None:
        """One item the stream yielded (or returned)."""
        if isinstance(item, str):
            if item and self.first_delta_at is None:
                self.first_delta_at = time.perf_counter()
            self.parts.append(item)
        elif isinstance(item, (dict, BaseModel)) or (dataclasses.is_dataclass(item) and not isinstance(item, type)):
            self.response = item
        elif item is not None:
            raise TypeError(
                f"the stream yielded a {type(item).__name__}; a streamed answer yields text (str) deltas and "
                "a dict of the rest of the response"
            )

    def joined(self, answer_path: str) -> Any:
        """The response object with the streamed text at ``answer_path`` (the object as it is when no delta came)."""
        if not self.parts:
            return self.response if self.response is not None else {}
        data = self.response
        if isinstance(data, BaseModel):
            data = data.model_dump(exclude_none=True)
        elif dataclasses.is_dataclass(data) and not isinstance(data, type):
            data = dataclasses.asdict(data)
        return with_answer(data or {}, answer_path, "".join(self.parts))


def is_stream(value: Any) -> bool:
    """Whether a callable's result is a sync stream: an iterator that is not a str, bytes or mapping."""
    return isinstance(value, Iterator) and not isinstance(value, (str, bytes, Mapping))


def is_async_stream(value: Any) -> bool:
    return isinstance(value, AsyncIterator)


def drain_sync(stream: Iterator[Any]) -> Drained:
    """Read a sync stream to its end (a generator's return value counts as a response object)."""
    drained = Drained()
    while True:
        try:
            item = next(stream)
        except StopIteration as stop:
            drained.take(stop.value)
            return drained
        drained.take(item)


async def drain_async(stream: AsyncIterator[Any]) -> Drained:
    """Read an async stream to its end."""
    drained = Drained()
    async for item in stream:
        drained.take(item)
    return drained
