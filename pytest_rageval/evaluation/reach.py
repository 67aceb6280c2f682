"""Gold supports that no chunk could ever match, found before any case runs.

Pure but for reading the files under ``docs_root``; no pytest. ``rageval
inspect`` and the run's start both use it, in the same words:

* from the eval set and the files (:func:`unreachable_gold`): a ``rel_path``
  that is absolute, leaves ``docs_root`` or names no file under it; a heading
  path that no heading of that markdown file starts with;
* from what the target answered (:func:`shape_problems`): chunk paths that are
  absolute outside ``docs_root`` or file names without their folders, chunks
  without heading paths where gold is anchored at headings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

from .anchors import normalize_heading_path, normalize_segment
from .docpaths import is_absolute
from .schema import Chunk, EvalCase

__all__ = ["Unreachable", "markdown_heading_paths", "shape_problems", "unreachable_gold"]

_MARKDOWN = (".md", ".markdown", ".mdx")
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


@dataclass(frozen=True)
class Unreachable:
    """A gold support of one case that can never match, and why."""

    file: str
    line: int
    case_id: str
    index: int  # into the case's gold_supports
    anchor: str  # rel_path > heading
    reason: str

    def describe(self) -> str:
        return f"{self.file}:{self.line} [{self.case_id}] gold_supports[{self.index}] {self.anchor} can never match: {self.reason}"


def _anchor(rel_path: str, heading: tuple[str, ...]) -> str:
    return " > ".join([rel_path, *heading])


def markdown_heading_paths(text: str) -> list[tuple[str, ...]]:
    """Every heading path of a markdown text (``# A`` then ``## B`` gives ``("A",)`` and ``("A", "B")``), each
    title as matching sees it (``## B { #b }`` gives ``B``); headings inside fenced code are not headings."""
    paths: list[tuple[str, ...]] = []
    stack: list[tuple[int, str]] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _ATX.match(line)
        if match is None:
            continue
        level, title = len(match.group(1)), normalize_segment(match.group(2))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        paths.append(tuple(t for _, t in stack if t))
    return paths


@lru_cache(maxsize=4096)
def _headings_of(path: Path) -> tuple[tuple[str, ...], ...] | None:
    try:
        return tuple(markdown_heading_paths(path.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return None


def _file_problem(rel_path: str, docs_root: Path) -> str | None:
    if is_absolute(rel_path):
        return f"its rel_path is absolute; gold paths are relative to docs_root {docs_root}"
    parts = PurePosixPath(rel_path.replace("\\", "/")).parts
    if ".." in parts:
        return f"its rel_path leaves docs_root {docs_root}"
    if docs_root.is_dir() and not (docs_root / rel_path).is_file():
        return f"no such file under docs_root {docs_root}"
    return None


def unreachable_gold(cases: Iterable[tuple[str, int, EvalCase]], docs_root: Path) -> list[Unreachable]:
    """The gold supports of ``(file, line, case)`` that no chunk could ever match, in the order given."""
    found = []
    for file, line, case in cases:
        for index, support in enumerate(case.gold_supports):
            heading = normalize_heading_path(support.heading_path)
            reason = _file_problem(support.rel_path, docs_root)
            if reason is None and heading and support.rel_path.lower().endswith(_MARKDOWN):
                headings = _headings_of(docs_root / support.rel_path)
                if headings is not None and not any(path[: len(heading)] == heading for path in headings):
                    tops = sorted({" > ".join(path[: len(heading)]) for path in headings if len(path) >= 1})[:3]
                    reason = "no heading path of that file starts with it" + (
                        f" (its headings include {'; '.join(tops)})" if tops else " (it has no headings)"
                    )
            if reason is not None:
                found.append(Unreachable(file, line, case.id, index, _anchor(support.rel_path, heading), reason))
    return found


def _lost_folder(paths: Sequence[str], gold_paths: set[str], docs_root: Path) -> tuple[str, str] | None:
    """(chunk path, gold path) showing that the target drops folders: a chunk path that is a bare file name, is
    no gold path and no file at the top of ``docs_root``, while a gold path is that name inside a folder. A chunk
    of a file that does lie at the top (``handbook.md``) says nothing: gold in folders stays reachable."""
    for path in paths:
        if path in gold_paths or (docs_root.is_dir() and (docs_root / path).is_file()):
            continue
        example = next((gold for gold in sorted(gold_paths) if gold.endswith("/" + path)), None)
        if example is not None:
            return path, example
    return None


def shape_problems(cases: Sequence[EvalCase], chunks: Sequence[Chunk], docs_root: Path) -> list[str]:
    """Why the gold of ``cases`` could not match chunks shaped like ``chunks`` (one answer of the target)."""
    gold = [support for case in cases for support in case.gold_supports]
    gold_paths = {support.rel_path for support in gold}
    paths = [chunk.rel_path for chunk in chunks if chunk.rel_path]
    if not gold or not chunks:
        return []
    problems = []
    if not paths:
        problems.append("no chunk the target returned carries a rel_path: map one (retrieved_chunks.rel_path = ...)")
    elif all(is_absolute(path) for path in paths):
        problems.append(
            f"the target's chunk paths are absolute and outside docs_root {docs_root} (e.g. {paths[0]}): "
            "set rageval_docs_root to the folder the documents were loaded from"
        )
    elif not set(paths) & gold_paths and any(
        path.endswith("/" + support.rel_path) for path in paths for support in gold
    ):
        path, support = next((p, s.rel_path) for p in paths for s in gold if p.endswith("/" + s.rel_path))
        problems.append(
            f"the target's chunk paths carry a folder that gold paths do not ({path} for {support}): "
            f"set rageval_docs_root to the folder gold paths are relative to (now {docs_root})"
        )
    elif all("/" not in path for path in paths) and (lost := _lost_folder(paths, gold_paths, docs_root)) is not None:
        path, example = lost
        problems.append(
            f"the target's chunk paths are file names without folders (e.g. {path}) while gold paths "
            f"have folders (e.g. {example}): have the loader keep the path (Haystack: store_full_path=True)"
        )
    anchored = sum(1 for support in gold if normalize_heading_path(support.heading_path))
    if anchored and not any(normalize_heading_path(chunk.heading_path) for chunk in chunks):
        problems.append(
            f"no chunk the target returned carries a heading path, so the {anchored} gold supports "
            "anchored at a heading can never match: split the documents by markdown headings, or map "
            "retrieved_chunks.heading_path"
        )
    return problems
