"""Heading-aware chunking of one markdown note.

A note may start with a front-matter block between ``---`` lines holding
``key: value`` pairs (``id``, ``date``, ``author``, ...). The body is split into
one chunk per section (the text under one heading, up to the next heading of
any level); a section longer than ``max_chars`` is split between paragraphs.
Headings inside fenced code blocks are not headings.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

MAX_CHARS = 900
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)(?:\s+#+)?\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class NoteChunk:
    """One section (or part of a long section) of a note."""

    chunk_id: str
    doc_id: str
    rel_path: str
    heading_path: str
    text: str
    meta: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def folder(self) -> str:
        """The top-level folder of the note ("" for a note at the corpus root)."""
        return self.rel_path.split("/", 1)[0] if "/" in self.rel_path else ""


def make_chunk_id(rel_path: str, heading_path: str, text: str) -> str:
    """Stable 32-hex-character id: a hash of path, heading path and text."""
    digest = hashlib.sha256(f"{rel_path}\n{heading_path}\n{text}".encode())
    return digest.hexdigest()[:32]


def split_front_matter(source: str) -> tuple[dict[str, str], str]:
    """Return the ``key: value`` front matter (if any) and the remaining body."""
    lines = source.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, source
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            meta: dict[str, str] = {}
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep and key.strip():
                    meta[key.strip().lower()] = value.strip()
            return meta, "\n".join(lines[end + 1 :])
    return {}, source


def _split_long(text: str, max_chars: int) -> list[str]:
    """Group paragraphs into pieces of at most ``max_chars`` (a longer paragraph stays whole)."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    pieces: list[str] = []
    current = ""
    for paragraph in paragraphs:
        candidate = f"{current}\n\n{paragraph}" if current else paragraph
        if current and len(candidate) > max_chars:
            pieces.append(current)
            current = paragraph
        else:
            current = candidate
    if current:
        pieces.append(current)
    return pieces


def _sections(body: str) -> list[tuple[list[str], str]]:
    """Split a markdown body into (heading stack, section text) pairs."""
    stack: list[tuple[int, str]] = []
    sections: list[tuple[list[str], str]] = []
    buffer: list[str] = []
    in_fence = False

    def flush() -> None:
        text = "\n".join(buffer).strip()
        if text:
            sections.append(([f"{'#' * level} {title}" for level, title in stack], text))
        buffer.clear()

    for line in body.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            flush()
            level = len(match.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, match.group(2).strip()))
        else:
            buffer.append(line)
    flush()
    return sections


def chunk_note(source: str, rel_path: str, max_chars: int = MAX_CHARS) -> list[NoteChunk]:
    """Chunk one note. ``doc_id`` is the front matter ``id``, else ``rel_path`` without ``.md``."""
    meta, body = split_front_matter(source)
    doc_id = meta.get("id") or re.sub(r"\.md$", "", rel_path)
    chunks: list[NoteChunk] = []
    for headings, text in _sections(body):
        heading_path = " > ".join(headings)
        for piece in _split_long(text, max_chars):
            chunks.append(
                NoteChunk(
                    chunk_id=make_chunk_id(rel_path, heading_path, piece),
                    doc_id=doc_id,
                    rel_path=rel_path,
                    heading_path=heading_path,
                    text=piece,
                    meta=dict(meta),
                )
            )
    return chunks
