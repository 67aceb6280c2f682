"""An HTTP question-answering service over the notes in docs/, standard library only.

``POST /api/v1/ask`` with ``{"question": ..., "k": 5}`` answers ``{"answer", "abstained", "debug": {"retrieved_chunks":
[{"chunk_id", "doc_id", "rel_path", "heading_path", "score_final", "text", "rank"}]}}``, where ``heading_path`` is the
list of headings above the chunk (``["Security Council", "Powers"]``). Each note is cut at its headings, the chunks are
ranked by BM25 over their headings and text, and the answer is the best sentences of the top chunks (answering.py).

Run it with ``python service.py --port 8765`` (``--port 0`` picks a free port); it prints the URL it serves.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from answering import REFUSAL, answer, words

DOCS = Path(__file__).parent / "docs"
TOP_K = 5  # the most chunks an answer is taken from, whatever k the request asks for
K1, B = 1.5, 0.75  # BM25's usual constants


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    rel_path: str
    heading_path: list[str]
    text: str


def chunks_of(path: Path) -> list[Chunk]:
    """One chunk per section of a note: the text under a heading, with the headings above it (front matter skipped)."""
    rel_path = path.relative_to(DOCS).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    meta: dict[str, str] = {}
    if lines and lines[0] == "---":
        end = lines.index("---", 1)
        meta = dict(line.split(": ", 1) for line in lines[1:end] if ": " in line)
        lines = lines[end + 1 :]
    doc_id = meta.get("id", rel_path)
    found: list[Chunk] = []
    headings: list[str] = []
    body: list[str] = []

    def close() -> None:
        if headings and any(line.strip() for line in body):
            found.append(Chunk(doc_id, rel_path, list(headings), "\n".join(body).strip()))

    for line in lines:
        if line.startswith("#"):
            close()
            level = len(line) - len(line.lstrip("#"))
            headings[level - 1 :] = [line.lstrip("#").strip()]
            body = []
        else:
            body.append(line)
    close()
    return found


CHUNKS = [chunk for path in sorted(DOCS.rglob("*.md")) for chunk in chunks_of(path)]
_TERMS = [Counter(words(" ".join([*chunk.heading_path, chunk.text]))) for chunk in CHUNKS]
_LENGTH = sum(sum(terms.values()) for terms in _TERMS) / len(_TERMS)
_DF = Counter(term for terms in _TERMS for term in terms)
VOCABULARY = set(_DF)


def _idf(term: str) -> float:
    return math.log(1 + (len(CHUNKS) - _DF[term] + 0.5) / (_DF[term] + 0.5))


def search(question: str, k: int) -> list[tuple[float, Chunk]]:
    """The ``k`` best chunks by BM25 (ties in corpus order), scoring above zero."""
    asked = set(words(question))
    scored = []
    for index, terms in enumerate(_TERMS):
        size = sum(terms.values())
        score = math.fsum(
            _idf(t) * terms[t] * (K1 + 1) / (terms[t] + K1 * (1 - B + B * size / _LENGTH))
            for t in sorted(asked)
            if t in terms
        )
        if score > 0:
            scored.append((-score, index))
    return [(-score, CHUNKS[index]) for score, index in sorted(scored)[:k]]


def ask(question: str, k: int) -> dict[str, Any]:
    """The response to one question."""
    found = search(question, min(k, TOP_K))
    reply = answer(question, [(" ".join(chunk.heading_path), chunk.text) for _, chunk in found], VOCABULARY)
    retrieved = [
        {
            "chunk_id": f"{chunk.doc_id}#{CHUNKS.index(chunk)}",
            "doc_id": chunk.doc_id,
            "rel_path": chunk.rel_path,
            "heading_path": chunk.heading_path,
            "score_final": round(score, 6),
            "text": chunk.text,
            "rank": rank,
        }
        for rank, (score, chunk) in enumerate(found, start=1)
    ]
    return {"answer": reply, "abstained": reply == REFUSAL, "debug": {"retrieved_chunks": retrieved}}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        if self.path.split("?")[0] != "/api/v1/ask":
            self.send_error(404)
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            question, k = str(body["question"]), int(body.get("k", TOP_K))
        except (ValueError, KeyError, TypeError):
            self.send_error(400, 'expected {"question": ..., "k": ...}')
            return
        data = json.dumps(ask(question, k)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: one line per request is noise here
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"serving on http://127.0.0.1:{server.server_port}/api/v1/ask", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
