"""What every framework adapter shares: how a retrieved node becomes a chunk of the default response shape,
and what an adapter is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_rageval.evaluation.docpaths import PATH_KEYS, heading_path

from ..protocol import RagCallError

__all__ = ["Adapter", "FrameworkError", "chunk", "json_safe", "shape_error"]

#: How deep metadata is copied into a chunk (deeper values become their text).
_DEPTH = 4


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

    @property
    def label(self) -> str:
        return f"{self.framework} {self.kind}"

    def call(self, question: str, top_k: int | None, params: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def acall(self, question: str, top_k: int | None, params: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


def json_safe(value: Any, depth: int = _DEPTH) -> Any:
    """``value`` with only JSON types in it (what a response map can read): other values become their text."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if depth > 0 and isinstance(value, Mapping):
        return {str(key): json_safe(item, depth - 1) for key, item in value.items()}
    if depth > 0 and isinstance(value, (list, tuple)):
        return [json_safe(item, depth - 1) for item in value]
    return str(value)


def chunk(
    *, text: Any, score: Any, metadata: Any, rank: int, chunk_id: Any = None, doc_id: Any = None
) -> dict[str, Any]:
    """One retrieved node as a chunk of the default shape; its metadata rides along under ``metadata``
    (``retrieved_chunks.doc_id = metadata.policy_id`` in the response map reads from it). ``rel_path`` is the
    file as the framework wrote it: the client makes it relative to ``docs_root`` after the response map."""
    meta = metadata if isinstance(metadata, Mapping) else {}
    raw_path = next((meta[key] for key in PATH_KEYS if isinstance(meta.get(key), str) and meta[key].strip()), None)
    out: dict[str, Any] = {
        "chunk_id": str(chunk_id) if chunk_id is not None else None,
        "doc_id": str(doc_id) if doc_id is not None else None,
        "rel_path": raw_path,
        "heading_path": heading_path(meta, text),
        "score_final": float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
        "text": text if isinstance(text, str) else None,
        "rank": rank,
        "metadata": json_safe(dict(meta)),
    }
    return {key: value for key, value in out.items() if value is not None}
