"""The HTTP RAG client (the default ask API).

The client is async only; the runner drives them on its own event loop and
provides the sync face. Nothing here creates an event loop.

HTTP request (the default ask API): ``POST <url>?debug=true`` (``debug=true`` is
added to the URL's own query unless that already sets ``debug``) with the JSON
body ``{"question": ..., "k": K, **params}`` and the configured headers.
Timeouts, connection errors, 429 and 5xx are retried with exponential backoff
with jitter that honours ``Retry-After`` (``retry.backoff_delay``).

The request body and the reading of the response follow the request and response maps (``maps.py``). A 2xx answer
of server-sent events or JSON lines is read as it comes (``stream.py``; ``stream_format``: where each event's text
is, a :class:`~.stream.StreamFormat` or its ini text such as ``"json:delta.text"``), its time to first token kept.

Header values (ini ``rageval_headers``), credentials in the URL and the judge key
(``redact.SECRET_ENV``) never appear in ``describe()``, reprs, error messages or a
response: the decoded JSON of every answer and the text of every error body are
masked (``redact.Redactor``) before anything reads or cuts them.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from pytest_rageval import bounded_http, defaults, safejson
from pytest_rageval.evaluation.record import CallErrorKind
from pytest_rageval.flow import Limiter, SlotTicket
from pytest_rageval.redact import (
    Redactor,
    environment_secrets,
    guard_http_logs,
    header_secrets,
    public_url,
    scrub_urls,
    url_secrets,
)
from pytest_rageval.retry import backoff_delay

from .maps import ResponseMap, build_body, map_response
from .protocol import RagCallError, RagConfigError, RagReply
from .stream import StreamError, StreamFormat, StreamReader, framing_of, parse_stream_format, with_answer

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- helpers


def _public_url(url: httpx.URL, *, with_query: bool) -> str:
    """The URL without userinfo; with the query, secret-looking parameter values masked (redact.public_url)."""
    return public_url(str(url.copy_with(fragment=None) if with_query else url.copy_with(query=None, fragment=None)))


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "") if text else "(empty body)"


# --------------------------------------------------------------------------- HTTP client

_RETRY_STATUS = frozenset({429}) | frozenset(range(500, 600))
#: answers that say the endpoint has too much in flight (flow.Aimd backs off)
OVERLOADED = frozenset({429, 503})
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?"
_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")  # a DNS name or an IPv4 address


def _user_agent() -> str:
    try:
        from importlib.metadata import version

        return f"pytest-rageval/{version('pytest-rageval')}"
    except Exception:
        return "pytest-rageval"


class HttpClient:
    """The ask API over HTTP (httpx.AsyncClient, created lazily in the running loop)."""

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        request_map: dict[str, str] | None = None,
        response_map: ResponseMap | None = None,
        docs_root: Path | None = None,
        max_response_bytes: int = defaults.MAX_RESPONSE_BYTES,
        stream_format: StreamFormat | str | None = None,
    ) -> None:
        shown = scrub_urls(url)  # no credentials in messages
        self.docs_root = docs_root
        try:
            parsed = httpx.URL(url)
        except Exception:
            raise RagConfigError(f"rageval_target: {shown!r} is not a valid URL") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise RagConfigError(f"rageval_target: {shown!r} is not an http(s):// URL")
        host = parsed.raw_host.decode("ascii", "replace")  # an IDN as xn--
        if ":" not in host and not _HOST.fullmatch(host):  # IPv6 literals were checked by httpx
            raise RagConfigError(f"rageval_target: {shown!r} is not a valid URL (host {parsed.host!r})")
        if parsed.port is not None and not 0 < parsed.port < 65536:
            raise RagConfigError(f"rageval_target: {shown!r} is not a valid URL (port {parsed.port})")
        if not timeout or timeout <= 0:
            raise RagConfigError(f"rageval_timeout must be a positive number of seconds, got {timeout!r}")
        if retries < 0:
            raise RagConfigError(f"retries must be >= 0, got {retries!r}")
        if backoff < 0 or max_backoff < 0:
            raise RagConfigError("backoff and max_backoff must be >= 0")
        if "debug" not in parsed.params:
            parsed = parsed.copy_add_param("debug", "true")
        self._headers = {"Accept": "application/json", "User-Agent": _user_agent()}
        for name, value in (headers or {}).items():
            for existing in list(self._headers):
                if existing.lower() == name.lower():
                    del self._headers[existing]
            self._headers[name] = value
        if parsed.userinfo:  # sent as Basic auth unless an Authorization header is configured (httpx would replace it)
            if not any(n.lower() == "authorization" for n in self._headers):
                token = base64.b64encode(f"{parsed.username}:{parsed.password}".encode()).decode("ascii")
                self._headers["Authorization"] = f"Basic {token}"
            parsed = parsed.copy_with(userinfo=b"")
        self._url = parsed
        self._redactor = Redactor([*header_secrets(headers or {}), *url_secrets(url), *environment_secrets(os.environ)])
        guard_http_logs()  # httpx logs every request's URL, credentials included
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.request_map = dict(request_map or {})
        self.response_map = response_map or ResponseMap()
        self.max_response_bytes = int(max_response_bytes)
        try:
            self.stream_format = (
                parse_stream_format(stream_format)
                if isinstance(stream_format, str)
                else stream_format or StreamFormat()
            )
        except ValueError as exc:
            raise RagConfigError(str(exc)) from None
        self.url = _public_url(self._url, with_query=False)  # for messages: no query, no userinfo
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: holds each attempt (retries included) to the endpoint's limit and hears how it went (first_call sets it)
        self.limiter: Limiter | None = None

    def __repr__(self) -> str:
        return f"HttpClient({_public_url(self._url, with_query=True)!r}, headers={sorted(self._header_names())!r})"

    def _header_names(self) -> list[str]:
        return [n for n in self._headers if n not in ("Accept", "User-Agent")]

    def describe(self) -> dict[str, Any]:
        """Configuration for config.json; header names only, never values."""
        return {
            "kind": "http",
            "url": _public_url(self._url, with_query=True),
            "method": "POST",
            "headers": self._header_names(),
            "timeout": self.timeout,
            "retries": self.retries,
            "backoff": self.backoff,
            "max_backoff": self.max_backoff,
            "request_map": dict(self.request_map),
            "response_map": self.response_map.as_dict(),
            "stream_format": str(self.stream_format),
        }

    def _redact(self, text: str) -> str:
        """``text`` with every secret this client knows masked (before any cut)."""
        return self._redactor.mask(text)

    def _error(
        self, kind: CallErrorKind, message: str, *, status: int | None = None, attempts: int = 1
    ) -> RagCallError:
        return RagCallError(kind, self._redact(message), status=status, attempts=attempts)

    def _get_client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            # A client is bound to the loop its connections were opened in.
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout, pool=None),
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=64, keepalive_expiry=30.0),
                follow_redirects=False,
                event_hooks=bounded_http.event_hooks(self.max_response_bytes),
            )
            self._loop = loop
        return self._client

    async def _exchange(self, client: httpx.AsyncClient, body: dict[str, Any], reading: _Reading) -> httpx.Response:
        """POST ``body``; a 2xx answer that is a stream (server-sent events, JSON lines) is read into ``reading`` as
        it comes, any other body whole (both capped at ``max_response_bytes``)."""
        request = client.build_request("POST", self._url, json=body, headers=self._headers)
        response = await client.send(request, stream=True)
        try:
            framing = framing_of(response.headers.get("Content-Type"))
            if framing is None or not 200 <= response.status_code < 300:
                await response.aread()
                return response
            reading.reader = reader = StreamReader(self.stream_format, framing, mask=self._redact)
            async for piece in response.aiter_bytes():
                reading.bytes += len(piece)
                if reader.feed(piece):
                    reading.first_delta_at = time.perf_counter()
                if reader.done:
                    break
            return response
        finally:
            await response.aclose()

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        """POST the question; retry transient failures; map the JSON answer."""
        client = self._get_client()
        body = build_body(question, k, params or {}, self.request_map)
        total = self.retries + 1
        failure: RagCallError | None = None
        for attempt in range(total):
            response: httpx.Response | None = None
            async with self.limiter.slot() if self.limiter is not None else _unlimited() as ticket:
                start = time.perf_counter()
                reading = _Reading()
                try:
                    response = await asyncio.wait_for(self._exchange(client, body, reading), self.timeout)
                except (httpx.TimeoutException, asyncio.TimeoutError):
                    if ticket is not None:
                        ticket.timed_out()
                    if reading.reader is not None:  # not retried: the answer had begun, and would take as long again
                        raise self._error("timeout", self._unended(reading), attempts=attempt + 1) from None
                    failure = self._error(
                        "timeout",
                        f"no response from {self.url} within {self.timeout:g} s (tried {attempt + 1} times)",
                        attempts=attempt + 1,
                    )
                except (bounded_http.BodyRefused, httpx.DecodingError) as exc:  # not retried: it would come again
                    what = "answer stream" if reading.reader is not None else "response"
                    raise self._error(
                        "invalid_response", f"{what} from {self.url} refused: {exc}", attempts=attempt + 1
                    ) from None
                except StreamError as exc:  # not retried: the same answer would come again
                    raise self._error(
                        "invalid_response", f"answer stream from {self.url}: {exc}", attempts=attempt + 1
                    ) from None
                except httpx.TransportError as exc:
                    detail = _one_line(self._redact(str(exc)), 200) if str(exc) else ""
                    failure = self._error(
                        "connection",
                        f"connection to {self.url} failed (retried {attempt} times): {type(exc).__name__}"
                        + (f": {detail}" if detail else ""),
                        attempts=attempt + 1,
                    )
                else:
                    latency_ms = (time.perf_counter() - start) * 1000.0
                    status = response.status_code
                    if ticket is not None:
                        ticket.refused() if status in OVERLOADED else ticket.done(latency_ms / 1000.0)
                    if status in _RETRY_STATUS:
                        failure = self._error(
                            "http",
                            f"HTTP {status} from {self.url} (retried {attempt} times): {self._body(response, 200)}",
                            status=status,
                            attempts=attempt + 1,
                        )
                    elif not 200 <= status < 300:
                        raise self._error("http", self._status_message(response), status=status, attempts=attempt + 1)
                    elif reading.reader is not None:
                        return self._streamed(reading, start, latency_ms, attempt + 1)
                    else:
                        return self._reply(response, latency_ms, attempt + 1)
            if attempt + 1 < total:
                headers = response.headers if response is not None else None
                delay = backoff_delay(attempt, base=self.backoff, cap=self.max_backoff, headers=headers)
                log.debug("rageval: %s; retrying in %.2f s", failure, delay)
                await asyncio.sleep(delay)
        assert failure is not None
        raise failure

    def _status_message(self, response: httpx.Response) -> str:
        status = response.status_code
        message = f"HTTP {status} from {self.url}: {self._body(response, 200)}"
        location = response.headers.get("Location")
        if 300 <= status < 400 and location:
            target = _public_url(self._url.join(location), with_query=False)
            message = f"HTTP {status} from {self.url}: redirected to {target} (use that URL as the target)"
        return message

    def _body(self, response: httpx.Response, limit: int) -> str:
        """The response body on one line, masked, then cut to ``limit`` characters."""
        return _one_line(self._redact(response.text), limit)

    def _reply(self, response: httpx.Response, latency_ms: float, attempts: int) -> RagReply:
        try:
            data, notes = safejson.loads(response.content, nonfinite="repair")
        except safejson.JsonLimitError as exc:
            raise self._error(
                "invalid_response", f"response refused: {exc}", status=response.status_code, attempts=attempts
            ) from None
        except ValueError:
            raise self._error(
                "invalid_response",
                f"response is not JSON: {self._body(response, 120)}",
                status=response.status_code,
                attempts=attempts,
            ) from None
        try:
            mapped = map_response(self._redactor.mask_data(data), self.response_map, self.docs_root)
        except RagCallError as exc:
            raise self._error(exc.kind, exc.message, status=response.status_code, attempts=attempts) from None
        return RagReply(
            response=mapped, latency_ms=latency_ms, attempts=attempts, notes=tuple(self._redact(n) for n in notes)
        )

    def _unended(self, reading: _Reading) -> str:
        reader = reading.reader
        assert reader is not None
        return (
            f"the answer stream from {self.url} did not end within {self.timeout:g} s (rageval_timeout; "
            f"{reader.events} events, {reading.bytes:,} bytes read); a stream must end, or send data: [DONE]"
        )

    def _streamed(self, reading: _Reading, start: float, latency_ms: float, attempts: int) -> RagReply:
        """The reply of a stream read to its end: the deltas as the answer, the response object for the rest."""
        reader = reading.reader
        assert reader is not None
        try:
            text, data = reader.result()
        except StreamError as exc:
            raise self._error("invalid_response", f"answer stream from {self.url}: {exc}", attempts=attempts) from None
        if text is None and data is None:
            raise self._error(
                "invalid_response",
                f"answer stream from {self.url} ended after {reader.events} events without a text delta or a "
                f"response event (rageval_stream_format {reader.format})",
                attempts=attempts,
            )
        if text is not None:
            data = with_answer(data or {}, self.response_map.answer, text)
        try:
            mapped = map_response(self._redactor.mask_data(data), self.response_map, self.docs_root)
        except RagCallError as exc:
            raise self._error(exc.kind, f"answer stream's {exc.message}", attempts=attempts) from None
        ttft = None if reading.first_delta_at is None else (reading.first_delta_at - start) * 1000.0
        return RagReply(
            response=mapped,
            latency_ms=latency_ms,
            attempts=attempts,
            notes=tuple(self._redact(n) for n in reader.notes),
            ttft_ms=ttft,
        )

    async def aclose(self) -> None:
        """Close the connection pool (idempotent; a later aask opens a new one)."""
        client, self._client, self._loop = self._client, None, None
        if client is not None and not client.is_closed:
            await client.aclose()


class _Reading:
    """How far one attempt's answer stream got (its reader is None while the answer is no stream)."""

    def __init__(self) -> None:
        self.reader: StreamReader | None = None
        self.bytes = 0
        self.first_delta_at: float | None = None


@asynccontextmanager
async def _unlimited() -> AsyncIterator[SlotTicket | None]:
    """No limiter: an attempt goes out at once and reports to no one."""
    yield None
