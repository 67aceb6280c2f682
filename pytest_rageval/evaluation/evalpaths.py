"""Where the eval sets are: the ``rageval_eval_sets`` globs expanded without walking a folder link in a loop.

Pure file-system logic, no pytest. A folder link that leads back to a folder it is in (``eval_sets/self -> .``)
is not followed: it is reported once, and every real folder is walked once. A file reached by two paths (two
links, or a link beside its target) counts once, under the path met first in name order. Matching follows
:func:`glob.glob` with ``recursive=True``: ``**`` is any number of folders, and neither ``*`` nor ``**`` match a
name that starts with a dot unless the pattern's part does.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Found", "expand_globs", "loop_problem", "loop_target", "real_path"]

_MAGIC = re.compile(r"[*?\[]")


def real_path(path: Path) -> Path:
    """``path`` with every link resolved (never raises: a dangling or looping link resolves as far as it goes)."""
    return Path(os.path.realpath(path))


def loop_target(path: Path) -> Path | None:
    """The folder a folder link ``path`` leads back to (a folder ``path`` is in, or one above it), or None.

    Walking such a link would meet the same folders again without end; any other path gives None.
    """
    if not path.is_symlink():
        return None
    target = real_path(path)
    if not target.is_dir():
        return None
    for parent in path.parents:
        here = real_path(parent)
        if here == target or target in here.parents:
            return target
    return None


def loop_problem(target: Path, root: Path) -> str:
    """What an error item says of a link back to ``target``, shown relative to ``root`` when inside it."""
    try:
        shown = target.relative_to(real_path(root)).as_posix() or "."
    except ValueError:
        shown = str(target)
    return f"a link back to a folder already collected ({shown}); not followed"


@dataclass
class Found:
    """What the globs match: eval-set paths in order, and the folder links not followed for making a loop."""

    paths: list[Path] = field(default_factory=list)
    loops: dict[Path, Path] = field(default_factory=dict)  # the link -> the folder it leads back to


def expand_globs(root: Path, patterns: Sequence[str]) -> Found:
    """The paths the ``patterns`` (relative to ``root``) match, each pattern's sorted, each real file once.

    Dangling links are among the paths (the caller reports them); folder links in a loop are in ``loops``.
    """
    found = Found()
    seen_paths: set[Path] = set()
    seen_files: set[Path] = set()
    for pattern in patterns:
        walk = _Walk(found.loops)
        parts = Path(pattern).parts
        if not parts:
            continue
        base = Path(parts[0]) if Path(pattern).is_absolute() else root
        walk.run(base, parts[1:] if Path(pattern).is_absolute() else parts)
        for path in sorted(walk.matches, key=str):
            real = real_path(path)
            if path in seen_paths or (real in seen_files and os.path.exists(path)):
                continue
            seen_paths.add(path)
            seen_files.add(real)
            found.paths.append(path)
    return found


class _Walk:
    """One pattern's matches: a depth-first walk, part by part, that enters each (real folder, parts left) once."""

    def __init__(self, loops: dict[Path, Path]) -> None:
        self.matches: list[Path] = []
        self.loops = loops
        self._entered: set[tuple[Path, tuple[str, ...]]] = set()

    def run(self, folder: Path, parts: Sequence[str]) -> None:
        key = (real_path(folder), tuple(parts))
        if not parts or key in self._entered:
            return
        self._entered.add(key)
        head, rest = parts[0], tuple(parts[1:])
        if head == "**":
            self.run(folder, rest or ("*",))
            for name in _names(folder, "*"):
                if self._enter(folder / name):
                    self.run(folder / name, parts)
        elif not _MAGIC.search(head):
            self._step(folder / head, rest, exists=os.path.lexists(folder / head))
        else:
            for name in _names(folder, head):
                self._step(folder / name, rest, exists=True)

    def _step(self, path: Path, rest: tuple[str, ...], *, exists: bool) -> None:
        """``path`` matched a part: the last one makes it a match, others make it a folder to walk on."""
        if not rest:
            if exists:
                self.matches.append(path)
        elif self._enter(path):
            self.run(path, rest)

    def _enter(self, path: Path) -> bool:
        """``path`` is a folder to walk into: not a file, and not a link back to a folder it is in (noted)."""
        if not path.is_dir():
            return False
        target = loop_target(path)
        if target is not None:
            self.loops.setdefault(path, target)
            return False
        return True


def _names(folder: Path, part: str) -> list[str]:
    """The names in ``folder`` that ``part`` matches, sorted; a dot-name only when ``part`` starts with a dot."""
    try:
        with os.scandir(folder) as entries:
            names = [entry.name for entry in entries]
    except OSError:
        return []
    hidden = part.startswith(".")
    return sorted(name for name in fnmatch.filter(names, part) if hidden or not name.startswith("."))
