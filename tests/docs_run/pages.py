"""A documentation page read as the steps a reader follows: its code blocks and the markers before them.

Sybil lexes the Markdown (fenced blocks, also inside list items, with their indentation removed) and holds each
page as a ``Document`` of regions in page order. The markers are HTML comments, invisible on a code host and in
MkDocs, each on the line before its block (alone or at the end of that line):

- ``<!-- file: PATH -->`` the block is the content of PATH (written, replacing it); ``<!-- append: PATH -->`` adds it;
- ``<!-- alt: PATH -->`` the block is another form of the last file written (``pytest.ini`` for a
  ``pyproject.toml`` table), or a configuration file shown alone: written to PATH in a copy of the folder (without
  that last file), where ``pytest --rageval --collect-only`` must read it without a complaint;
- ``<!-- skip: REASON -->`` the block does not run; REASON is in its test id;
- ``<!-- exit: N -->`` the block's (last) command exits with N (default 0);
- ``<!-- folder: SHOWN [clone] [venv] -->`` the blocks after it run in a new folder, shown in outputs as SHOWN;
  ``clone`` fills it with the repository's ``pyproject.toml`` and ``eval_sets/``, ``venv`` gives it a virtual
  environment of its own (seeing this one's packages), first on PATH, for a page that installs a package;
- ``<!-- env: NAME=VALUE -->`` the commands after it run with that environment variable.

A ``bash``/``sh`` block runs as one script, a ``python`` block as a Python script (both in the page's folder). A
``text``/``console`` block whose first line is ``$ COMMAND`` holds commands and the output each prints; a ``text``
block right after a run block is that block's output. Any other block needs a marker: a block nothing runs, checks
or skips is an error naming its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from sybil import Document, Region
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

#: The info line of a fenced block: its language (possibly none) and any words after it.
INFO = re.compile(r"(?P<language>[\w+-]*)[^\n]*$\n", re.MULTILINE)
#: A marker: an HTML comment ``<!-- NAME: ARGUMENTS -->`` (or ``<!-- NAME -->``) anywhere on a line.
MARKER = re.compile(r"<!--\s*(?P<name>file|append|alt|skip|exit|folder|env)\b:?\s*(?P<arguments>.*?)\s*-->")
SHELL = ("bash", "sh", "shell")
OUTPUT = ("text", "console", "")
#: Markers that describe the next block (the others set up the folder and environment of the blocks after them).
BLOCK_MARKERS = ("file", "append", "alt", "skip", "exit")


class PageError(ValueError):
    """A page's markers do not say how to run one of its blocks."""


@dataclass
class Command:
    """One ``$ COMMAND`` of a console block and the output shown under it."""

    command: str
    shown: str


@dataclass
class Block:
    """A fenced code block of a page, with what the markers before it say."""

    page: str
    line: int
    language: str
    source: str
    kind: str = ""  # run, commands, output, file, append, alt, skip
    path: str = ""  # the file a file/append/alt block writes
    reason: str = ""  # why a skip block does not run
    exit_code: int = 0
    commands: list[Command] = field(default_factory=list)
    folder: tuple[str, frozenset[str]] | None = None  # a new folder from here on: (shown as, {clone, venv})
    env: dict[str, str] = field(default_factory=dict)  # variables set from here on

    @property
    def test_id(self) -> str:
        label = f"{self.page}:{self.line}:{self.kind}"
        return f"{label}:{self.reason}" if self.kind == "skip" else label


class _Marker:
    """A marker region: its name and arguments."""

    def __init__(self, name: str, arguments: str) -> None:
        self.name, self.arguments = name, arguments


def _markers(document: Document) -> Iterable[Region]:
    for match in MARKER.finditer(document.text):
        yield Region(match.start(), match.end(), parsed=_Marker(match.group("name"), match.group("arguments")))


def _fenced(document: Document) -> Iterable[Region]:
    for region in RawFencedCodeBlockLexer(info_pattern=INFO)(document):
        region.parsed = (region.lexemes["language"], str(region.lexemes["source"]))
        yield region


def _commands(page: str, line: int, source: str) -> list[Command]:
    """The ``$`` commands of a console block (a line ending in a backslash goes on) and the output under each."""
    commands: list[Command] = []
    lines = source.splitlines()
    index = 0
    while index < len(lines):
        if not lines[index].startswith("$ "):
            raise PageError(f"{page}:{line}: a console block's lines before its first '$ ' command: {lines[index]!r}")
        command = lines[index][2:]
        while command.endswith("\\") and index + 1 < len(lines):
            index += 1
            command = command[:-1].rstrip() + " " + lines[index].strip()
        index += 1
        shown = []
        while index < len(lines) and not lines[index].startswith("$ "):
            shown.append(lines[index])
            index += 1
        commands.append(Command(command, "\n".join(shown)))
    return commands


def parse(path: Path, root: Path) -> list[Block]:
    """The blocks of the page at ``path`` in page order, each with the kind its markers and language give it."""
    page = path.relative_to(root).as_posix()
    document = Document.parse(str(path), _fenced, _markers)
    blocks: list[Block] = []
    pending: list[_Marker] = []
    for _, region in document.regions:
        if isinstance(region.parsed, _Marker):
            pending.append(region.parsed)
            continue
        language, source = region.parsed
        line = document.text.count("\n", 0, region.start) + 1
        block = Block(page, line, language, source)
        for marker in pending:
            _apply(block, marker)
        pending = []
        if not block.kind:
            block.kind = _kind_of(block, blocks[-1] if blocks else None)
        blocks.append(block)
    return blocks


def _apply(block: Block, marker: _Marker) -> None:
    where = f"{block.page}:{block.line}"
    if marker.name == "folder":
        shown, *options = marker.arguments.split()
        if not set(options) <= {"clone", "venv"}:
            raise PageError(f"{where}: folder marker: expected 'SHOWN [clone] [venv]', got {marker.arguments!r}")
        block.folder = (shown, frozenset(options))
    elif marker.name == "env":
        name, sep, value = marker.arguments.partition("=")
        if not sep or not name.isidentifier():
            raise PageError(f"{where}: env marker: expected NAME=VALUE, got {marker.arguments!r}")
        block.env[name] = value
    elif marker.name == "exit":
        if not marker.arguments.isdigit():
            raise PageError(f"{where}: exit marker: expected a whole number, got {marker.arguments!r}")
        block.exit_code = int(marker.arguments)
    elif marker.name == "skip":
        if not marker.arguments:
            raise PageError(f"{where}: skip marker without a reason")
        block.kind, block.reason = "skip", marker.arguments
    else:
        if not marker.arguments:
            raise PageError(f"{where}: {marker.name} marker without a path")
        block.kind, block.path = marker.name, marker.arguments


def _kind_of(block: Block, previous: Block | None) -> str:
    if block.language in (*SHELL, "python"):
        return "run"
    if block.language in OUTPUT and block.source.startswith("$ "):
        block.commands = _commands(block.page, block.line, block.source)
        return "commands"
    if block.language in OUTPUT and previous is not None and previous.kind == "run":
        return "output"
    raise PageError(
        f"{block.page}:{block.line}: a {block.language or 'plain'} block that nothing runs: "
        "mark it <!-- file: PATH -->, <!-- append: PATH -->, <!-- alt: PATH --> or <!-- skip: REASON -->"
    )


def fenced_blocks(text: str) -> int:
    """How many fenced code blocks a Markdown text has, counted without Sybil (to check what it found)."""
    opened: str | None = None
    count = 0
    for line in text.splitlines():
        fence = re.match(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?(`{3,}|~{3,})", line)
        if fence is None:
            continue
        if opened is None:
            opened, count = fence.group(1), count + 1
        elif fence.group(1).startswith(opened) and not line.strip()[len(fence.group(1)) :].strip():
            opened = None
    return count
