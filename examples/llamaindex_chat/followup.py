"""Follow-up questions made to stand alone, no language model: a question that refers back ("its budget", "that
proposal", "who signed it?") gets the subject of the conversation's last question that named one. This is where a
chat app asks its LLM to condense the conversation into a standalone question."""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Words by which a question refers to something an earlier turn named.
REFERRING = frozenset("it its it's they them their theirs that this those these he she his her".split())
_WORD = re.compile(r"[A-Za-z0-9']+")
_NAME = re.compile(r"\b(?:[A-Z][A-Za-z0-9]*|of|the)(?:\s+(?:[A-Z][A-Za-z0-9]*|of))*")
#: Capitalised words that start a question rather than name something.
_ASKING = frozenset("what who whom whose which when where why how did does do is are was were can could".split())


def refers_back(question: str) -> bool:
    """Whether ``question`` leans on an earlier turn (it uses a referring word such as "its")."""
    return any(word.lower() in REFERRING for word in _WORD.findall(question))


def subject(question: str) -> str:
    """What ``question`` is about: its capitalised names ("Gaming Catalyst Program", "STIP"), else its own text."""
    names = []
    for match in _NAME.finditer(question):
        words = [w for w in match.group().split() if w.lower() not in _ASKING]
        while words and words[0].islower():
            words.pop(0)
        while words and words[-1].islower():
            words.pop()
        if words:
            names.append(" ".join(words))
    return " ".join(names) or question


def standalone(question: str, earlier: Sequence[str]) -> str:
    """``question`` made to stand alone given the ``earlier`` user questions of the conversation (oldest first):
    unchanged when it does not refer back, else followed by the subject of the last earlier question that set one
    (that did not refer back itself)."""
    if not refers_back(question):
        return question
    setting = [previous for previous in earlier if not refers_back(previous)]
    return f"{question} ({subject(setting[-1])})" if setting else question
