"""A chunk as a run stores it: the one shape of each entry of a record's ``retrieved_chunks`` and ``references``.

The runner builds it (:func:`stored_chunk`), results.jsonl keeps it, every reader of a run folder checks it against
:class:`StoredChunk` (runs/readback.py derives its check from the type hints) and turns it back into a response's
:class:`Chunk` (:func:`chunk_of`) or into text (:func:`heading_text`).

``heading_path`` is kept as the system under test gave it: a string (``"# Setup > ## Embeddings"``) or a list
of segments (``["Setup", "Embeddings"]``, as the framework adapters write it). Both forms are read everywhere and
mean the same once normalised (anchors.normalize_heading_path).

Pure: no I/O, no pytest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from .anchors import normalize_heading_path
from .schema import Chunk, HeadingPath

__all__ = ["ADDED_FIELDS", "StoredChunk", "chunk_of", "heading_text", "stored_chunk"]


class StoredChunk(TypedDict, total=False):
    """A stored chunk: the response's chunk fields the readers use (any other field the RAG sent is kept as sent),
    plus ``position`` and ``gold``, which the run adds."""

    chunk_id: str
    doc_id: str
    rel_path: str
    heading_path: HeadingPath
    score_vector: float
    score_lexical: float
    score_final: float
    text: str
    rank: int
    position: int  # 1-based place in the stored list
    gold: bool  # whether the chunk matched a gold item of the case
    text_truncated: bool  # the text was cut to the stored length (the whole text: --rageval-store-full-text)


#: The fields the run adds to each stored chunk (not the RAG's).
ADDED_FIELDS = ("position", "gold", "text_truncated")


def stored_chunk(chunk: Chunk, *, position: int, gold: bool, max_text: int | None) -> StoredChunk:
    """``chunk`` as results.jsonl keeps it: its fields as sent (none of them null), the text cut to ``max_text``
    characters (None: kept whole), and where it stood and whether it matched gold."""
    data: dict[str, Any] = chunk.model_dump(exclude_none=True)
    text = data.get("text")
    if isinstance(text, str) and max_text is not None and len(text) > max_text:
        data["text"] = text[:max_text]
        data["text_truncated"] = True  # report.html says so
    data["position"] = position
    data["gold"] = gold
    return data  # type: ignore[return-value]


def chunk_of(stored: Mapping[str, Any]) -> Chunk:
    """The response's chunk a stored one was made from (without the fields the run added)."""
    return Chunk.model_validate({key: value for key, value in stored.items() if key not in ADDED_FIELDS})


def heading_text(value: Any) -> str:
    """A heading path (either form) as people read it: its segments as matching sees them, joined by ``' > '``
    (``"# Setup > ## Keys { #keys }"`` and ``["Setup", "Keys"]`` both read ``Setup > Keys``); ``""`` for none."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " > ".join(normalize_heading_path([str(part) for part in value]))
    return " > ".join(normalize_heading_path(str(value)))
