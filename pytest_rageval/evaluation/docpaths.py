"""Where a chunk comes from: its file relative to ``docs_root``, and its heading path as a RAG framework wrote it.

Pure: reads metadata dicts as the frameworks' own markdown splitters write them,
imports no framework.

* LlamaIndex ``MarkdownNodeParser``: ``header_path`` holds the *parent* headings
  (``/Guide/Setup/``); the node's own heading is the first line of its text
  (``## Embeddings``).
* LangChain ``MarkdownHeaderTextSplitter``: one metadata key per level, ``Header 1``
  to ``Header 6`` in the documented set-up.
* Haystack ``MarkdownHeaderSplitter``: ``parent_headers`` (a list) and ``header``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["PATH_KEYS", "heading_path", "is_absolute", "own_heading", "relative_path"]

#: Metadata keys read, in order, for the file a chunk comes from.
PATH_KEYS = ("file_path", "source", "file_name", "path")

_HEADING_LINE = re.compile(r"#{1,6}[ \t]+(.+?)[ \t#]*$")
_LANGCHAIN_HEADER = re.compile(r"Header ([1-6])")


def is_absolute(path: str) -> bool:
    """An absolute path of this machine or another (``/srv/x``, ``C:\\x``, ``file:///x``)."""
    text = path.strip()
    return text.startswith(("/", "\\", "file://")) or bool(re.match(r"^[A-Za-z]:[\\/]", text))


def relative_path(raw: Any, docs_root: Path | None) -> str | None:
    """``raw`` as a ``/``-separated path relative to ``docs_root`` when it lies under it.

    A relative path is kept (``./`` and backslashes normalised) unless it names a file, from the
    working folder (where a loader ran), that lies under ``docs_root``; an absolute path
    outside ``docs_root`` is kept as given, so it shows where the chunk came from
    (and ``rageval inspect`` names it as one that can never match).
    """
    if not isinstance(raw, str) or not raw.strip():
        return None
    text = raw.strip()
    if not is_absolute(text):
        parts = [p for p in text.replace("\\", "/").split("/") if p not in ("", ".")]
        if docs_root is not None and parts and (Path.cwd() / Path(*parts)).is_file():
            inside = _under(Path.cwd() / Path(*parts), docs_root)
            if inside is not None:
                return inside
        return "/".join(parts) or None
    if text.startswith("file://"):
        text = text[len("file://") :]
    if docs_root is not None:
        inside = _under(Path(text), docs_root)
        if inside is not None:
            return inside
    return text


def _under(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` (``/``-separated), as written or with links resolved; None outside it."""
    for base in dict.fromkeys((Path(os.path.normpath(root)), _resolved(root))):
        for candidate in dict.fromkeys((Path(os.path.normpath(path)), _resolved(path))):
            try:
                return PurePosixPath(*candidate.relative_to(base).parts).as_posix()
            except ValueError:
                continue
    return None


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def own_heading(text: Any) -> str | None:
    """The heading a chunk's text opens with (``## Setup`` gives ``Setup``), else None."""
    if not isinstance(text, str):
        return None
    first = text.lstrip("\n").split("\n", 1)[0].strip()
    match = _HEADING_LINE.fullmatch(first)
    return match.group(1).strip() if match else None


def heading_path(metadata: Mapping[str, Any], text: Any = None) -> str | list[str] | None:
    """The heading path a framework's markdown splitter left in ``metadata`` (and the chunk text), or None.

    Read, in order: LlamaIndex ``header_path`` plus the text's own leading heading;
    Haystack ``parent_headers`` plus ``header``; LangChain ``Header 1..6``. A
    ``heading_path`` already in the metadata is kept as it is.
    """
    existing = metadata.get("heading_path")
    if isinstance(existing, (str, list)) and existing:
        return existing if isinstance(existing, str) else [str(part) for part in existing]
    header_path = metadata.get("header_path")
    if isinstance(header_path, str):
        parents = [part.strip() for part in header_path.split("/") if part.strip()]
        own = own_heading(text)
        return [*parents, own] if own else parents
    if "parent_headers" in metadata or "header" in metadata:
        given = metadata.get("parent_headers")
        path = [str(p) for p in given if str(p).strip()] if isinstance(given, list) else []
        header = metadata.get("header")
        return [*path, header] if isinstance(header, str) and header.strip() else path
    levels = sorted(
        (int(m.group(1)), value)
        for key, value in metadata.items()
        if isinstance(key, str) and (m := _LANGCHAIN_HEADER.fullmatch(key)) and isinstance(value, str)
    )
    if levels:
        return [value for _, value in levels]
    own = own_heading(text)
    return [own] if own else None
