"""Response bodies read with a byte limit after decompression (the RAG's and the judge's).

httpx would inflate a gzip body whole, and read an endless chunked body until the timeout: a 3 MB
gzip bomb becomes gigabytes. An ``httpx`` response hook (public API, so proxies and the openai SDK's
client are covered) swaps the body stream for one that inflates gzip/deflate itself, a bounded
piece at a time, and raises ``BodyRefused`` once more than the limit has come out. Requests ask
for ``gzip, deflate`` only; any other content-encoding is refused rather than inflated unbounded.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from . import defaults

ACCEPT_ENCODING = "gzip, deflate"


class BodyRefused(Exception):
    """A response body more than the limit once decompressed, in an encoding not read, or damaged."""


def over_limit(limit: int) -> BodyRefused:
    return BodyRefused(f"response body over {limit:,} bytes (rageval_max_response_bytes); the rest was not read")


class _Inflater:
    """A gzip or deflate body inflated in pieces of at most ``room`` bytes (a bomb never inflates whole)."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding == "gzip"
        self._started = False
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS if self._gzip else zlib.MAX_WBITS)

    def step(self, data: bytes, room: int) -> tuple[bytes, bytes]:
        """(output of at most ``room`` bytes, input left over)."""
        try:
            try:
                out = self._z.decompress(data, room)
            except zlib.error:
                if self._gzip or self._started:
                    raise
                # "deflate" is sometimes sent without the zlib header: accept the raw form, as httpx does
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                out = self._z.decompress(data, room)
        except zlib.error as exc:
            raise BodyRefused(f"the {'gzip' if self._gzip else 'deflate'} response body is damaged: {exc}") from None
        self._started = True
        left = self._z.unconsumed_tail
        if not out and left:
            raise BodyRefused("the compressed response body makes no progress")
        return out, left


class BoundedStream:
    """The decoded body of ``raw`` (sent with ``encoding``), at most ``limit`` bytes of it.

    Used through a subclass of the response's own ``AsyncByteStream`` (``_stream_class``): the openai SDK
    may run on another httpx line (``httpx2``) than the RAG client."""

    def __init__(self, raw: Any, encoding: str, limit: int) -> None:
        self._raw = raw
        self._encoding = encoding
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        inflater = _Inflater(self._encoding) if self._encoding in ("gzip", "deflate") else None
        async for chunk in self._raw:
            data = chunk
            while data:
                if inflater is None:
                    out, data = data, b""
                else:
                    out, data = inflater.step(data, self._limit - total + 1)
                total += len(out)
                if total > self._limit:
                    raise over_limit(self._limit)
                if out:
                    yield out

    async def aclose(self) -> None:
        close = getattr(self._raw, "aclose", None)
        if close is not None:
            await close()


async def _ask_for_readable_encodings(request: httpx.Request) -> None:
    request.headers["Accept-Encoding"] = ACCEPT_ENCODING


def _bound(limit: int) -> Callable[[httpx.Response], Awaitable[None]]:
    async def bound(response: httpx.Response) -> None:
        encoding = response.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in ("", "identity", "gzip", "deflate"):
            await response.aclose()
            raise BodyRefused(
                f"response body in content-encoding {encoding[:40]!r}, which is not read (the request asked for {ACCEPT_ENCODING})"
            )
        for name in ("Content-Encoding", "Content-Length"):
            response.headers.pop(name, None)  # the stream below is the decoded body
        response.stream = _stream_class(type(response))(response.stream, encoding, limit)

    return bound


_STREAM_CLASSES: dict[str, type] = {}


def _stream_class(response_type: type) -> type:
    """BoundedStream as a subclass of the ``AsyncByteStream`` of the library ``response_type`` comes from."""
    name = response_type.__module__.partition(".")[0]
    if name not in _STREAM_CLASSES:
        _STREAM_CLASSES[name] = type("BoundedStream", (BoundedStream, sys.modules[name].AsyncByteStream), {})
    return _STREAM_CLASSES[name]


def event_hooks(limit: int | None = None) -> dict[str, list[Any]]:
    """``event_hooks`` of an ``httpx.AsyncClient`` whose response bodies are read up to ``limit`` bytes."""
    return {"request": [_ask_for_readable_encodings], "response": [_bound(limit or defaults.MAX_RESPONSE_BYTES)]}


def refused(exc: BaseException) -> str | None:
    """Why a body was refused when ``exc`` is, or was raised from (the openai SDK wraps it), a BodyRefused
    or a library's ``DecodingError``; else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, BodyRefused) or type(current).__name__ == "DecodingError":
            return str(current)
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
