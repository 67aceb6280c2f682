"""Extractive answers, no language model: the sentences of the top passages that share the most words with the
question, or a refusal when the passages do not cover the question (or it names something the notes never do)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

REFUSAL = "I could not find this in the notes."
MIN_COVERAGE = 0.5  # share of the question's words the top passages must hold
PASSAGES = 3  # how many of the top passages answer
SENTENCES = 4  # at most this many sentences in an answer
SENTENCE_RATIO = 0.6  # a sentence joins the answer when it scores this share of the best one

STOPWORDS = frozenset(
    "a an and any are as at be been by can could did do does for from had has have how i in into is it its much many "
    "of on or that the their there these this those to was were what when where which who whom whose why will with".split()
)
CALENDAR = frozenset("january february march april may june july august september october november december".split())
_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_NAME = re.compile(r"(?<!^)\b[A-Z][A-Za-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_FRONT_MATTER = re.compile(r"^(?:---|[a-z_]+: .*)$")


def words(text: str) -> list[str]:
    """The lower-case words of ``text`` without the commonest ones (numbers such as 50,000,000 kept whole)."""
    return [word for word in _WORD.findall(text.lower()) if word not in STOPWORDS]


def sentences(text: str) -> list[str]:
    """The sentences of a passage: each line (headings, front matter and list marks dropped), split at full stops."""
    found: list[str] = []
    for line in text.splitlines():
        line = line.strip().lstrip("-*+ ").strip()
        if not line or line.startswith("#") or _FRONT_MATTER.match(line):
            continue
        found.extend(part.strip() for part in _SENTENCE_END.split(line) if part.strip())
    return found


def answer(question: str, passages: Sequence[tuple[str, str]], vocabulary: Iterable[str]) -> str:
    """The answer from ``passages`` (``(heading, text)`` in rank order); ``vocabulary`` holds every word of the notes."""
    known = set(vocabulary)  # a name the notes never use (a capitalised word inside the question) is not in them
    asked = set(words(question))
    names = [
        word
        for word in _NAME.findall(question)
        if word.lower() not in CALENDAR and any(w not in known for w in words(word))
    ]
    covered = {word for heading, text in passages[:PASSAGES] for word in words(f"{heading} {text}")}
    if not asked or names or len(asked & covered) < MIN_COVERAGE * len(asked):
        return REFUSAL
    scored = []
    for rank, (heading, text) in enumerate(passages[:PASSAGES]):
        context = asked & set(words(heading))
        for position, sentence in enumerate(sentences(text)):
            own = asked & set(words(sentence))
            if own:
                scored.append((len(own) + 0.5 * len(context - own), rank, position, sentence))
    if not scored:
        return REFUSAL
    best = max(score for score, *_ in scored)
    chosen = sorted(
        (item for item in scored if item[0] >= SENTENCE_RATIO * best), key=lambda item: (-item[0], item[1], item[2])
    )
    picked = sorted(chosen[:SENTENCES], key=lambda item: (item[1], item[2]))
    return " ".join(sentence for *_, sentence in picked)
