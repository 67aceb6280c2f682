"""Folder selection and BM25 retrieval over the chunked corpus.

Folder selection: every top-level folder whose best chunk scores at least
``FOLDER_RATIO`` of the best score overall is selected, and the top K chunks
are taken from the selected folders only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from pytest_rageval.demo.bm25 import BM25Index, tokenize
from pytest_rageval.demo.chunker import NoteChunk
from pytest_rageval.demo.notes import load_chunks

FOLDER_RATIO = 0.5


@dataclass(frozen=True)
class Corpus:
    """Chunks, their token sets and the BM25 index over them."""

    chunks: tuple[NoteChunk, ...]
    token_sets: tuple[frozenset[str], ...]
    index: BM25Index

    @classmethod
    def build(cls, chunks: Sequence[NoteChunk]) -> "Corpus":
        documents = [tokenize(index_text(chunk)) for chunk in chunks]
        return cls(tuple(chunks), tuple(frozenset(d) for d in documents), BM25Index.build(documents))


@dataclass(frozen=True)
class Hit:
    """A retrieved chunk with its BM25 score, 1-based rank and position in the corpus."""

    chunk: NoteChunk
    score: float
    rank: int
    index: int


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


def retrieve(question: str, k: int, corpus: Corpus | None = None) -> Retrieval:
    """Top ``k`` chunks (score > 0) within the selected folders, best first; ties by path order."""
    corpus = corpus or default_corpus()
    terms = tuple(tokenize(question))
    scores = corpus.index.scores(terms)
    folders = select_folders(corpus.chunks, scores)
    allowed = set(folders)
    order = sorted(
        (i for i, s in enumerate(scores) if s > 0.0 and corpus.chunks[i].folder in allowed),
        key=lambda i: (-scores[i], i),
    )[:k]
    hits = tuple(Hit(corpus.chunks[i], scores[i], rank, i) for rank, i in enumerate(order, start=1))
    return Retrieval(terms, hits, tuple(folders))
