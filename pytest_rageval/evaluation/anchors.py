"""Anchor matching: heading-path normalisation, chunk-vs-gold matching, folder scope.

Pure: no pytest, no I/O. The matching rules:

* a chunk matches a gold support when the ``rel_path`` strings are equal and the
  chunk's normalised heading path starts with the gold one, segment by segment
  (leading ``#`` marks and a trailing attribute list such as ``{ #install }`` are not part of a segment);
  an empty gold heading path matches any heading of that file;
* with ``require_snippets`` a gold support that has snippets also needs one of
  them in the chunk text (case-insensitive);
* a chunk also matches when its ``doc_id`` is one of the case's ``gold_doc_ids``.

Gold items are named ``"s<i>"`` (index into ``gold_supports``) and
``"d:<doc_id>"`` (an entry of ``gold_doc_ids``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from .schema import Chunk, EvalCase, GoldSupport

__all__ = [
    "GoldMatcher",
    "doc_item_id",
    "in_scope",
    "matched_gold_items",
    "normalize_heading_path",
    "normalize_segment",
    "strip_attribute_list",
    "support_item_id",
    "support_matches",
    "top_k",
]

_EMPTY: frozenset[str] = frozenset()


# --------------------------------------------------------------------------- headings


#: One attribute of a heading's attribute list: ``#id``, ``.class``, ``key=value`` (the value bare or quoted), or
#: Pandoc's ``-`` (unnumbered).
_ATTRIBUTE = r"""(?:[#.][^\s{}"'=]+|[A-Za-z_][\w.:-]*=(?:"[^"]*"|'[^']*'|[^\s{}"']+)|-)"""
#: A trailing attribute list as Python-Markdown's attr_list (MkDocs) and Pandoc write it after a heading's text:
#: whitespace, ``{``, an optional ``:``, one or more attributes separated by whitespace, ``}``, at the very end.
_ATTRIBUTE_LIST = re.compile(rf"\s\{{:?\s*{_ATTRIBUTE}(?:\s+{_ATTRIBUTE})*\s*\}}\s*\Z")


def strip_attribute_list(title: str) -> str:
    """``title`` without a trailing attribute list: ``Install { #install }``, ``Install {#id .class}`` and
    ``Install {: #install }`` give ``Install``. Braces that are no attribute list stay (``Use {braces} here``,
    ``Set {x}``, ``{#x}`` alone: nothing would be left of the heading)."""
    found = _ATTRIBUTE_LIST.search(title)
    if found is None or not title[: found.start()].strip():
        return title
    return title[: found.start()]


def normalize_segment(segment: str) -> str:
    """One heading segment without leading ``#`` marks and a trailing attribute list, trimmed, inner whitespace
    collapsed."""
    return " ".join(strip_attribute_list(segment.strip().lstrip("#")).split())


# Bounded low: one entry is ~250 bytes, and a run of 100,000 cases whose gold headings all differ would keep
# 65,536 of them; the headings that recur across cases (the corpus's chunks) stay cached.
@lru_cache(maxsize=8192)
def _normalize_str(path: str) -> tuple[str, ...]:
    segments = (normalize_segment(part) for part in path.split(">"))
    return tuple(seg for seg in segments if seg)


def normalize_heading_path(path: str | Sequence[str] | None) -> tuple[str, ...]:
    """Normalise a heading path to a tuple of segments.

    A string is split on ``>``; a list is taken as the segments. Each segment
    loses its leading ``#`` marks, is trimmed and has inner whitespace
    collapsed; empty segments are dropped. ``None`` gives ``()``.
    """
    if path is None:
        return ()
    if isinstance(path, str):
        return _normalize_str(path)
    segments = (normalize_segment(str(part)) for part in path)
    return tuple(seg for seg in segments if seg)


def _starts_with(heading: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    """True when ``heading`` begins with all segments of ``prefix``."""
    n = len(prefix)
    return n == 0 or (len(heading) >= n and heading[:n] == prefix)


def _has_snippet(text: str | None, snippets: Iterable[str]) -> bool:
    """True when one of the (already case-folded) snippets occurs in ``text``."""
    folded = (text or "").casefold()
    return any(snippet in folded for snippet in snippets)


# --------------------------------------------------------------------------- matching


def support_item_id(index: int) -> str:
    """The gold-item id of ``gold_supports[index]``."""
    return f"s{index}"


def doc_item_id(doc_id: str) -> str:
    """The gold-item id of a ``gold_doc_ids`` entry."""
    return f"d:{doc_id}"


def support_matches(chunk: Chunk, support: GoldSupport, require_snippets: bool) -> bool:
    """Whether ``chunk`` matches the gold ``support`` (rel_path, heading prefix, snippets)."""
    if chunk.rel_path is None or chunk.rel_path != support.rel_path:
        return False
    gold_heading = normalize_heading_path(support.heading_path)
    if not _starts_with(normalize_heading_path(chunk.heading_path), gold_heading):
        return False
    if require_snippets and support.snippets:
        return _has_snippet(chunk.text, [s.casefold() for s in support.snippets])
    return True


class GoldMatcher:
    """The gold of one case, normalised once, to match many chunks quickly."""

    __slots__ = ("_by_path", "_doc_items", "doc_ids", "item_count", "support_ids")

    def __init__(self, case: EvalCase, require_snippets: bool) -> None:
        by_path: dict[str, list[tuple[str, tuple[str, ...], tuple[str, ...] | None]]] = {}
        for index, support in enumerate(case.gold_supports):
            snippets = None
            if require_snippets and support.snippets:
                snippets = tuple(s.casefold() for s in support.snippets)
            entry = (support_item_id(index), normalize_heading_path(support.heading_path), snippets)
            by_path.setdefault(support.rel_path, []).append(entry)
        self._by_path = by_path
        self._doc_items = {doc_id: doc_item_id(doc_id) for doc_id in case.gold_doc_ids}
        #: ids of the gold supports, in order ("s0", "s1", ...)
        self.support_ids: tuple[str, ...] = tuple(support_item_id(i) for i in range(len(case.gold_supports)))
        #: ids of the de-duplicated gold doc ids ("d:<doc_id>")
        self.doc_ids: tuple[str, ...] = tuple(self._doc_items.values())
        #: number of distinct gold items (supports + de-duplicated doc ids)
        self.item_count: int = len(self.support_ids) + len(self.doc_ids)

    def match(self, chunk: Chunk) -> frozenset[str]:
        """Ids of the gold items that ``chunk`` matches (empty when none)."""
        found: list[str] = []
        entries = self._by_path.get(chunk.rel_path) if chunk.rel_path is not None else None
        if entries:
            heading = normalize_heading_path(chunk.heading_path)
            for item_id, gold_heading, snippets in entries:
                if not _starts_with(heading, gold_heading):
                    continue
                if snippets is not None and not _has_snippet(chunk.text, snippets):
                    continue
                found.append(item_id)
        if chunk.doc_id is not None:
            doc_item = self._doc_items.get(chunk.doc_id)
            if doc_item is not None:
                found.append(doc_item)
        return frozenset(found) if found else _EMPTY


def matched_gold_items(chunk: Chunk, case: EvalCase, require_snippets: bool) -> frozenset[str]:
    """Ids of the gold items ``chunk`` matches: ``"s<i>"`` for supports, ``"d:<doc_id>"`` for ids."""
    return GoldMatcher(case, require_snippets).match(chunk)


# --------------------------------------------------------------------------- scope and order


def _normalize_folder_path(path: str) -> str:
    """Trim, drop leading ``./`` (repeatedly) and leading/trailing ``/``; ``.`` becomes ``""``."""
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    path = path.strip("/")
    return "" if path == "." else path


def in_scope(rel_path: str, selected_folders: Sequence[str]) -> bool:
    """Whether ``rel_path`` lies under one of ``selected_folders`` (path-segment prefix).

    ``""`` or ``"."`` selects everything; an empty list selects nothing.
    """
    path = _normalize_folder_path(rel_path)
    for folder in selected_folders:
        prefix = _normalize_folder_path(folder)
        if not prefix or path == prefix or path.startswith(prefix + "/"):
            return True
    return False


def top_k(chunks: Sequence[Chunk], k: int) -> list[Chunk]:
    """The first ``k`` chunks: sorted by ``rank`` when present (stable), unranked ones after."""
    if k <= 0:
        return []
    ranked = [c for c in chunks if c.rank is not None]
    if not ranked:
        return list(chunks[:k])
    ranked.sort(key=lambda c: c.rank)  # type: ignore[arg-type, return-value]
    if len(ranked) < len(chunks):
        ranked.extend(c for c in chunks if c.rank is None)
    return ranked[:k]
