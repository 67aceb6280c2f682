"""RAG clients: the HTTP ask API and Python callables.

Both clients are async only; the runner drives them on its own event loop and
provides the sync face. Nothing here creates an event loop.

HTTP request (the default ask API): ``POST <url>?debug=true`` (``debug=true`` is
added to the URL's own query unless that already sets ``debug``) with the JSON
body ``{"question": ..., "k": K, **params}`` and the configured headers.
Timeouts, connection errors, 429 and 5xx are retried with exponential backoff
with jitter that honours ``Retry-After`` (``retry.backoff_delay``).

Response mapping (ini ``rageval_response_map``): one ``target = source`` line
per field to read from somewhere else than the default; sources are dotted paths
into the JSON (a numeric segment indexes a list). Targets and their defaults::

    answer           = answer                      (required; "" is allowed)
    references       = references
    retrieved_chunks = debug.retrieved_chunks      (falls back to retrieved_chunks)
    abstained        = abstained
    abstain_reason   = abstain_reason
    selected_folders = debug.folder_selection.selected_folders
                                                   (falls back to selected_folders)
    timings          = timings                     (non-numeric entries are dropped)

An empty source (``timings =``) stops a field from being read. Lines
``references.<key> = <item key>`` and ``retrieved_chunks.<key> = <item key>``
rename keys inside each item of the two chunk lists: the chunk's ``<key>`` gets
the value of the item's ``<item key>`` (a dotted path as well); all other keys
pass through. A response in another shape such as
``{answer, citations: [{proposal_id, stage, url, snippet}]}`` is read with::

    references = citations
    references.doc_id = proposal_id
    references.text = snippet
    retrieved_chunks = citations
    retrieved_chunks.doc_id = proposal_id
    retrieved_chunks.text = snippet

Request mapping (ini ``rageval_request_map``): ``question = query`` sends the
question under the key ``query``; ``k = topK`` renames ``k``; ``k =`` (empty)
leaves the field out. Any body key (also a case's params) can be renamed; a
dotted name (``question = input.text``) nests the value.

Header values (ini ``rageval_headers``), credentials in the URL and the judge key
(``redact.SECRET_ENV``) never appear in ``describe()``, reprs, error messages or a
response: the decoded JSON of every answer and the text of every error body are
masked (``redact.Redactor``) before anything reads or cuts them.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import importlib
import inspect
import logging
import os
import re
import sys
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
from pydantic import BaseModel, ValidationError

from pytest_rageval import bounded_http, defaults, safejson
from pytest_rageval.errors import ConfigError, RagevalError
from pytest_rageval.evaluation.record import CALL_ERROR_KINDS, CallErrorKind
from pytest_rageval.evaluation.schema import Chunk, RagResponse
from pytest_rageval.flow import Limiter, SlotTicket
from pytest_rageval.redact import Redactor, environment_secrets, guard_http_logs, header_secrets, public_url, scrub_urls, url_secrets
from pytest_rageval.retry import backoff_delay
from pytest_rageval.suggest import did_you_mean

from .daemon_calls import Abandoned, DaemonCalls, NotStarted

__all__ = [
    "CallableClient",
    "HttpClient",
    "RagCallError",
    "RagClient",
    "RagConfigError",
    "RagReply",
    "ResponseMap",
    "check_maps",
    "load_target",
    "map_response",
    "parse_headers",
    "parse_request_map",
    "parse_response_map",
]

log = logging.getLogger(__name__)

ERROR_KINDS = CALL_ERROR_KINDS  # what a failed call is (record.CallErrorKind)
_MISSING: Any = object()


# --------------------------------------------------------------------------- errors


class RagConfigError(ConfigError):
    """Bad configuration; the message names the setting."""


class RagCallError(RagevalError):
    """A call to the system under test failed; ``kind`` classifies it."""

    def __init__(self, kind: CallErrorKind, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown RagCallError kind {kind!r}; expected one of {', '.join(ERROR_KINDS)}")
        super().__init__(kind, message)
        self.kind: CallErrorKind = kind
        self.message = message
        self.status = status
        self.attempts = attempts
        self.unbindable = False  # a callable could not take (question, params) at all: it is not a target (first_call)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"RagCallError(kind={self.kind!r}, message={self.message!r})"

    def __reduce__(self) -> Any:
        return (_rebuild_call_error, (self.kind, self.message, self.status, self.attempts))


def _rebuild_call_error(kind: CallErrorKind, message: str, status: int | None, attempts: int) -> RagCallError:
    return RagCallError(kind, message, status=status, attempts=attempts)


# --------------------------------------------------------------------------- reply and protocol


@dataclass(frozen=True)
class RagReply:
    """A successful call: the normalised response and how it went."""

    response: RagResponse
    latency_ms: float  # wall time of the successful attempt
    attempts: int
    notes: tuple[str, ...] = ()  # what was repaired to read the response (safejson's notes: NaN, invalid Unicode)


@runtime_checkable
class RagClient(Protocol):
    """What the runner needs from a client of the system under test."""

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply: ...

    async def aclose(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...


# --------------------------------------------------------------------------- response mapping

_TOP_TARGETS = (
    "answer",
    "references",
    "retrieved_chunks",
    "abstained",
    "abstain_reason",
    "selected_folders",
    "timings",
)
_LIST_TARGETS = ("references", "retrieved_chunks")
_CHUNK_KEYS = tuple(Chunk.model_fields)
# Used when the default source is absent, so that a dict in the package's own
# field names (e.g. RagResponse.model_dump()) reads without configuration.
_FALLBACKS = {"retrieved_chunks": "retrieved_chunks", "selected_folders": "selected_folders"}

KeyRenames = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ResponseMap:
    """Where each part of the response is read from (dotted paths; "" = not read)."""

    answer: str = "answer"
    references: str = "references"
    retrieved_chunks: str = "debug.retrieved_chunks"
    abstained: str = "abstained"
    abstain_reason: str = "abstain_reason"
    selected_folders: str = "debug.folder_selection.selected_folders"
    timings: str = "timings"
    references_keys: KeyRenames = ()  # (chunk key, item key) pairs
    retrieved_chunks_keys: KeyRenames = ()

    def as_dict(self) -> dict[str, str]:
        """The mapping as ``{target: source}``, item renames as ``"references.doc_id"``."""
        out = {name: getattr(self, name) for name in _TOP_TARGETS}
        for name in _LIST_TARGETS:
            for key, source in getattr(self, f"{name}_keys"):
                out[f"{name}.{key}"] = source
        return out

    def is_default(self, target: str) -> bool:
        return bool(getattr(self, target) == getattr(_DEFAULT_MAP, target))


_DEFAULT_MAP = ResponseMap()


def _all_response_targets() -> list[str]:
    return [*_TOP_TARGETS, *(f"{name}.{key}" for name in _LIST_TARGETS for key in _CHUNK_KEYS)]


def _valid_response_targets() -> str:
    return ", ".join(_TOP_TARGETS) + ", references.<chunk key>, retrieved_chunks.<chunk key>"


def _ini_lines(text: str, setting: str) -> list[tuple[int, str, str]]:
    """``(line number, left, right)`` of the ``left = right`` lines; blanks and ``#`` comments skipped."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise RagConfigError(f"{setting} line {number}: expected 'target = source', got {line!r}")
        left, _, right = line.partition("=")
        left, right = left.strip(), right.strip()
        if not left:
            raise RagConfigError(f"{setting} line {number}: missing the name before '='")
        out.append((number, left, right))
    return out


def parse_response_map(text: str) -> ResponseMap:
    """Parse ini lines ``target = source`` into a ResponseMap (unset targets keep defaults)."""
    setting = "rageval_response_map"
    fields: dict[str, str] = {}
    renames: dict[str, dict[str, str]] = {name: {} for name in _LIST_TARGETS}
    seen: set[str] = set()
    for number, target, source in _ini_lines(text, setting):
        if target in seen:
            raise RagConfigError(f"{setting} line {number}: {target!r} is set twice")
        seen.add(target)
        if target in _TOP_TARGETS:
            if target == "answer" and not source:
                raise RagConfigError(f"{setting} line {number}: 'answer' needs a source path")
            _check_path(source, setting, number)
            fields[target] = source
            continue
        head, dot, key = target.partition(".")
        if dot and head in _LIST_TARGETS:
            if key not in _CHUNK_KEYS:
                raise RagConfigError(
                    f"{setting} line {number}: {key!r} is not a chunk key{did_you_mean(key, _CHUNK_KEYS)}; valid chunk keys: {', '.join(_CHUNK_KEYS)}"
                )
            if not source:
                raise RagConfigError(f"{setting} line {number}: {target!r} needs a source key")
            _check_path(source, setting, number)
            renames[head][key] = source
            continue
        raise RagConfigError(
            f"{setting} line {number}: unknown target {target!r}{did_you_mean(target, _all_response_targets())}; "
            f"valid targets: {_valid_response_targets()}"
        )
    return ResponseMap(
        **fields,
        references_keys=tuple(renames["references"].items()),
        retrieved_chunks_keys=tuple(renames["retrieved_chunks"].items()),
    )


def _check_path(path: str, setting: str, number: int) -> None:
    if path and any(not part for part in path.split(".")):
        raise RagConfigError(f"{setting} line {number}: {path!r} is not a dotted path")


def parse_request_map(text: str) -> dict[str, str]:
    """Parse ini lines ``field = sent_as`` (``k =`` drops ``k`` from the body)."""
    setting = "rageval_request_map"
    out: dict[str, str] = {}
    for number, name, sent_as in _ini_lines(text, setting):
        if name in out:
            raise RagConfigError(f"{setting} line {number}: {name!r} is set twice")
        if name == "question" and not sent_as:
            raise RagConfigError(f"{setting} line {number}: the question cannot be left out of the request")
        if sent_as:
            _check_path(sent_as, setting, number)
            if sent_as in out.values():
                raise RagConfigError(f"{setting} line {number}: two fields are sent as {sent_as!r}")
        out[name] = sent_as
    return out


def _get_path(data: Any, path: str) -> Any:
    """The value at a dotted path, or ``_MISSING``."""
    current = data
    for part in path.split("."):
        if isinstance(current, dict):
            if part not in current:
                return _MISSING
            current = current[part]
        elif isinstance(current, list) and re.fullmatch(r"-?\d+", part):
            index = int(part)
            if not -len(current) <= index < len(current):
                return _MISSING
            current = current[index]
        else:
            return _MISSING
    return current


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(type(value), type(value).__name__)


def _invalid(message: str) -> RagCallError:
    return RagCallError("invalid_response", message)


def _read(data: dict[str, Any], response_map: ResponseMap, target: str) -> tuple[Any, str]:
    """The raw value of a target and the path it came from (``_MISSING`` if absent)."""
    source = getattr(response_map, target)
    if not source:
        return _MISSING, source
    value = _get_path(data, source)
    if value is _MISSING and target in _FALLBACKS and response_map.is_default(target):
        fallback = _get_path(data, _FALLBACKS[target])
        if fallback is not _MISSING:
            return fallback, _FALLBACKS[target]
    return value, source


def _map_items(value: Any, target: str, source: str, renames: KeyRenames) -> list[dict[str, Any]]:
    if value is _MISSING or value is None:
        return []
    if not isinstance(value, list):
        raise _invalid(f"response '{target}' is not a list (got {_type_name(value)}; looked for '{source}')")
    items = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise _invalid(f"response '{target}[{index}]' is not an object (got {_type_name(item)}; looked for '{source}')")
        mapped = dict(item)
        for key, item_source in renames:
            found = _get_path(item, item_source)
            if found is not _MISSING:
                mapped[key] = found
        items.append(mapped)
    return items


def _loc_text(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def relative_paths(items: list[Any], docs_root: Path | None) -> list[Any]:
    """The chunk dicts of ``items`` with an absolute ``rel_path`` under ``docs_root`` made relative to it
    (``/srv/app/docs/hr/leave.md`` gives ``hr/leave.md``); other items and paths as they are."""
    from pytest_rageval.evaluation.docpaths import is_absolute, relative_path

    out = []
    for item in items:
        path = item.get("rel_path") if isinstance(item, dict) else None
        if isinstance(path, str) and is_absolute(path):
            item = {**item, "rel_path": relative_path(path, docs_root) or path}
        out.append(item)
    return out


def map_response(data: Any, response_map: ResponseMap, docs_root: Path | None = None) -> RagResponse:
    """Normalise a decoded JSON response into a RagResponse (pure).

    Chunk paths are made relative to ``docs_root`` (:func:`relative_paths`).
    Raises RagCallError("invalid_response") naming what was missing or wrong.
    """
    if not isinstance(data, dict):
        raise _invalid(f"response is not a JSON object (got {_type_name(data)})")
    answer, answer_source = _read(data, response_map, "answer")
    if answer is _MISSING:
        raise _invalid(f"response has no 'answer' (looked for '{answer_source}')")
    if not isinstance(answer, str):
        raise _invalid(f"response 'answer' is {_type_name(answer)}, not a string (looked for '{answer_source}')")

    fields: dict[str, Any] = {"answer": answer}
    sources: dict[str, str] = {"answer": answer_source}
    for target in _LIST_TARGETS:
        value, source = _read(data, response_map, target)
        sources[target] = source
        fields[target] = relative_paths(_map_items(value, target, source, getattr(response_map, f"{target}_keys")), docs_root)
    for target in ("abstained", "abstain_reason", "selected_folders"):
        value, source = _read(data, response_map, target)
        sources[target] = source
        if value is not _MISSING and value is not None:
            fields[target] = value
    timings, sources["timings"] = _read(data, response_map, "timings")
    if timings is not _MISSING and timings is not None:
        if not isinstance(timings, dict):
            raise _invalid(f"response 'timings' is not an object (got {_type_name(timings)}; looked for '{sources['timings']}')")
        fields["timings"] = {str(name): float(ms) for name, ms in timings.items() if isinstance(ms, (int, float)) and not isinstance(ms, bool)}

    try:
        return RagResponse.model_validate(fields)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        loc = tuple(first.get("loc", ()))
        where = _loc_text(loc) or "response"
        source = sources.get(str(loc[0]), "") if loc else ""
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        looked = f"; looked for '{source}'" if source else ""
        raise _invalid(f"response '{where}' is invalid: {first.get('msg', 'invalid value')}{looked}{more}") from None


# --------------------------------------------------------------------------- headers

_VAR = re.compile(r"\$(\$?)\{([^}]*)\}")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def parse_headers(text: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Parse ``Name: value`` lines, interpolating ``${VAR}`` from ``environ`` (``$${`` is a literal ``${``)."""
    setting = "rageval_headers"
    headers: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon:
            # The line may hold a secret: report its number, never its text.
            raise RagConfigError(f"{setting} line {number}: expected 'Name: value'")
        if not _HEADER_NAME.fullmatch(name):
            raise RagConfigError(f"{setting} line {number}: the header name is not a valid HTTP header name")

        def substitute(match: re.Match[str], name: str = name, number: int = number) -> str:
            escaped, var = match.group(1), match.group(2)
            if escaped:
                return "${" + var + "}"
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                raise RagConfigError(f"{setting} line {number} (header {name!r}): '${{{var}}}' is not a variable name")
            if var not in environ:
                raise RagConfigError(f"{setting}: environment variable {var!r} is not set (used in header {name!r}, line {number})")
            return environ[var]

        value = _VAR.sub(substitute, value.strip())
        if "\r" in value or "\n" in value:
            raise RagConfigError(f"{setting}: the value of header {name!r} contains a line break")
        for existing in list(headers):
            if existing.lower() == name.lower():
                del headers[existing]
        headers[name] = value
    return headers


class _EveryVariable(Mapping[str, str]):
    """An environment in which every variable is set (to ""): to check header syntax alone."""

    def __getitem__(self, name: str) -> str:
        return ""

    def __contains__(self, name: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def check_maps(headers_text: str, request_map_text: str, response_map_text: str) -> None:
    """RagConfigError for a header, request-map or response-map line that does not parse.

    Header ``${VAR}`` references are checked for syntax only: without a target
    the headers are not sent, so their variables need not be set.
    """
    parse_headers(headers_text, _EveryVariable())
    parse_request_map(request_map_text)
    parse_response_map(response_map_text)


# --------------------------------------------------------------------------- helpers


def _public_url(url: httpx.URL, *, with_query: bool) -> str:
    """The URL without userinfo; with the query, secret-looking parameter values masked (redact.public_url)."""
    return public_url(str(url.copy_with(fragment=None) if with_query else url.copy_with(query=None, fragment=None)))


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "") if text else "(empty body)"


def _set_path(body: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    current = body
    for part in parts[:-1]:
        nxt = current.get(part)
        if not isinstance(nxt, dict):
            nxt = current[part] = {}
        current = nxt
    current[parts[-1]] = value


def _build_body(question: str, k: int, params: Mapping[str, Any], request_map: Mapping[str, str]) -> dict[str, Any]:
    merged: dict[str, Any] = {"question": question, "k": k, **params}
    body: dict[str, Any] = {}
    renamed: list[tuple[str, Any]] = []
    for key, value in merged.items():
        if key in request_map:
            if request_map[key]:
                renamed.append((request_map[key], value))
        else:
            body[key] = value
    for path, value in renamed:  # explicit renames win over plain keys
        _set_path(body, path, value)
    return body


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
        }

    def _redact(self, text: str) -> str:
        """``text`` with every secret this client knows masked (before any cut)."""
        return self._redactor.mask(text)

    def _error(self, kind: CallErrorKind, message: str, *, status: int | None = None, attempts: int = 1) -> RagCallError:
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

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
        return await client.post(self._url, json=body, headers=self._headers)

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        """POST the question; retry transient failures; map the JSON answer."""
        client = self._get_client()
        body = _build_body(question, k, params or {}, self.request_map)
        total = self.retries + 1
        failure: RagCallError | None = None
        for attempt in range(total):
            response: httpx.Response | None = None
            async with self.limiter.slot() if self.limiter is not None else _unlimited() as ticket:
                start = time.perf_counter()
                try:
                    response = await asyncio.wait_for(self._post(client, body), self.timeout)
                except (httpx.TimeoutException, asyncio.TimeoutError):
                    if ticket is not None:
                        ticket.timed_out()
                    failure = self._error(
                        "timeout",
                        f"no response from {self.url} within {self.timeout:g} s (tried {attempt + 1} times)",
                        attempts=attempt + 1,
                    )
                except (bounded_http.BodyRefused, httpx.DecodingError) as exc:  # not retried: it would come again
                    raise self._error("invalid_response", f"response from {self.url} refused: {exc}", attempts=attempt + 1) from None
                except httpx.TransportError as exc:
                    detail = _one_line(self._redact(str(exc)), 200) if str(exc) else ""
                    failure = self._error(
                        "connection",
                        f"connection to {self.url} failed (retried {attempt} times): {type(exc).__name__}" + (f": {detail}" if detail else ""),
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
            raise self._error("invalid_response", f"response refused: {exc}", status=response.status_code, attempts=attempts) from None
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
        return RagReply(response=mapped, latency_ms=latency_ms, attempts=attempts, notes=tuple(self._redact(n) for n in notes))

    async def aclose(self) -> None:
        """Close the connection pool (idempotent; a later aask opens a new one)."""
        client, self._client, self._loop = self._client, None, None
        if client is not None and not client.is_closed:
            await client.aclose()


# --------------------------------------------------------------------------- callable client


def _is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return not inspect.isroutine(fn) and call is not None and inspect.iscoroutinefunction(call)


def _raised(exc: BaseException, redactor: Redactor) -> str:
    """What a target raised, on one line, secrets masked before the cut: ``KeyError: 'x'``, or
    ``the target raised SystemExit(2)`` for a BaseException."""

    def cut(text: str) -> str:
        text = " ".join(redactor.mask(text).split())
        return text[:500] + ("..." if len(text) > 500 else "")

    if isinstance(exc, Exception):
        text = cut(str(exc))
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return "the target raised " + cut(repr(exc))


def _cancelled_from_outside() -> bool:
    """Whether this task was cancelled (timeout, interrupt), not handed a CancelledError the target raised itself."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return cancelling is None or cancelling() > 0


def _callable_name(fn: Any) -> str:
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", None)
    return f"{module}:{qualname}" if module and qualname else repr(fn)


class CallableClient:
    """A Python callable ``fn(question, params)`` as the system under test (sync or async).

    Whatever the target raises is that case's error, BaseExceptions included
    (``SystemExit`` from an ``argparse`` call, ``KeyboardInterrupt``): the
    other cases still run. A sync target runs on a daemon thread
    (:mod:`.daemon_calls`); past ``timeout`` the call is abandoned, never
    joined, and at most ``abandon_limit`` abandoned calls run at once.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        response_map: ResponseMap | None = None,
        timeout: float | None = None,
        abandon_limit: int = 8,
        docs_root: Path | None = None,
    ) -> None:
        if not callable(fn):
            raise RagConfigError(f"rageval_target: {name or fn!r} is not callable")
        if timeout is not None and timeout <= 0:
            raise RagConfigError(f"rageval_timeout must be a positive number of seconds, got {timeout!r}")
        self.fn = fn
        self.docs_root = docs_root
        self.name = name or _callable_name(fn)
        self.response_map = response_map or ResponseMap()
        self.timeout = timeout
        self._is_async = _is_async_callable(fn)
        self._threads = DaemonCalls(abandon_limit)
        self._redactor = Redactor(environment_secrets(os.environ))  # a callable may echo the judge key

    def __repr__(self) -> str:
        return f"CallableClient({self.name!r})"

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "callable",
            "callable": self.name,
            "async": self._is_async,
            "timeout": self.timeout,
            "response_map": self.response_map.as_dict(),
        }

    async def _call(self, question: str, params: dict[str, Any]) -> Any:
        """The target's result; anything it raises, BaseExceptions included, as a ``target`` RagCallError.

        An async target runs in its own task under ``wait_for``: a SystemExit or
        KeyboardInterrupt escaping a task stops the session's event loop, so none may leave here.
        """
        try:
            if self._is_async:
                result = self.fn(question, params)
            else:
                result = await self._threads.call(self.fn, question, params, timeout=self.timeout)
            if inspect.isawaitable(result):  # a sync function returning a coroutine: awaited within the timeout
                result = await (result if self._is_async or self.timeout is None else asyncio.wait_for(result, self.timeout))
            return result
        except (RagCallError, Abandoned, NotStarted):
            raise
        except asyncio.CancelledError as exc:
            if _cancelled_from_outside():  # the timeout or the session cancelled this call
                raise
            raise RagCallError("target", _raised(exc, self._redactor)) from None
        except Exception as exc:
            error = RagCallError("target", _raised(exc, self._redactor))
            error.unbindable = isinstance(exc, TypeError) and cannot_bind(self.fn, exc, question, params)
            raise error from exc
        except BaseException as exc:
            raise RagCallError("target", _raised(exc, self._redactor)) from None

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        """Call the target with ``(question, {"k": k, **params})`` and normalise its result."""
        call_params = {"k": k, **(params or {})}
        start = time.perf_counter()
        try:
            if self._is_async and self.timeout is not None:
                result = await asyncio.wait_for(self._call(question, call_params), self.timeout)
            else:  # a sync target's thread call keeps its own timeout
                result = await self._call(question, call_params)
        except (asyncio.TimeoutError, Abandoned):
            raise RagCallError("timeout", self._timed_out()) from None
        except NotStarted as exc:
            raise RagCallError(
                "timeout",
                f"{self.name} was not called within {self.timeout:g} s: {exc.running} earlier calls are past their "
                f"timeout and still running (at most {self._threads.limit} are left running)",
            ) from None
        latency_ms = (time.perf_counter() - start) * 1000.0
        response, notes = self._normalise(result)
        return RagReply(response=response, latency_ms=latency_ms, attempts=1, notes=tuple(notes))

    def _timed_out(self) -> str:
        message = f"{self.name} did not return within {self.timeout:g} s"
        if self._is_async:
            return message
        return message + "; the call was abandoned (its thread is left running and does not keep pytest from exiting)"

    def _normalise(self, result: Any) -> tuple[RagResponse, list[str]]:
        """The response of ``result`` and what was repaired in it (NaN, invalid Unicode: safejson.clean)."""
        ready = isinstance(result, RagResponse)
        if isinstance(result, BaseModel):
            result = result.model_dump(exclude_none=ready)
        elif dataclasses.is_dataclass(result) and not isinstance(result, type):
            result = dataclasses.asdict(result)
        if not isinstance(result, dict):
            raise RagCallError("invalid_response", f"{self.name} returned {_type_name(result)}, expected a dict or RagResponse")
        try:
            result, notes = safejson.clean(result)
        except safejson.JsonLimitError as exc:
            raise RagCallError("invalid_response", f"{self.name} returned a value refused: {exc}") from None
        result, notes = self._redactor.mask_data(result), [self._redactor.mask(note) for note in notes]
        if not ready:
            return map_response(result, self.response_map, self.docs_root), notes
        if isinstance(result.get("timings"), dict):  # a NaN timing became null: drop it as map_response does
            result["timings"] = {name: ms for name, ms in result["timings"].items() if ms is not None}
        for name in _LIST_TARGETS:
            if isinstance(result.get(name), list):
                result[name] = relative_paths(result[name], self.docs_root)
        return RagResponse.model_validate(result), notes

    async def aclose(self) -> None:
        """Nothing to release."""


# --------------------------------------------------------------------------- targets


def _import_module(module_name: str, spec: str, folders: Sequence[str], setting: str = "rageval_target") -> Any:
    """The target's module; RagConfigError saying whether it is missing or failed while importing."""
    try:
        return _import_from(module_name, folders)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            raise RagConfigError(f"{setting} {spec!r}: cannot import module {module_name!r} ({exc})") from exc
        raise RagConfigError(f"{setting} {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        message = " ".join(str(exc).split())
        raise RagConfigError(f"{setting} {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {message}") from exc


def _import_from(module_name: str, folders: Sequence[str]) -> Any:
    """Import as is, else with each of ``folders`` first on sys.path (plain ``pytest`` puts neither cwd nor rootdir there)."""
    top = module_name.split(".")[0]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != top:
            raise
        not_found = exc
    for folder in dict.fromkeys(folders):
        if folder in sys.path:
            continue
        sys.path.insert(0, folder)
        try:
            return importlib.import_module(module_name)  # found here: the folder stays on sys.path
        except ModuleNotFoundError as exc:
            sys.path.remove(folder)
            if exc.name != top:
                raise
        except BaseException:
            sys.path.remove(folder)
            raise
    raise not_found


_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


#: How a callable target is called, for the messages of a target that cannot be.
HOW_TARGETS_ARE_CALLED = (
    "a target is called fn(question, params), where params is a dict holding k and the case's and the "
    'matrix\'s params, and returns a dict such as {"answer": ..., "debug": {"retrieved_chunks": [...]}}'
)


def signature_problem(fn: Callable[..., Any]) -> str | None:
    """Why ``fn`` cannot be called ``fn(question, params)``, read from its signature (None when it can, or when it
    has none to read): it takes other arguments, or its second parameter has a default that is no dict
    (``def answer(question, top_k=4)`` would get the params dict as ``top_k``)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        bound = signature.bind("question", {})
    except TypeError as exc:
        return f"its signature {signature} cannot take (question, params): {exc}"
    second = [name for name, value in bound.arguments.items() if isinstance(value, dict) and not value]
    parameter = signature.parameters.get(second[0]) if second else None
    if parameter is None or parameter.kind is inspect.Parameter.VAR_POSITIONAL:
        return None
    default = parameter.default
    if default is not inspect.Parameter.empty and default is not None and not isinstance(default, Mapping):
        return f"its second parameter {parameter.name}={default!r} would receive the params dict"
    return None


def cannot_bind(fn: Callable[..., Any], error: TypeError, *args: Any) -> bool:
    """Whether ``error``, raised by calling ``fn(*args)``, says the call could not bind ``args`` (not a TypeError
    from inside ``fn``): its signature, when it has one to read, cannot take them; else the error came from the
    call itself, before any line of ``fn`` ran (it was raised in this package's frame that made the call)."""
    try:
        signature = inspect.signature(fn)
    except Exception:  # none to read: a C callable, an odd __signature__
        signature = None
    if signature is not None:
        try:
            signature.bind(*args)
        except TypeError:
            return True
        return False
    frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)]
    return bool(frames) and Path(frames[-1].f_code.co_filename).resolve().is_relative_to(_PACKAGE)


#: this package's folder: a traceback with frames only in it never entered a target
_PACKAGE = Path(__file__).resolve().parents[1]


def check_target(spec: str) -> str:
    """``spec`` stripped if it is an http(s):// URL or 'package.module:callable'; RagConfigError otherwise."""
    spec = (spec or "").strip()
    if spec.lower().startswith(("http://", "https://")):
        return spec
    module_name, colon, attr_path = spec.partition(":")
    if "://" in spec or not colon or not _DOTTED.match(module_name) or not _DOTTED.match(attr_path):
        raise RagConfigError(f"rageval_target {scrub_urls(spec)!r}: expected an http(s):// URL or 'package.module:callable'")
    return spec


def load_target(spec: str, *, folders: Sequence[str] = (), concurrency: int = 8, **http_options: Any) -> RagClient:
    """A client for ``http(s)://...`` or ``package.module:callable`` (``targets.resolve.load_target`` also takes the
    objects of RAG frameworks).

    ``folders`` are tried on sys.path when the module is not importable as is
    (the working directory and rootdir). ``http_options`` are HttpClient's
    keyword arguments; a callable target uses only ``response_map``, ``timeout`` and ``docs_root``
    of them, and leaves at most ``concurrency`` calls past their timeout running.
    """
    spec = check_target(spec)
    if spec.lower().startswith(("http://", "https://")):
        return HttpClient(spec, **http_options)
    return callable_client(spec, resolve(spec, folders), concurrency=concurrency, **http_options)


@asynccontextmanager
async def _unlimited() -> AsyncIterator[SlotTicket | None]:
    """No limiter: an attempt goes out at once and reports to no one."""
    yield None


def callable_client(spec: str, target: Any, *, concurrency: int = 8, **http_options: Any) -> CallableClient:
    """The client of the object ``spec`` named; RagConfigError when it cannot be called as targets are."""
    if not callable(target):
        raise RagConfigError(
            f"rageval_target {spec!r}: {spec.partition(':')[2]!r} is a {type(target).__name__} object, "
            f"not callable nor an object of LlamaIndex, LangChain, LangGraph or Haystack; {HOW_TARGETS_ARE_CALLED}"
        )
    problem = signature_problem(target)
    if problem is not None:
        raise RagConfigError(f"rageval_target {spec!r}: {problem}; {HOW_TARGETS_ARE_CALLED}")
    return CallableClient(target, name=spec, abandon_limit=concurrency, **python_options(http_options))


def python_options(http_options: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a Python target among HttpClient's keyword arguments."""
    return {key: http_options.get(key) for key in ("response_map", "timeout", "docs_root")}


def resolve(spec: str, folders: Sequence[str], setting: str = "rageval_target") -> Any:
    """The object ``package.module:attr.path`` names; RagConfigError naming what is missing."""
    module_name, colon, attr_path = spec.partition(":")
    if not colon or not _DOTTED.match(module_name) or not _DOTTED.match(attr_path):
        raise RagConfigError(f"{setting} {spec!r}: expected 'package.module:name'")
    module = _import_module(module_name, spec, folders, setting)
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            names = [n for n in dir(target) if not n.startswith("_")]
            raise RagConfigError(f"{setting} {spec!r}: module {module_name!r} has no attribute {attr_path!r}{did_you_mean(part, names)}")
        target = getattr(target, part)
    return target
