"""Extractive answers: the best query-bearing sentences of the top chunks."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .bm25 import tokenize
from .retrieval import Hit

REFUSAL = "I could not find this in the notes."
MAX_SOURCES = 4
SOURCE_RATIO = 0.35
SECOND_SENTENCE_RATIO = 0.75
SENTENCE_RATIO = 0.5
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


@dataclass(frozen=True)
class Extract:
    """The composed answer and the hits it was taken from."""

    answer: str
    sources: tuple[Hit, ...]


def sentences(text: str) -> list[str]:
    """Split chunk text into sentences (each line, then sentence punctuation)."""
    found: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if line:
            found.extend(part.strip() for part in _SENTENCE_END.split(line) if part.strip())
    return found


def _scored(terms: set[str], hit: Hit, idf: Callable[[str], float]) -> list[tuple[float, int, str]]:
    """(score, position, sentence) for the sentences that hold a query term, best first.

    A sentence is scored with its section's headings as context (``## Tally Vote``
    makes "It passed with 58% For" an answer about the Tally vote), but only a
    sentence holding a query term of its own is a candidate. Scores are exact sums
    (``math.fsum``): a plain sum over a set follows its iteration order, which depends
    on the hash seed, and the last bit decided ties between sentences.
    """
    context = set(tokenize(hit.chunk.heading_path))
    scored = []
    for position, sentence in enumerate(sentences(hit.chunk.text)):
        own = terms & set(tokenize(sentence))
        if own:
            score = math.fsum(idf(t) for t in own | (terms & context))
            scored.append((score, position, sentence))
    return sorted(scored, key=lambda item: (-item[0], item[1]))


def _pick(scored: list[tuple[float, int, str]], floor: float) -> list[str]:
    """A chunk's best sentence, plus the runner-up when it is nearly as good, in text order."""
    kept = [item for item in scored if item[0] >= floor]
    if not kept:
        return []
    chosen = [kept[0]]
    if len(kept) > 1 and kept[1][0] >= SECOND_SENTENCE_RATIO * kept[0][0]:
        chosen.append(kept[1])
    return [sentence for _, _, sentence in sorted(chosen, key=lambda item: item[1])]


def compose(terms: Sequence[str], hits: Sequence[Hit], idf: Callable[[str], float]) -> Extract:
    """Answer from the top hits (those scoring at least ``SOURCE_RATIO`` of the best hit).

    Each such hit contributes its best sentences, provided they score at least
    ``SENTENCE_RATIO`` of the best sentence overall; the hits that contribute are the sources.
    """
    if not hits:
        return Extract(REFUSAL, ())
    wanted = set(terms)
    top = hits[0].score
    candidates = [hit for hit in hits[:MAX_SOURCES] if hit.score >= SOURCE_RATIO * top]
    scored = [(hit, _scored(wanted, hit, idf)) for hit in candidates]
    best = max((items[0][0] for _, items in scored if items), default=0.0)
    parts: list[str] = []
    sources: list[Hit] = []
    for hit, items in scored:
        chosen = _pick(items, SENTENCE_RATIO * best)
        if chosen:
            parts.extend(chosen)
            sources.append(hit)
    if not parts:
        return Extract(REFUSAL, ())
    return Extract(" ".join(parts), tuple(sources))
