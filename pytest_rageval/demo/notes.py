"""Loading the bundled corpus (``demo/corpus/**/*.md``) into chunks."""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from .chunker import NoteChunk, chunk_note

if TYPE_CHECKING:
    from importlib.abc import Traversable


def corpus_root() -> Traversable:
    """The bundled corpus folder (works from a source checkout and from a wheel)."""
    return resources.files("pytest_rageval.demo") / "corpus"


def _walk(folder: Traversable, prefix: str) -> list[tuple[str, Traversable]]:
    found: list[tuple[str, Traversable]] = []
    for entry in folder.iterdir():
        rel = f"{prefix}{entry.name}"
        if entry.is_dir():
            found.extend(_walk(entry, rel + "/"))
        elif entry.name.endswith(".md"):
            found.append((rel, entry))
    return found


def load_chunks(root: Traversable | None = None) -> list[NoteChunk]:
    """Chunk every ``.md`` note under ``root`` (default: the bundled corpus), sorted by path."""
    base = root if root is not None else corpus_root()
    chunks: list[NoteChunk] = []
    for rel_path, entry in sorted(_walk(base, ""), key=lambda item: item[0]):
        chunks.extend(chunk_note(entry.read_text(encoding="utf-8"), rel_path))
    return chunks
