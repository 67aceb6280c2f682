"""What a hostile RAG sends, per fault: a raw HTTP body for the loopback ask server, or the Python value a callable returns.

Imported by tests/faults/test_fault_content.py and by the callable target it writes (from this folder).
"""

from __future__ import annotations

import json
from typing import Any

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}
#: Screen clear, a fake pass line after a carriage return, a window title and a clipboard write (OSC 52).
ANSI = "\x1b[2J\x1b[H\rALL TESTS PASSED\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x9b31m"
BIG = 50 * 1024 * 1024
DEEP = 100_000


def _chunk(**extra: Any) -> dict[str, Any]:
    return {
        "chunk_id": "a#1",
        "rel_path": "docs/a.md",
        "heading_path": "# A",
        "text": "A text.",
        "rank": 1,
        "score_final": 0.9,
        **extra,
    }


def _deep() -> list[Any]:
    value: list[Any] = []
    for _ in range(DEEP):
        value = [value]
    return value


def body(fault: str, question: str | None) -> dict[str, Any]:
    """The response to ``question`` as a Python value; the fault only for the question "bad"."""
    answer, chunk, extra = "A answer.", _chunk(), {}
    if question == "bad":
        if fault == "surrogate_answer":
            answer = "A \ud800 answer."
        elif fault == "surrogate_chunk_extra":
            chunk = _chunk(source="x\udc80y")
        elif fault == "surrogate_timings_key":
            extra = {"timings": {"retrieval\ud800": 5.0}}
        elif fault == "nan_score":
            chunk = _chunk(score_final=float("nan"))
        elif fault == "infinity_score":
            chunk = _chunk(score_final=float("-inf"), score_vector=float("inf"))
        elif fault == "deep_nesting":
            chunk = _chunk(meta=_deep())
        elif fault == "huge_integer":
            chunk = _chunk(score_final=10**5000)
        elif fault == "ansi_answer":
            answer, chunk = f"Answer {ANSI} end.", _chunk(rel_path="docs/other.md")  # misses the gold: fails, shows it
        elif fault == "big_answer":
            answer = "A" * BIG
    return {"answer": answer, "references": [chunk], "debug": {"retrieved_chunks": [chunk]}, **extra}


def http_reply(fault: str, question: str | None) -> Any:
    """The loopback server's reply: (status, raw text) so NaN, lone surrogates and huge values go out as written."""
    if question == "bad" and fault == "ansi_error":
        return (400, f"upstream failed: {ANSI}")  # raw bytes, not JSON-escaped
    value = body(fault, question)
    if question == "bad" and fault == "deep_nesting":
        value["debug"]["retrieved_chunks"][0]["meta"] = "@@DEEP@@"
        return (200, json.dumps(value).replace('"@@DEEP@@"', "[" * DEEP + "]" * DEEP))
    if question == "bad" and fault == "huge_integer":
        value["debug"]["retrieved_chunks"][0]["score_final"] = "@@INT@@"
        return (200, json.dumps(value).replace('"@@INT@@"', "1" * 5000))
    return (200, json.dumps(value))  # NaN/Infinity written bare, surrogates as \\ud800 escapes


def call(fault: str, question: str) -> Any:
    """What the callable target returns (or raises)."""
    if question == "bad" and fault == "ansi_error":
        raise RuntimeError(f"backend said: {ANSI}")
    return body(fault, question)
