"""``rageval inspect``: one question asked, the response shown as the metrics read it, and the gold that could
never match under the current mapping (reach.py), in the run's words."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pytest_rageval.errors import RagevalError
from pytest_rageval.evaluation.anchors import normalize_heading_path
from pytest_rageval.evaluation.evalset import load_eval_file
from pytest_rageval.evaluation.reach import Unreachable, shape_problems, unreachable_gold
from pytest_rageval.evaluation.schema import Chunk
from pytest_rageval.targets.protocol import RagCallError, RagClient

__all__ = ["InspectError", "inspect_target"]


class InspectError(RagevalError):
    """The call failed or the eval set cannot be read: the message says which and why."""


def _chunk_line(position: int, chunk: Chunk) -> str:
    heading = " > ".join(normalize_heading_path(chunk.heading_path)) or "(no heading path)"
    score = next((s for s in (chunk.score_final, chunk.score_lexical, chunk.score_vector) if s is not None), None)
    parts = [f"{position:>3}  {chunk.rel_path or '(no rel_path)'}", f"heading: {heading}"]
    if chunk.doc_id:
        parts.append(f"doc_id: {chunk.doc_id}")
    if score is not None:
        parts.append(f"score: {score:.4g}")
    return "  ".join(parts)


async def _ask(client: RagClient, question: str, k: int, params: dict[str, Any]) -> Any:
    try:
        return await client.aask(question, k=k, params=params)
    finally:
        await client.aclose()


def inspect_target(
    client: RagClient, question: str, *, k: int, params: dict[str, Any], eval_set: Path | None, docs_root: Path
) -> tuple[list[str], list[Unreachable | str]]:
    """The lines to print, and what can never match (empty without ``eval_set``)."""
    loaded = None
    if eval_set is not None:
        if not eval_set.is_file():
            raise InspectError(f"--eval-set {eval_set}: no such file")
        loaded = load_eval_file(eval_set, display=str(eval_set))
    try:
        reply = asyncio.run(_ask(client, question, k, params))
    except RagCallError as exc:
        raise InspectError(f"the call failed ({exc.kind}): {exc.message}") from None
    response = reply.response
    lines = [f"answer: {response.answer!r}" if response.answer else "answer: (empty)"]
    if response.abstained is not None:
        lines.append(f"abstained: {str(response.abstained).lower()}")
    chunks = response.retrieved_chunks
    lines.append(
        f"retrieved chunks ({len(chunks)}; the first {k} count), rel_path relative to docs_root {docs_root}:"
        if chunks
        else "retrieved chunks: none"
    )
    lines += [_chunk_line(i, chunk) for i, chunk in enumerate(chunks[:k], start=1)]
    if len(chunks) > k:
        lines.append(f"  ... and {len(chunks) - k} more")
    if response.references:
        lines.append(f"references ({len(response.references)}):")
        lines += [_chunk_line(i, chunk) for i, chunk in enumerate(response.references, start=1)]
    if loaded is None:
        return lines, []
    problems: list[Unreachable | str] = []
    problems += shape_problems([c.case for c in loaded.cases], chunks, docs_root)
    problems += unreachable_gold([(loaded.display, c.line, c.case) for c in loaded.cases], docs_root)
    supports = sum(len(c.case.gold_supports) for c in loaded.cases)
    if not problems:
        lines.append(f"gold: every one of the {supports} gold supports of {eval_set} can match chunks of this form")
        return lines, []
    lines.append(f"gold that can never match ({eval_set}, docs_root {docs_root}):")
    lines += [f"  {p.describe() if isinstance(p, Unreachable) else p}" for p in problems]
    lines += [f"  ({len(loaded.bad)} invalid lines of {eval_set} not checked)"] if loaded.bad else []
    return lines, problems
