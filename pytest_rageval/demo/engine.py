"""The demo RAG's ``ask``: retrieve, decide whether to abstain, answer with references.

When to abstain is decided in ``abstention`` (``abstain_reason`` is then
``"no_relevant_context"``).

The response has the default shape::

    {"answer", "references", "abstained", "abstain_reason",
     "debug": {"retrieved_chunks": [...], "folder_selection": {"selected_folders": [...]}},
     "timings": {"retrieval_ms", "generation_ms"}}
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from .abstention import COVERAGE_DEPTH, should_abstain
from .answerer import REFUSAL, compose
from .followup import resolve_followup
from .retrieval import Hit, default_corpus, retrieve

DEFAULT_K = 5
MAX_K = 100
ABSTAIN_REASON = "no_relevant_context"


def _k_from(params: Mapping[str, Any]) -> int:
    """Retrieval depth: ``top_k`` when given (a config-matrix knob), else ``k``, else 5.

    Rejects non-integers and values below 1; caps at ``MAX_K``.
    """
    value = params.get("top_k")
    if value is None:
        value = params.get("k")
    if value is None:
        return DEFAULT_K
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"k must be a positive integer, got {value!r}")
    return min(value, MAX_K)


def _alpha_from(params: Mapping[str, Any]) -> float:
    """Hybrid weight ``alpha``: a number from 0 (BM25 only, the default) to 1 (title match only)."""
    value = params.get("alpha")
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"alpha must be a number from 0 to 1, got {value!r}")
    return float(value)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def chunk_dict(hit: Hit) -> dict[str, Any]:
    """A hit in the default chunk shape.

    BM25 only: ``score_lexical`` = ``score_final`` = the BM25 score, ``score_vector`` null.
    Hybrid: ``score_lexical`` is BM25, ``score_vector`` the title match (the second
    signal, in the slot a dense retriever's similarity takes), ``score_final`` the hybrid.
    """
    chunk = hit.chunk
    score = round(hit.score, 6)
    hybrid = hit.title is not None
    return {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "rel_path": chunk.rel_path,
        "heading_path": chunk.heading_path,
        "score_vector": _rounded(hit.title),
        "score_lexical": _rounded(hit.lexical) if hybrid else score,
        "score_final": score,
        "text": chunk.text,
        "rank": hit.rank,
    }


def ask(question: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Answer ``question`` from the bundled notes.

    ``params``: ``k`` (default 5) or ``top_k`` (wins over ``k``), the number of
    chunks retrieved; ``alpha`` (default 0), the weight of the title match in the
    hybrid score (``retrieval``); ``history``, the earlier turns of a conversation (``[{"role", "content"}]``),
    from which a follow-up's "it", "its", "that proposal", "they" are resolved (``followup``; the question
    retrieved with is ``debug.resolved_question``); other keys are accepted and ignored. Thread-safe.
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    asked = question
    question = resolve_followup(question, (params or {}).get("history"))
    k = _k_from(params or {})
    alpha = _alpha_from(params or {})
    corpus = default_corpus()

    started = time.perf_counter()
    # at least COVERAGE_DEPTH deep, so that whether to abstain does not depend on k
    retrieval = retrieve(question, max(k, COVERAGE_DEPTH), corpus, alpha)
    hits = retrieval.hits[:k]
    retrieved_at = time.perf_counter()

    abstained = should_abstain(question, retrieval, corpus)
    if abstained:
        answer, references = REFUSAL, []
    else:
        extract = compose(retrieval.terms, hits, corpus.index.idf)
        answer = extract.answer
        references = [chunk_dict(hit) for hit in extract.sources]
        abstained = not references
    finished = time.perf_counter()

    return {
        "answer": answer,
        "references": references,
        "abstained": abstained,
        "abstain_reason": ABSTAIN_REASON if abstained else None,
        "debug": {
            "retrieved_chunks": [chunk_dict(hit) for hit in hits],
            "folder_selection": {"selected_folders": list(retrieval.selected_folders)},
            **({"resolved_question": question} if question != asked else {}),
        },
        "timings": {
            "retrieval_ms": round((retrieved_at - started) * 1000.0, 3),
            "generation_ms": round((finished - retrieved_at) * 1000.0, 3),
        },
    }
