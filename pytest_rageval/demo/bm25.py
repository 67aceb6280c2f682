"""Okapi BM25 over chunks, standard library only."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

K1 = 1.5
B = 0.75

STOPWORDS = frozenset(
    """a an the of to in on for and or is are was were be been being by with at as it its
    this that these those from what which who whom whose when where why how did does do done
    has have had much many there their they them he she his her into about than then so if
    i we you me my our your can could would should will shall may might any all some
    tell please also just one get got""".split()
)
_TOKEN = re.compile(r"[a-z0-9]+")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3})")


def _stem(token: str) -> str:
    """A tiny suffix stripper, applied alike to notes and questions.

    ``votes``/``voted``/``voting`` -> ``vot``, ``policies`` -> ``policy``; digits are kept as they are.
    """
    if token.isdigit():
        return token
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    for suffix in ("ing", "ed"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            token = token[: -len(suffix)]
            break
    if len(token) > 3 and token.endswith("e"):
        token = token[:-1]
    return token


def tokenize(text: str) -> list[str]:
    """Lowercase alphanumeric stems without stopwords and single letters; ``50,000,000`` stays one token."""
    cleaned = _THOUSANDS.sub("", text.lower())
    return [_stem(t) for t in _TOKEN.findall(cleaned) if t not in STOPWORDS and (len(t) > 1 or t.isdigit())]


@dataclass
class BM25Index:
    """An Okapi BM25 index over pre-tokenized documents."""

    doc_terms: list[Counter[str]]
    doc_lengths: list[int]
    avg_length: float
    doc_freq: Counter[str]

    @classmethod
    def build(cls, documents: Sequence[Sequence[str]]) -> BM25Index:
        terms = [Counter(doc) for doc in documents]
        lengths = [len(doc) for doc in documents]
        freq: Counter[str] = Counter()
        for counter in terms:
            freq.update(counter.keys())
        avg = (sum(lengths) / len(lengths)) if lengths else 0.0
        return cls(terms, lengths, avg or 1.0, freq)

    @property
    def size(self) -> int:
        return len(self.doc_terms)

    def idf(self, term: str) -> float:
        """Okapi idf with the +1 inside the log (never negative); unknown terms get the largest idf."""
        df = self.doc_freq.get(term, 0)
        return math.log(1.0 + (self.size - df + 0.5) / (df + 0.5))

    def score(self, query_terms: Sequence[str], index: int) -> float:
        """BM25 score of one document for the distinct query terms (an exact sum: no set-order dependence)."""
        counts = self.doc_terms[index]
        norm = K1 * (1.0 - B + B * self.doc_lengths[index] / self.avg_length)
        parts = []
        for term in set(query_terms):
            tf = counts.get(term, 0)
            if tf:
                parts.append(self.idf(term) * tf * (K1 + 1.0) / (tf + norm))
        return math.fsum(parts)

    def scores(self, query_terms: Sequence[str]) -> list[float]:
        """BM25 scores of every document, in index order."""
        return [self.score(query_terms, i) for i in range(self.size)]
