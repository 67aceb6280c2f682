"""When the demo RAG abstains instead of answering.

It abstains when nothing is retrieved, when the top ``COVERAGE_DEPTH`` chunks
hold less than ``MIN_COVERAGE`` of the question's idf mass (a word the notes
never use weighs the most, so a question built around one is not covered), or
when the question names something the notes never mention: a capitalised
word inside a sentence, other than month and day names.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from .bm25 import tokenize
from .retrieval import Corpus, Hit, Retrieval

MIN_COVERAGE = 0.5
COVERAGE_DEPTH = 3
CALENDAR_WORDS = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*")


def coverage(corpus: Corpus, terms: Sequence[str], hits: Sequence[Hit]) -> float:
    """Share of the query's idf mass whose terms occur in the given hits (0 without terms).

    Sums are exact (``math.fsum``), so the set's hash-seed-dependent order cannot move the result.
    """
    distinct = set(terms)
    total = math.fsum(corpus.index.idf(t) for t in distinct)
    if total <= 0.0:
        return 0.0
    seen: set[str] = set()
    for hit in hits:
        seen |= corpus.token_sets[hit.index]
    return math.fsum(corpus.index.idf(t) for t in distinct if t in seen) / total


def unknown_names(question: str, corpus: Corpus) -> list[str]:
    """Capitalised words (not opening a sentence) with a term that never occurs in the notes."""
    unknown = []
    for match in _NAME.finditer(question.strip()):
        word = match.group(0)
        if word.lower() in CALENDAR_WORDS:
            continue
        if any(corpus.index.doc_freq.get(t, 0) == 0 for t in tokenize(word)):
            unknown.append(word)
    return unknown


def should_abstain(question: str, retrieval: Retrieval, corpus: Corpus) -> bool:
    """True when the notes do not support an answer to ``question``."""
    if not retrieval.hits:
        return True
    if coverage(corpus, retrieval.terms, retrieval.hits[:COVERAGE_DEPTH]) < MIN_COVERAGE:
        return True
    return bool(unknown_names(question, corpus))
