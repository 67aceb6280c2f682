"""Text from outside made safe to show and small enough to keep.

Answers, chunk text, judge reasoning and error bodies come from systems the
plugin does not trust. :func:`terminal_safe` makes such text harmless on a
terminal (no escape sequence can clear the screen, move the cursor, set the
window title or write the clipboard); :class:`Limits` and :func:`cap` bound its
size with a note saying what was cut; :func:`error_message` turns an
unexpected exception into one readable line.

Pure: no pytest, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import defaults

__all__ = ["MAX_NOTES", "Limits", "cap", "error_message", "keep_notes", "terminal_safe"]

#: Control characters a terminal acts on: C0 (but tab and newline), DEL, C1, and the
#: Unicode line/paragraph separators and bidirectional overrides that reorder what is shown.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_NEWLINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r"}

#: Most notes one case keeps (a response with 10,000 NaN scores gets a count, not 10,000 lines).
MAX_NOTES = 20


def _visible(match: re.Match[str]) -> str:
    char = match[0]
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: Any, *, multiline: bool = True) -> str:
    """``text`` with every control character shown as a visible escape (ESC as the 4 characters ``\\x1b``).

    Tab is kept; newline is kept when ``multiline`` (a message meant to span
    lines), else shown as ``\\n`` (an id, a one-line summary entry). So no CSI
    or OSC sequence, carriage return or backspace reaches the terminal raw; a
    lone surrogate (unprintable as UTF-8) becomes U+FFFD.
    """
    text = text if isinstance(text, str) else str(text)
    text = _SURROGATE.sub("\ufffd", text)  # a lone surrogate cannot be written to a UTF-8 terminal at all
    return (_CONTROL if multiline else _CONTROL_OR_NEWLINE).sub(_visible, text)


@dataclass(frozen=True)
class Limits:
    """Most characters kept of each text from outside; what is longer is cut with a note."""

    answer: int = defaults.MAX_ANSWER_CHARS
    chunk_text: int = defaults.MAX_CHUNK_CHARS
    reasoning: int = defaults.MAX_REASONING_CHARS
    error: int = defaults.MAX_ERROR_CHARS


def cap(text: str, limit: int, what: str) -> tuple[str, str | None]:
    """``text`` cut to ``limit`` characters, and a note when it was cut (else None)."""
    if len(text) <= limit:
        return text, None
    return text[:limit], f"{what} cut from {len(text):,} to {limit:,} characters"


def keep_notes(notes: Iterable[str], limit: int = MAX_NOTES) -> list[str]:
    """Distinct notes in order, at most ``limit`` of them (then one line counting the rest)."""
    unique = list(dict.fromkeys(notes))
    if len(unique) <= limit:
        return unique
    return [*unique[: limit - 1], f"... and {len(unique) - limit + 1} more notes"]


def error_message(exc: BaseException, limit: int = 500) -> str:
    """``Type: message`` of ``exc`` on one line, cut to ``limit`` characters (never a bare location)."""
    try:
        text = " ".join(str(exc)[: limit * 4].split())
    except Exception:
        text = ""
    text, _ = cap(text, limit, "message")
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
