"""Folder selection and BM25 retrieval over the chunked corpus.

Folder selection: every top-level folder whose best chunk scores at least
``FOLDER_RATIO`` of the best score overall is selected, and the top K chunks
are taken from the selected folders only.

Hybrid (``alpha`` > 0): the candidates (BM25 score > 0, selected folders) are
ranked by ``(1 - alpha) * BM25 / best BM25 + alpha * title match``, where the
title match is the share of the question's idf mass found in the chunk's
headings and note file name (``title_match``). ``alpha`` = 0 is plain BM25.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .bm25 import BM25Index, tokenize
from .chunker import NoteChunk
from .notes import load_chunks

FOLDER_RATIO = 0.5


@dataclass(frozen=True)
class Corpus:
    """Chunks, their token sets, their title token sets and the BM25 index over them."""

    chunks: tuple[NoteChunk, ...]
    token_sets: tuple[frozenset[str], ...]
    index: BM25Index
    title_sets: tuple[frozenset[str], ...] = ()

    @classmethod
    def build(cls, chunks: Sequence[NoteChunk]) -> Corpus:
        documents = [tokenize(index_text(chunk)) for chunk in chunks]
        titles = tuple(frozenset(tokenize(title_text(chunk))) for chunk in chunks)
        return cls(tuple(chunks), tuple(frozenset(d) for d in documents), BM25Index.build(documents), titles)


@dataclass(frozen=True)
class Hit:
    """A retrieved chunk with its score, 1-based rank and position in the corpus.

    ``score`` is what the hits are ranked by: the BM25 score, or with ``alpha`` > 0 the
    hybrid score; then ``lexical`` is the BM25 score and ``title`` the title match.
    """

    chunk: NoteChunk
    score: float
    rank: int
    index: int
    lexical: float | None = None
    title: float | None = None


@dataclass(frozen=True)
class Retrieval:
    """What one retrieval produced."""

    terms: tuple[str, ...]
    hits: tuple[Hit, ...]
    selected_folders: tuple[str, ...]


def index_text(chunk: NoteChunk) -> str:
    """The text that is indexed: heading titles (without ``#`` marks) and the section text."""
    titles = " ".join(part.lstrip("#").strip() for part in chunk.heading_path.split(" > "))
    return f"{titles}\n{chunk.text}"


def title_text(chunk: NoteChunk) -> str:
    """A chunk's title: its heading path and its note's file name (``stip-bridge.md`` -> ``stip bridge``)."""
    name = chunk.rel_path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return f"{chunk.heading_path} {name.replace('-', ' ')}"


def title_match(corpus: Corpus, terms: Sequence[str], index: int) -> float:
    """Share (0..1) of the question's idf mass whose terms occur in the chunk's title.

    Exact sums over the sorted distinct terms: no dependence on set order.
    """
    distinct = sorted(set(terms))
    total = math.fsum(corpus.index.idf(t) for t in distinct)
    if total <= 0.0:
        return 0.0
    title = corpus.title_sets[index]
    return math.fsum(corpus.index.idf(t) for t in distinct if t in title) / total


_BUILD_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _bundled_corpus() -> Corpus:
    return Corpus.build(load_chunks())


def default_corpus() -> Corpus:
    """The bundled corpus, chunked and indexed once per process (also under concurrent first calls)."""
    with _BUILD_LOCK:
        return _bundled_corpus()


def select_folders(chunks: Sequence[NoteChunk], scores: Sequence[float], ratio: float = FOLDER_RATIO) -> list[str]:
    """Folders whose best chunk scores at least ``ratio`` of the overall best, best first."""
    best: dict[str, float] = {}
    for chunk, score in zip(chunks, scores):
        best[chunk.folder] = max(score, best.get(chunk.folder, 0.0))
    top = max(best.values(), default=0.0)
    if top <= 0.0:
        return []
    chosen = [folder for folder, score in best.items() if score >= ratio * top]
    return sorted(chosen, key=lambda folder: (-best[folder], folder))


def retrieve(question: str, k: int, corpus: Corpus | None = None, alpha: float = 0.0) -> Retrieval:
    """Top ``k`` chunks (BM25 score > 0) within the selected folders, best first; ties by path order.

    Ranked by BM25, or with ``alpha`` > 0 by the hybrid score (module docstring); folders
    are selected by BM25 either way.
    """
    corpus = corpus or default_corpus()
    terms = tuple(tokenize(question))
    scores = corpus.index.scores(terms)
    folders = select_folders(corpus.chunks, scores)
    allowed = set(folders)
    candidates = [i for i, s in enumerate(scores) if s > 0.0 and corpus.chunks[i].folder in allowed]
    if alpha > 0.0:
        return _hybrid(corpus, terms, scores, candidates, k, alpha, tuple(folders))
    order = sorted(candidates, key=lambda i: (-scores[i], i))[:k]
    hits = tuple(Hit(corpus.chunks[i], scores[i], rank, i) for rank, i in enumerate(order, start=1))
    return Retrieval(terms, hits, tuple(folders))


def _hybrid(
    corpus: Corpus,
    terms: tuple[str, ...],
    scores: Sequence[float],
    candidates: Sequence[int],
    k: int,
    alpha: float,
    folders: tuple[str, ...],
) -> Retrieval:
    """The candidates ranked by ``(1 - alpha) * BM25 / best BM25 + alpha * title match``."""
    best = max((scores[i] for i in candidates), default=0.0)
    titles = {i: title_match(corpus, terms, i) for i in candidates}
    final = {i: (1.0 - alpha) * scores[i] / best + alpha * titles[i] for i in candidates}
    order = sorted(candidates, key=lambda i: (-final[i], -scores[i], i))[:k]
    hits = tuple(
        Hit(corpus.chunks[i], final[i], rank, i, lexical=scores[i], title=titles[i])
        for rank, i in enumerate(order, start=1)
    )
    return Retrieval(terms, hits, folders)
