"""The demo's conversation mode: a follow-up question resolved from the history it is sent.

A follow-up such as "Who proposed it?" or "When did its Tally vote end?" names no subject; the demo takes the
subject of the latest earlier user turn that has one (its longest run of capitalised words, such as "Gaming
Catalyst Program" or "Security Council") and puts it in place of "it", "its", "that proposal", "they", ...
before retrieving. The history is ``[{"role": "user" | "assistant", "content": str}, ...]``, the earlier turns in
order; only the user turns are read, so a wrong earlier answer does not change what a follow-up retrieves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["resolve_followup", "subject_of"]

#: The words of a follow-up that stand for the previous turn's subject.
_REFERRING = re.compile(
    r"\b(?:that|this|the same) (?:proposal|program|programme|council|report)\b|\b(?:its|it|they|their|them)\b",
    re.IGNORECASE,
)
#: Capitalised words and acronyms (``Short-Term``, ``GCP``, ``Q2``), joined by "of", "the", "for" inside a run.
_WORD = re.compile(r"[A-Za-z0-9][\w'-]*")
_JOINERS = frozenset({"of", "the", "for"})
#: Words that start a question and are capitalised only for that.
_OPENERS = frozenset(
    "what who when where which why how did does do is was were are can could should would will has have".split()
)


def subject_of(question: str) -> str | None:
    """The longest run of capitalised words of ``question`` (two or more, or an acronym; its first word only when
    no question word), or None."""
    words = _WORD.findall(question)
    best: list[str] = []
    run: list[str] = []
    for index, word in enumerate(words):
        capital = word[0].isupper() and not (index == 0 and word.lower() in _OPENERS)
        if capital:
            run.append(word)
        elif run and word.lower() in _JOINERS:
            run.append(word)
            continue
        else:
            run = []
            continue
        trimmed = _trim(run)
        if len(trimmed) > len(best) and _names_something(trimmed):
            best = trimmed
    return " ".join(best) or None


def _names_something(run: list[str]) -> bool:
    """Two words or more, or an acronym ("GCP"): a single capitalised word ("Tally") is no subject."""
    return len(run) > 1 or (len(run[0]) > 1 and run[0].isupper())


def _trim(run: list[str]) -> list[str]:
    """A run without the joining words it ends with."""
    end = len(run)
    while end and run[end - 1].lower() in _JOINERS:
        end -= 1
    return run[:end]


def resolve_followup(question: str, history: Any) -> str:
    """``question`` with the words that refer back replaced by the subject of the latest earlier user turn that has
    one; unchanged when nothing refers back, the history holds no subject, or it is not a list of messages."""
    if not _REFERRING.search(question) or not isinstance(history, Sequence) or isinstance(history, str):
        return question
    users = [m.get("content") for m in history if isinstance(m, dict) and m.get("role") == "user"]
    for content in reversed(users):
        subject = subject_of(content) if isinstance(content, str) else None
        if subject:
            return _REFERRING.sub(f"the {subject}", question)
    return question
