"""The bundled offline demo RAG: a small markdown corpus, BM25 retrieval, extractive answers.

The corpus (``demo/corpus/**/*.md``) is a fictional DAO-governance world
(incentive programs, treasury reports, Security Council elections, forum
posts); names, dates and amounts are made up. Each note starts with front
matter between ``---`` lines::

    ---
    id: stip-2023          # the note's stable doc id; every chunk's ``doc_id``
    date: 2023-10-14       # publication date (kept as chunk metadata)
    author: ...
    ---
    # Title
    ## Section

Pipeline: heading-aware chunking (``chunker``, one chunk per section, doc id
from the front matter), one BM25 index built lazily per process (``bm25``,
``retrieval``), folder selection (folders whose best chunk scores at least half
the best score), abstention (``abstention``: too little of the question's
vocabulary in the top chunks, or a name the notes never mention), and an
extractive answer from the best sentences of the top chunks (``answerer``),
which are cited in ``references``. ``engine.ask`` ties them together.

Params: ``k`` / ``top_k`` (the depth; the answer is built from the top-k
chunks) and ``alpha`` (0..1, default 0): the weight of a second signal, the
title match (how much of the question's idf mass is in the chunk's headings and
note file name), in a hybrid score ``(1 - alpha) * BM25 / best BM25 + alpha *
title match``. ``alpha`` = 0 is plain BM25, exactly as without the param.

Forum posts are dated and some contradict older notes (reporting cadence,
election schedule, GCP council), which gives the eval set its recency and
conflict questions (``eval_sets/demo.jsonl``).

Use it as a Python target (``pytest_rageval.demo:ask``) or over HTTP:
``python -m pytest_rageval.demo serve --port 8000`` then
``POST /api/v1/ask?debug=true`` with ``{"question": ..., "k": 5, "alpha": 0.3}``.
"""

from __future__ import annotations

from .engine import ask
from .server import make_server

__all__ = ["ask", "make_server"]
