"""Judge reliability spot check: re-judge N judged cases with a second model.

The sample is drawn among the cases that got a judge verdict, so
``--rageval-spot-check N`` re-judges exactly N cases whenever N were judged
(all of them when fewer were, and the run says so). Each judged case's rank
is a hash of a fixed seed and its node id; the N lowest are re-judged after
the last case, in the process that writes the run (the xdist controller), so
the sample is the same serially, under ``-n N`` and in any order of
execution. A case carries what re-judging needs (:func:`spot_input`, the
primary verdicts included) on its record; :class:`SpotSample` keeps only the
N best ranked of them. No pytest here.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
from collections.abc import Mapping
from typing import Any

from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.schema import EvalCase, RagResponse

from .base import JudgeInput, Verdict
from .judging import JudgeSetup, disagrees, judge_case

SEED = 0

__all__ = ["SEED", "SpotSample", "rank", "rejudge", "reliability", "spot_input"]


def rank(key: str, seed: int = SEED) -> str:
    """The sampling rank of a case (lower is drawn first): a hash of the seed and the node id."""
    return hashlib.sha256(f"{seed}\0{key}".encode()).hexdigest()


def spot_input(
    case: EvalCase, inp: JudgeInput, abstained: bool | None, verdicts: Mapping[str, Verdict]
) -> dict[str, Any] | None:
    """What re-judging one case needs (plain data, it travels from xdist workers); None without a scored verdict.

    ``abstained`` is what the primary run decided (the RAG's field or the
    classifier's verdict), so the second model scores the same metrics.
    """
    judged = registry.metric_names("judge")
    scored = {m: {"score": v.score, "label": v.label} for m, v in verdicts.items() if m in judged}
    if not scored:
        return None
    return {
        "question": inp.question,
        "answer": inp.answer,
        "contexts": list(inp.contexts),
        "context_ids": list(inp.context_ids),
        "reference_answer": inp.reference_answer,
        "key_facts": list(inp.key_facts),
        "answerable": case.answerable,
        "abstained": abstained,
        "verdicts": scored,
    }


class SpotSample:
    """The ``size`` best-ranked judged cases offered so far (memory bounded by ``size``)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.judged = 0  # cases offered: every case that got a scored verdict
        self._entries: list[tuple[str, str, dict[str, Any]]] = []  # (rank, key, spot input), by rank

    def offer(self, key: str, payload: dict[str, Any]) -> None:
        self.judged += 1
        bisect.insort(self._entries, (rank(key), key, payload), key=lambda entry: entry[:2])
        del self._entries[self.size :]

    def chosen(self) -> list[tuple[str, dict[str, Any]]]:
        """(node id, spot input) of the sample, best ranked first."""
        return [(key, payload) for _, key, payload in self._entries]


async def rejudge(setup: JudgeSetup, chosen: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Judge each chosen case with the second model; per case its scores (primary, second) and the verdict."""
    return list(await asyncio.gather(*(_one(setup, key, payload) for key, payload in chosen)))


async def _one(setup: JudgeSetup, key: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    case = EvalCase(
        id="spot-check",
        question=payload["question"],
        answerable=payload["answerable"],
        reference_answer=payload["reference_answer"],
        expected_key_facts=payload["key_facts"],
    )
    inp = JudgeInput(
        question=payload["question"],
        answer=payload["answer"],
        contexts=tuple(payload["contexts"]),
        context_ids=tuple(payload["context_ids"]),
        reference_answer=payload["reference_answer"],
        key_facts=tuple(payload["key_facts"]),
    )
    response = RagResponse(answer=payload["answer"], abstained=payload["abstained"])
    second = await judge_case(setup.judge, setup.metrics, case, response, inp, budget=setup.budget)
    primary = {m: Verdict(metric=m, **v) for m, v in payload["verdicts"].items()}
    pairs = {m: (primary[m], v) for m, v in second.verdicts.items() if m in primary}
    return {
        "key": key,
        "scores": {m: [a.score, b.score] for m, (a, b) in pairs.items()},
        "disagrees": any(disagrees(a, b) for a, b in pairs.values()) if pairs else None,
        "error": str(second.error) if second.error else None,
        "spent": second.spent(cached=setup.cached),
    }


def reliability(results: list[dict[str, Any]], *, requested: int, judged: int, model: str | None) -> dict[str, Any]:
    """metrics.json ``judge_reliability``: ``{disagreement_rate, spot_check_n}`` and the detail."""
    compared = [r for r in results if r["disagrees"] is not None]
    n = len(compared)
    return {
        "disagreement_rate": sum(bool(r["disagrees"]) for r in compared) / n if n else None,
        "spot_check_n": n,
        "model": model,
        "requested": requested,
        "judged_cases": judged,
        "cases": {r["key"]: {"scores": r["scores"], "disagrees": r["disagrees"], "error": r["error"]} for r in results},
    }
