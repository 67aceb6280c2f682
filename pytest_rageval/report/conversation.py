"""What every report says of a conversation (a record with ``turns``): which turns failed, the history each was
sent, and the failing turns' own failure text. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pytest_rageval.evaluation.thresholds import shorten

__all__ = ["failed_turns", "format_conversation_failure", "history_lines", "is_conversation", "turn_label"]

#: Messages of the history shown per failing turn (the latest ones; the rest are counted).
SHOWN_HISTORY = 6


def is_conversation(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a conversation's: it holds its turns."""
    return isinstance(record.get("turns"), list)


def turns_of(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in record.get("turns") or [] if isinstance(t, Mapping)]


def failed_turns(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The turns that missed a threshold or errored, in order."""
    return [t for t in turns_of(record) if t.get("outcome") in ("failed", "error")]


def turn_label(turn: Mapping[str, Any]) -> str:
    """``turn 2``."""
    return f"turn {turn.get('turn', '?')}"


def history_lines(history: Any, *, indent: str = "  ") -> list[str]:
    """The history a turn was sent, one shortened message a line (``user: ...``, ``assistant: ...``)."""
    messages = [m for m in history if isinstance(m, Mapping)] if isinstance(history, list) else []
    if not messages:
        return [f"{indent}(none: the first turn)"]
    lines = []
    if len(messages) > SHOWN_HISTORY:
        lines.append(f"{indent}... {len(messages) - SHOWN_HISTORY} earlier messages")
    for message in messages[-SHOWN_HISTORY:]:
        lines.append(f"{indent}{message.get('role')}: {shorten(str(message.get('content') or ''), 160) or '(empty)'}")
    return lines


def format_conversation_failure(record: Mapping[str, Any], format_turn: Callable[[Mapping[str, Any]], str]) -> str:
    """A failing conversation's message: its head (which turns failed, of how many, with which history), then for
    each failing turn its question, the history it was sent and ``format_turn`` of it (missed metrics, answer,
    retrieval, judge notes)."""
    turns = turns_of(record)
    failing = failed_turns(record)
    names = ", ".join(turn_label(t) for t in failing) or "no turn"
    head = (
        f"[{record.get('test_case_id')}] conversation of {len(turns)} turns "
        f"({record.get('history') or 'live'} history): {names} failed"
    )
    parts = [head]
    for turn in failing:
        body = format_turn({**turn, "test_case_id": f"{record.get('test_case_id')} {turn_label(turn)}"})
        parts.append("\n".join([f"--- {turn_label(turn)}: {shorten(turn.get('question'), 200)}", "history sent:"]))
        parts[-1] += "\n" + "\n".join(history_lines(turn.get("history")))
        parts.append(body)
    return "\n".join(parts)
