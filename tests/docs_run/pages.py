"""A documentation page read as the steps a reader follows: its code blocks and the markers before them.

Sybil lexes the Markdown (fenced blocks, also inside list items, with their indentation removed) and holds each
page as a ``Document`` of regions in page order. The markers are HTML comments, invisible on a code host and in
MkDocs, each on the line before its block (alone or at the end of that line):

- ``<!-- file: PATH -->`` the block is the content of PATH (written, replacing it); ``<!-- append: PATH -->`` adds it;
- ``<!-- alt: PATH -->`` the block is another form of the last file written (``pytest.ini`` for a
  ``pyproject.toml`` table), or a configuration file shown alone: written to PATH in a copy of the folder (without
  that last file), where ``pytest --rageval --collect-only`` must read it without a complaint;
- ``<!-- ci: SCRIPT -->`` the block is what CI itself runs: each of its commands must be one of SCRIPT's (a file of
  the repository, such as ``.ci/run``), word for word (see ``ci_script.py``);
- ``<!-- workflow -->`` a GitHub Actions workflow: each job's ``run:`` steps run in a copy of the page's folder
  (``workflow.py``); ``<!-- workflow: missing=ARTIFACT -->`` also runs the jobs that download artifacts without
  that one, which must then fail;
- ``<!-- subset: PATH -->`` a JSON fragment that PATH holds (``json_subset.py``); ``<latest>`` in PATH is the run id
  that the ``latest`` file beside it names;
- ``<!-- exit: N -->`` the block's (last) command exits with N (default 0);
- ``<!-- replace: TEXT => VALUE -->`` TEXT in the block stands for VALUE (a placeholder the reader fills in, such as
  the path of a clone); ``{repository}`` in VALUE is this repository's folder, ``{wheel}`` a wheel of it (built
  once for the job: a page installing the plugin in several places installs it from that file);
- ``<!-- needs: MODULE... -->`` the block needs these installed modules: without one it is skipped, or fails
  where the environment variable ``CI`` is set;
- ``<!-- folder: SHOWN [clone] [venv] -->`` the blocks after it run in a new folder, shown in outputs as SHOWN;
  ``clone`` fills it with the repository's ``pyproject.toml`` and ``eval_sets/``, ``venv`` gives it a virtual
  environment of its own (seeing this one's packages), first on PATH, for a page that installs a package;
  ``<!-- folder: SHOWN repository -->`` runs them in this repository itself (its own test suite);
- ``<!-- copy: SOURCE [DEST] -->`` copies the repository's file or folder SOURCE into the page's folder (as DEST,
  else under its own name): an example the page names, such as an app of ``examples/``;
- ``<!-- touch: PATH -->`` an empty PATH in the page's folder (a file the page's project is said to have);
- ``<!-- env: NAME=VALUE -->`` the commands after it run with that environment variable.

A ``bash``/``sh`` block runs as one script, a ``python`` block as a Python script (both in the page's folder). A
``text``/``console`` block whose first line is ``$ COMMAND`` holds commands and the output each prints; a ``text``
block right after a run block is that block's output. Any other block needs a marker: a block nothing runs or
checks is an error naming its line. A ``<!-- skip: REASON -->`` marker is refused: every block runs.
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
MARKER = re.compile(
    r"<!--\s*(?P<name>file|append|alt|ci|workflow|subset|skip|exit|replace|needs|folder|copy|touch|env)\b:?"
    r"\s*(?P<arguments>.*?)\s*-->"
)
SHELL = ("bash", "sh", "shell")
OUTPUT = ("text", "console", "")
#: Markers that give the next block its kind, and the argument each needs.
KIND_MARKERS = {"file": "a path", "append": "a path", "alt": "a path", "ci": "a script", "subset": "a path"}


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
    kind: str = ""  # run, commands, output, file, append, alt, ci, workflow, subset
    path: str = ""  # the file a file/append/alt block writes, the script a ci block is in, the file a subset is of
    exit_code: int = 0
    commands: list[Command] = field(default_factory=list)
    missing_artifact: str = ""  # a workflow's artifact whose absence must fail the jobs that download it
    needs: list[str] = field(default_factory=list)  # modules the block needs installed
    folder: tuple[str, frozenset[str]] | None = None  # a new folder from here on: (shown as, {clone, venv})
    copies: list[tuple[str, str]] = field(default_factory=list)  # (repository path, path in the page's folder)
    touches: list[str] = field(default_factory=list)  # empty files in the page's folder
    env: dict[str, str] = field(default_factory=dict)  # variables set from here on

    @property
    def test_id(self) -> str:
        return f"{self.page}:{self.line}:{self.kind}"


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
            _apply(block, marker, root)
        pending = []
        if not block.kind:
            block.kind = _kind_of(block, blocks[-1] if blocks else None)
        blocks.append(block)
    return blocks


def _apply(block: Block, marker: _Marker, root: Path) -> None:
    where = f"{block.page}:{block.line}"
    if marker.name == "folder":
        shown, *options = marker.arguments.split()
        if not set(options) <= {"clone", "venv"} and options != ["repository"]:
            raise PageError(
                f"{where}: folder marker: expected 'SHOWN [clone] [venv]' or 'SHOWN repository', got {marker.arguments!r}"
            )
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
        raise PageError(f"{where}: a skip marker ({marker.arguments}): every block runs; say how with another marker")
    elif marker.name == "replace":
        text, sep, value = marker.arguments.partition(" => ")
        if not sep or not text:
            raise PageError(f"{where}: replace marker: expected 'TEXT => VALUE', got {marker.arguments!r}")
        if text not in block.source:
            raise PageError(f"{where}: replace marker: the block has no {text!r}")
        block.source = block.source.replace(text, value.replace("{repository}", str(root)))
    elif marker.name == "needs":
        if not marker.arguments:
            raise PageError(f"{where}: needs marker without a module")
        block.needs += marker.arguments.split()
    elif marker.name == "copy":
        source, *dest = marker.arguments.split()
        if len(dest) > 1 or not (root / source).exists():
            raise PageError(
                f"{where}: copy marker: expected 'SOURCE [DEST]' of a repository path, got {marker.arguments!r}"
            )
        block.copies.append((source, dest[0] if dest else Path(source).name))
    elif marker.name == "touch":
        if not marker.arguments:
            raise PageError(f"{where}: touch marker without a path")
        block.touches.append(marker.arguments)
    elif marker.name == "workflow":
        name, sep, value = marker.arguments.partition("=")
        if marker.arguments and (name != "missing" or not sep or not value):
            raise PageError(
                f"{where}: workflow marker: expected nothing or 'missing=ARTIFACT', got {marker.arguments!r}"
            )
        block.kind, block.missing_artifact = "workflow", value
    else:
        if not marker.arguments:
            raise PageError(f"{where}: {marker.name} marker without {KIND_MARKERS[marker.name]}")
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
        f"{block.page}:{block.line}: a {block.language or 'plain'} block that nothing runs: mark it "
        "<!-- file: PATH -->, <!-- append: PATH -->, <!-- alt: PATH -->, <!-- ci: SCRIPT -->, <!-- workflow --> or "
        "<!-- subset: PATH -->"
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
