"""Gold labelling without a client: the answer protocol, anchors made of chunks, and the eval set rewritten in place.

``rageval label`` (label.py) shows a question's retrieved chunks, numbered from 1 in rank order, and reads one
answer per question. :func:`parse_choice` reads that answer (the line protocol below) into a :class:`Choice`;
:func:`anchor_of` turns a chosen chunk into a gold support (``rel_path`` + ``heading_path`` + one short snippet
copied from the chunk's text, checked to match the chunk under ``anchors.support_matches`` even with
``rageval_require_snippets``); :func:`labelled_line` applies a choice to one line's JSON object; and
:class:`EvalSetText` replaces whole lines of the file's bytes, leaving every other byte as it was, and writes the
file atomically (temp file in the same folder + ``os.replace``, the file's own mode kept).

The line protocol (one line per question; case of the letters does not matter)::

    1 3        chunks 1 and 3 support the answer, both needed (no required_support_groups written:
               recall_all_at_k then needs every support)
    1,3        the same
    1 3 | 2    support groups: chunks 1 and 3 together, or chunk 2 alone (OR of groups, AND within a
               group: required_support_groups [[0, 1], [2]])
    u          unanswerable: the corpus does not answer it ("answerable": false, no gold)
    s          skip this question (its line is left as it is)
    q          quit; what was labelled so far is kept
    ?          show this help

Gold supports are written in the order the numbers are typed (``3 1`` makes chunk 3 ``gold_supports[0]``, the
newer source of a ``recency_conflict_rule``); chunks with the same anchor become one support. A system that
cites ids only (chunks without ``rel_path``) is labelled with ``gold_doc_ids`` instead.

Pure but for reading and writing the one file: no pytest, no network.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from pytest_rageval import safejson
from pytest_rageval.atomic import write_bytes_atomic
from pytest_rageval.errors import RagevalError

from .anchors import normalize_heading_path, support_matches
from .evalset import EvalFile, _load_lines
from .schema import Chunk, EvalCase, GoldSupport

__all__ = [
    "CHOICE_HELP",
    "Choice",
    "ChoiceError",
    "EvalSetText",
    "LabelEditError",
    "anchor_of",
    "labelled_line",
    "parse_choice",
    "snippet_of",
]

CHOICE_HELP = (
    "answer with chunk numbers: '1 3' = chunks 1 and 3 support it (both needed), '1 3 | 2' = support groups "
    "(1 and 3 together, or 2 alone), 'u' = unanswerable, 's' = skip, 'q' = quit (labels so far are kept), '?' = help"
)

#: Keys that hold id-based gold (the canonical name first, then the aliases the loader accepts).
DOC_ID_KEYS = ("gold_doc_ids", "expectedProposalIds", "expected_doc_ids")
#: Longest snippet written (characters); cut at a word boundary.
SNIPPET_CHARS = 60
#: Shortest snippet worth writing.
_MIN_SNIPPET = 8
#: How much of a chunk's text is searched for a snippet (far below rageval_max_chunk_chars, so a run sees it too).
_SNIPPET_WINDOW = 2000


class ChoiceError(RagevalError, ValueError):
    """An answer that does not follow the protocol; the message says why, on one line."""


class LabelEditError(RagevalError):
    """The eval set cannot be read or written as asked; the message names the file (and line)."""


# --------------------------------------------------------------------------- the answer protocol


@dataclass(frozen=True)
class Choice:
    """One answer: supports (with the gold they make), unanswerable, skip, quit or help."""

    kind: Literal["supports", "unanswerable", "skip", "quit", "help"]
    #: the chunk numbers typed (1-based), one tuple per group; a single group without '|'
    groups: tuple[tuple[int, ...], ...] = ()
    #: whether '|' was used (then required_support_groups is written)
    grouped: bool = False
    #: the gold supports (anchors) or, for an id-only system, gold doc ids the choice makes
    supports: tuple[dict[str, Any], ...] = ()
    doc_ids: tuple[str, ...] = ()
    #: required_support_groups over ``supports`` (or ``doc_ids``), when grouped
    support_groups: tuple[tuple[int, ...], ...] | None = None


_WORDS = {
    "u": "unanswerable",
    "unanswerable": "unanswerable",
    "s": "skip",
    "skip": "skip",
    "q": "quit",
    "quit": "quit",
    "?": "help",
    "h": "help",
    "help": "help",
}


def parse_choice(text: str, chunks: Sequence[Chunk]) -> Choice:
    """Read one answer about ``chunks`` (shown numbered from 1); ChoiceError says what is wrong with it."""
    answer = text.strip()
    if not answer:
        raise ChoiceError("empty answer; " + CHOICE_HELP)
    word = _WORDS.get(answer.lower())
    if word is not None:
        return Choice(word)  # type: ignore[arg-type]
    groups: list[tuple[int, ...]] = []
    for part in answer.split("|"):
        tokens = [t for t in re.split(r"[\s,]+", part.strip()) if t]
        if not tokens:
            raise ChoiceError(f"{answer!r}: an empty group (numbers are needed on both sides of '|')")
        numbers: list[int] = []
        for token in tokens:
            if not token.isdigit() or not token.isascii():
                raise ChoiceError(f"{token!r} is not a chunk number; {CHOICE_HELP}")
            number = int(token)
            if not chunks:
                raise ChoiceError("no chunks were retrieved for this question: answer u, s or q")
            if not 1 <= number <= len(chunks):
                raise ChoiceError(f"there is no chunk {number} (this question has chunks 1 to {len(chunks)})")
            if number not in numbers:
                numbers.append(number)
        groups.append(tuple(numbers))
    return _gold_choice(tuple(groups), len(groups) > 1, chunks)


def _gold_choice(groups: tuple[tuple[int, ...], ...], grouped: bool, chunks: Sequence[Chunk]) -> Choice:
    """The gold the chosen chunk numbers make: anchors (merged by anchor), or doc ids for an id-only system."""
    numbers = list(dict.fromkeys(n for group in groups for n in group))
    chosen = {n: chunks[n - 1] for n in numbers}
    no_path = [n for n in numbers if not chosen[n].rel_path]
    if no_path and len(no_path) < len(numbers):
        raise ChoiceError(
            f"chunk {no_path[0]} has no rel_path while chunk {next(n for n in numbers if n not in no_path)} has one: "
            "pick chunks that all have a rel_path (anchors) or all only a doc_id"
        )
    position: dict[int, int] = {}  # chunk number -> index into the written gold list
    supports: list[dict[str, Any]] = []
    doc_ids: list[str] = []
    if not no_path:
        keys: list[tuple[str, tuple[str, ...]]] = []
        for n in numbers:
            anchor = anchor_of(chosen[n])
            key = (anchor["rel_path"], normalize_heading_path(anchor.get("heading_path")))
            if key in keys:
                index = keys.index(key)
                merged = list(dict.fromkeys([*supports[index].get("snippets", []), *anchor.get("snippets", [])]))
                if merged:
                    supports[index]["snippets"] = merged
            else:
                keys.append(key)
                supports.append(anchor)
                index = len(supports) - 1
            position[n] = index
    else:
        for n in numbers:
            doc_id = chosen[n].doc_id
            if not doc_id:
                raise ChoiceError(f"chunk {n} has neither a rel_path nor a doc_id: it cannot be gold")
            if doc_id not in doc_ids:
                doc_ids.append(doc_id)
            position[n] = doc_ids.index(doc_id)
    support_groups = None
    if grouped:
        mapped = [tuple(dict.fromkeys(position[n] for n in group)) for group in groups]
        support_groups = tuple(dict.fromkeys(mapped))
    return Choice("supports", groups, grouped, tuple(supports), tuple(doc_ids), support_groups)


# --------------------------------------------------------------------------- anchors


def snippet_of(text: str | None) -> str | None:
    """A short phrase copied verbatim from ``text``: the start of its first line of prose (not a heading), of
    printable characters only, cut at a word boundary to at most SNIPPET_CHARS; None when there is none."""
    window = (text or "")[:_SNIPPET_WINDOW]
    lines = window.splitlines()
    for heading_too, words in ((False, 2), (False, 1), (True, 1)):  # prose of two words or more first
        for line in lines:
            if line.lstrip().startswith("#") and not heading_too:
                continue
            for run in re.split(r"[^\S ]|[^\w\s\-.,;:%$€£/()'\"&+]", line):  # printable prose, no control characters
                run = run.strip(" ").lstrip("#*->`_ ").strip(" ")
                if len(run) < _MIN_SNIPPET or not any(ch.isalnum() for ch in run):
                    continue
                if len(run) > SNIPPET_CHARS:
                    cut = run.rfind(" ", 0, SNIPPET_CHARS + 1)
                    run = run[: cut if cut >= _MIN_SNIPPET else SNIPPET_CHARS].rstrip(" ,;:")
                if len(run) >= _MIN_SNIPPET and run.isprintable() and len(run.split()) >= words:
                    return run
    return None


def anchor_of(chunk: Chunk) -> dict[str, Any]:
    """The gold support of ``chunk``: its rel_path, its heading path as sent, and a snippet of its text when one
    is found that the chunk matches under the plugin's anchor matching (snippets required)."""
    if not chunk.rel_path:
        raise ChoiceError("a chunk without rel_path cannot be an anchor")
    anchor: dict[str, Any] = {"rel_path": chunk.rel_path}
    if chunk.heading_path is not None and normalize_heading_path(chunk.heading_path):
        anchor["heading_path"] = chunk.heading_path
    snippet = snippet_of(chunk.text)
    if snippet is not None and support_matches(chunk, GoldSupport(**anchor, snippets=[snippet]), True):
        anchor["snippets"] = [snippet]
    assert support_matches(chunk, GoldSupport(**anchor), True)
    return anchor


# --------------------------------------------------------------------------- one line


def _canonical(key: str) -> str:
    """The EvalCase field a line's key sets (aliases to their field)."""
    return (
        "gold_doc_ids"
        if key in DOC_ID_KEYS
        else {"query": "question", "referenceAnswer": "reference_answer"}.get(key, key)
    )


def _put(obj: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """``obj`` with ``key`` set: in place when present, else after the last key that comes before it in EvalCase."""
    if key in obj:
        return {k: (value if k == key else v) for k, v in obj.items()}
    order = list(EvalCase.model_fields)
    rank = order.index(_canonical(key))
    out: dict[str, Any] = {}
    placed = False
    keys = list(obj)
    last_before = max(
        (i for i, k in enumerate(keys) if _canonical(k) in order and order.index(_canonical(k)) < rank), default=-1
    )
    for i, k in enumerate(keys):
        out[k] = obj[k]
        if i == last_before:
            out[key] = value
            placed = True
    if not placed:
        out = {key: value, **out}
    return out


def labelled_line(obj: dict[str, Any], choice: Choice) -> tuple[dict[str, Any], list[str]]:
    """The line's object with ``choice``'s gold in it (other keys and their order kept), and notes on what changed.

    Supports replace the line's gold (gold_supports, gold_doc_ids or an alias, required_support_groups) and make
    an ``"answerable": false`` line answerable; unanswerable removes the gold (and a recency_conflict_rule, which
    needs it) and sets ``"answerable": false``. The result validates as an EvalCase (ChoiceError if not).
    """
    notes: list[str] = []
    out = dict(obj)
    gold_keys = ("gold_supports", *DOC_ID_KEYS, "required_support_groups")
    if choice.kind == "unanswerable":
        dropped = [k for k in (*gold_keys, "recency_conflict_rule") if k in out]
        for key in dropped:
            del out[key]
        if dropped:
            notes.append("removed " + ", ".join(dropped))
        out = _put(out, "answerable", False)
    elif choice.kind == "supports":
        doc_key = next((k for k in DOC_ID_KEYS if k in out), "gold_doc_ids")
        keep = "gold_supports" if choice.supports else doc_key
        for key in gold_keys:
            if (
                key in out
                and key != keep
                and not (key == "required_support_groups" and choice.support_groups is not None)
            ):
                del out[key]
                notes.append(f"removed {key}")
        if choice.supports:
            out = _put(out, "gold_supports", [dict(s) for s in choice.supports])
        else:
            out = _put(out, doc_key, list(choice.doc_ids))
        if choice.support_groups is not None:
            out = _put(out, "required_support_groups", [list(g) for g in choice.support_groups])
        if out.get("answerable") is False:
            out["answerable"] = True
            notes.append("answerable set to true")
    else:
        raise ValueError(f"a {choice.kind!r} choice labels nothing")
    try:
        EvalCase.model_validate(out)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "line"
        raise ChoiceError(f"the labelled line would not be valid ({where}: {first.get('msg')})") from None
    return out, notes


# --------------------------------------------------------------------------- the file


@dataclass
class EvalSetText:
    """An eval-set file as bytes split into lines (``\\n``; a ``\\r`` before it stays part of the line), so that a
    line can be replaced and everything else written back byte for byte."""

    path: Path
    lines: list[bytes]
    bom: bytes = b""
    #: the bytes last read or written (to notice a change made meanwhile by someone else)
    _seen: bytes = field(default=b"", repr=False)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> EvalSetText:
        real = Path(path).resolve()  # a symlinked eval set: its target is rewritten, the link stays
        try:
            data = real.read_bytes()
        except FileNotFoundError:
            raise LabelEditError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise LabelEditError(f"{path}: is a folder, not an eval-set file") from None
        except OSError as exc:
            raise LabelEditError(f"{path}: cannot read: {exc.strerror or exc}") from None
        bom = codecs.BOM_UTF8 if data.startswith(codecs.BOM_UTF8) else b""
        return cls(real, data[len(bom) :].split(b"\n"), bom, data)

    def data(self) -> bytes:
        return self.bom + b"\n".join(self.lines)

    def load(self, display: str) -> EvalFile:
        """The cases and bad lines, as the plugin reads them (evalset.py)."""
        return _load_lines(b"\n".join(self.lines), display)

    def object_at(self, line: int) -> dict[str, Any]:
        """The JSON object of a valid line (1-based), keys in file order."""
        obj, _ = safejson.loads(self.lines[line - 1].decode("utf-8"), surrogates="refuse", duplicate_keys="refuse")
        assert isinstance(obj, dict)
        return obj

    def replace(self, line: int, obj: dict[str, Any]) -> None:
        """Line ``line`` (1-based) becomes ``obj`` on one line, in the spacing style of the old line, its ``\\r`` kept."""
        old = self.lines[line - 1]
        compact = b'":"' in old and b'": ' not in old
        text = safejson.dumps(obj, separators=(",", ":") if compact else (", ", ": "))
        self.lines[line - 1] = text.encode("utf-8") + (b"\r" if old.endswith(b"\r") else b"")

    def line_text(self, line: int) -> str:
        """Line ``line`` (1-based) as it stands here (a replaced line included), as text."""
        return self.lines[line - 1].rstrip(b"\r").decode("utf-8", "replace")

    def write(self) -> None:
        """Write the file atomically (temp file + ``os.replace``, the old file's mode kept); LabelEditError when the
        file changed since it was read or last written here (nothing is written then)."""
        try:
            current = self.path.read_bytes()
        except OSError as exc:
            raise LabelEditError(f"{self.path}: cannot read it back before writing: {exc.strerror or exc}") from None
        if current != self._seen:
            raise LabelEditError(
                f"{self.path} was changed by something else while labelling; this label is not written"
            )
        data = self.data()
        try:
            mode: int | None = self.path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = None
        try:
            write_bytes_atomic(self.path, data, mode=mode, fsync=True)
        except OSError as exc:  # a read-only or full file system: the file is as it was
            raise LabelEditError(f"{self.path}: cannot write it: {exc.strerror or exc}") from None
        self._seen = data
