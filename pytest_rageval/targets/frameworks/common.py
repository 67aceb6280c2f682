"""What every framework adapter shares: how a retrieved node becomes a chunk of the default response shape,
and what an adapter is.

A framework's output is read as an HTTP body is, within bounds: at most :data:`MAX_NODES` nodes of an answer,
a streamed answer up to ``rageval_max_answer_chars``, and of each node's metadata at most
:data:`MAX_METADATA_VALUES` values of at most :data:`MAX_METADATA_CHARS` characters, copied
:data:`_DEPTH` levels deep (deeper values become a short text). What is left unread is noted on the case
(:func:`note`). A field that cannot be read as a number or is nested deeper than :data:`MAX_NESTING` levels is
that case's error naming the field (:class:`FieldError`).
"""

from __future__ import annotations

import contextlib
import reprlib
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pytest_rageval import defaults
from pytest_rageval.errors import RagevalError
from pytest_rageval.evaluation.docpaths import PATH_KEYS, heading_path

from ..protocol import RagCallError

__all__ = [
    "MAX_METADATA_CHARS",
    "MAX_METADATA_VALUES",
    "MAX_NESTING",
    "MAX_NODES",
    "Adapter",
    "FieldError",
    "FrameworkError",
    "check_nesting",
    "chunk",
    "first_nodes",
    "join_stream",
    "json_safe",
    "note",
    "noted",
    "shape_error",
]

#: How deep metadata is copied into a chunk (deeper values become their text).
_DEPTH = 4
#: Most retrieved nodes (or documents) read of one answer; the rest are not read.
MAX_NODES = 1_000
#: Most metadata values copied of one node (every level together); the rest are left out.
MAX_METADATA_VALUES = 200
#: Longest metadata key, value or deeper value's text kept.
MAX_METADATA_CHARS = 2_000
#: Deepest metadata read, as a JSON body's nesting: deeper is the case's error.
MAX_NESTING = 64
#: Nodes of metadata looked at for its nesting.
_NESTING_VISITS = 10_000
#: An integer of more digits is no number a chunk can hold (a score, a metadata value).
_LONGEST_INTEGER = 100

_NOTES: ContextVar[list[str] | None] = ContextVar("rageval_framework_notes", default=None)

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlist, _SHORT.maxtuple = 3, 20, 20, 20
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 200, 200, _LONGEST_INTEGER


class FieldError(RagevalError, ValueError):
    """A field of a framework's output that cannot be read; the message names it (that case's error)."""


@contextlib.contextmanager
def noted() -> Iterator[list[str]]:
    """Collect the notes of what was left unread while one answer is read (in this context)."""
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def note(text: str) -> None:
    """Say on the case that part of the framework's output was left unread."""
    notes = _NOTES.get()
    if notes is not None and text not in notes:
        notes.append(text)


def first_nodes(nodes: list[Any] | tuple[Any, ...], what: str) -> list[Any] | tuple[Any, ...]:
    """The first :data:`MAX_NODES` of ``nodes`` (noted when there are more)."""
    if len(nodes) <= MAX_NODES:
        return nodes
    note(f"{what}: the first {MAX_NODES:,} of {len(nodes):,} were read")
    return nodes[:MAX_NODES]


def join_stream(parts: Iterable[Any], limit: int = defaults.MAX_ANSWER_CHARS) -> str:
    """A streamed answer's parts joined, read up to ``limit`` characters (an endless stream is left there)."""
    out: list[str] = []
    size = 0
    for part in parts:
        text = str(part)
        out.append(text)
        size += len(text)
        if size >= limit:
            note(f"answer: the response stream was read up to {limit:,} characters (rageval_max_answer_chars)")
            close = getattr(parts, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
            return "".join(out)[:limit]
    return "".join(out)


class FrameworkError(RagCallError):
    """A framework object answered in a shape the adapter cannot read: that case's error."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_response", message)


def shape_error(framework: str, kind: str, what: str) -> FrameworkError:
    """``LlamaIndex query engine returned ...: <what>``, the error of one case."""
    return FrameworkError(f"{framework} {kind}: {what}")


@dataclass
class Adapter:
    """A recognised framework object: how it is called and how its answer is read.

    ``call(question, top_k, params)`` is the sync entry point, run in the worker pool;
    ``acall`` the async one, used instead (``is_async``) by objects that have no sync form.
    """

    framework: str  # "LlamaIndex", "LangChain", "LangGraph", "Haystack"
    kind: str  # "query engine", "retriever", ...
    obj: Any
    is_async = False  # a class attribute, not a field: set by the adapters of async-only objects
    max_answer_chars = defaults.MAX_ANSWER_CHARS  # how far a streamed answer is read (FrameworkClient sets it)

    @property
    def label(self) -> str:
        return f"{self.framework} {self.kind}"

    def call(self, question: str, top_k: int | None, params: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def acall(self, question: str, top_k: int | None, params: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


def json_safe(value: Any, depth: int = _DEPTH, *, field: str = "metadata", budget: list[int] | None = None) -> Any:
    """``value`` with only JSON types in it (what a response map can read), bounded: other values and those deeper
    than ``depth`` become their text, texts are cut, at most :data:`MAX_METADATA_VALUES` values are copied."""
    budget = [MAX_METADATA_VALUES] if budget is None else budget
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        return _integer(value, field)
    if isinstance(value, str):
        return _cut(value, field)
    if depth > 0 and isinstance(value, (Mapping, list, tuple)):
        pairs = value.items() if isinstance(value, Mapping) else enumerate(value)
        out: list[tuple[Any, Any]] = []
        for key, item in pairs:
            if budget[0] <= 0:
                note(f"metadata: {MAX_METADATA_VALUES} values were kept of a retrieved node's metadata")
                break
            budget[0] -= 1
            name = _cut(_text(key), field) if isinstance(value, Mapping) else key
            out.append((name, json_safe(item, depth - 1, field=f"{field}.{name}", budget=budget)))
        return dict(out) if isinstance(value, Mapping) else [item for _, item in out]
    return _cut(_text(value), field)


def _integer(value: int, field: str) -> int:
    if abs(value) >= 10**_LONGEST_INTEGER:
        raise FieldError(f"field {_shown(field)!r} is an integer of more than {_LONGEST_INTEGER} digits")
    return value


def _cut(text: str, field: str) -> str:
    if len(text) <= MAX_METADATA_CHARS:
        return text
    note(f"metadata: a text of a retrieved node's metadata was cut to {MAX_METADATA_CHARS:,} characters")
    return text[:MAX_METADATA_CHARS]


def _text(value: Any) -> str:
    """A short text of ``value``: its own for a plain object, a bounded one for a container."""
    try:
        if isinstance(value, (Mapping, list, tuple, set, frozenset)):
            return _SHORT.repr(value)
        return value if isinstance(value, str) else str(value)
    except Exception:
        return f"<{type(value).__name__}>"


def _shown(field: str) -> str:
    return field if len(field) <= 120 else field[:117] + "..."


def check_nesting(value: Any, field: str) -> None:
    """FieldError when ``value`` nests containers deeper than :data:`MAX_NESTING` levels (a few thousand of its
    nodes looked at: what lies beyond is read only as a short text)."""
    stack: list[tuple[Any, int, str]] = [(value, 0, field)]
    visits = 0
    while stack and visits < _NESTING_VISITS:
        item, level, path = stack.pop()
        visits += 1
        if not isinstance(item, (Mapping, list, tuple)):
            continue
        if level >= MAX_NESTING:
            raise FieldError(f"field {_shown(path)!r} nests deeper than {MAX_NESTING} levels")
        pairs = item.items() if isinstance(item, Mapping) else enumerate(item)
        for count, (key, child) in enumerate(pairs):
            if count >= MAX_METADATA_VALUES:
                break
            stack.append((child, level + 1, f"{path}.{_text(key)[:40]}"))


def _score(score: Any, rank: int) -> float | None:
    """The node's score as a float (NaN stays: it is noted later), or None when it has none."""
    if not isinstance(score, (int, float)) or isinstance(score, bool):
        return None
    if isinstance(score, int) and abs(score) >= 10**_LONGEST_INTEGER:
        raise FieldError(f"retrieved node {rank}: field 'score' is an integer of more than {_LONGEST_INTEGER} digits")
    return float(score)


def chunk(
    *, text: Any, score: Any, metadata: Any, rank: int, chunk_id: Any = None, doc_id: Any = None
) -> dict[str, Any]:
    """One retrieved node as a chunk of the default shape; its metadata rides along under ``metadata``
    (``retrieved_chunks.doc_id = metadata.policy_id`` in the response map reads from it). ``rel_path`` is the
    file as the framework wrote it: the client makes it relative to ``docs_root`` after the response map."""
    raw = metadata if isinstance(metadata, Mapping) else {}
    try:
        check_nesting(raw, "metadata")
        meta = json_safe(raw)
    except FieldError as exc:
        raise FieldError(f"retrieved node {rank}: {exc}") from None
    raw_path = next((meta[key] for key in PATH_KEYS if isinstance(meta.get(key), str) and meta[key].strip()), None)
    out: dict[str, Any] = {
        "chunk_id": _cut(_text(chunk_id), "chunk_id") if chunk_id is not None else None,
        "doc_id": _cut(_text(doc_id), "doc_id") if doc_id is not None else None,
        "rel_path": raw_path,
        "heading_path": heading_path(meta, text),
        "score_final": _score(score, rank),
        "text": text if isinstance(text, str) else None,
        "rank": rank,
        "metadata": meta,
    }
    return {key: value for key, value in out.items() if value is not None}
