"""Compute one case's result: ask the RAG, score it, check thresholds.

``evaluate_case`` is the pure-ish async step (no pytest): it turns an
``EvalCase`` and a client into a CaseRecord dict (docs/internals.md). Turning
that record into a test outcome is the item's job (collect.py). ``Engine``
owns the session's event loop in a background thread, so async clients serve
synchronous pytest items now and many concurrent cases later.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Optional, TypeVar

from .client import CallableClient, RagCallError, RagClient
from .judges.base import SCALES, Judge, JudgeAuthError
from .judges.judging import Budget, CaseVerdicts, disagrees, judge_case, judge_input, verdict_dict
from .judges.ratelimit import CASE_ORDER
from .anchors import top_k as _top_k
from .metrics import gold_marks, score_case
from .schema import Chunk, EvalCase, RagResponse
from .thresholds import Threshold, find_misses

T = TypeVar("T")
TRUNCATE = 200


class Engine:
    """An asyncio event loop in a daemon thread for the whole session.

    ``submit`` starts a coroutine at once, at most ``concurrency`` of them
    running together; the caller waits on the returned future.
    """

    def __init__(self, concurrency: int = 1) -> None:
        self._loop = asyncio.new_event_loop()
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._thread = threading.Thread(target=self._loop.run_forever, name="rageval-loop", daemon=True)
        self._thread.start()

    def submit(self, coro: Awaitable[T], *, order: Optional[int] = None) -> "concurrent.futures.Future[T]":
        """Start ``coro`` on the loop, bounded by the concurrency slots; ``order`` (the case's collection
        index) ranks its judge requests: the endpoint limiter serves the earliest case first."""

        async def bounded() -> T:
            if order is not None:
                CASE_ORDER.set(order)  # this task's own context, inherited by the judge calls it starts
            async with self._slots:
                return await coro

        return asyncio.run_coroutine_threadsafe(bounded(), self._loop)

    def run(self, coro: Awaitable[T]) -> T:
        """Run ``coro`` on the loop (not counted against the slots) and wait; Ctrl-C cancels everything."""
        return self.wait(asyncio.run_coroutine_threadsafe(coro, self._loop))  # type: ignore[arg-type]

    def wait(self, future: "concurrent.futures.Future[T]") -> T:
        """Wait for a future of this engine; an interrupt (Ctrl-C, SIGTERM) cancels every case in flight."""
        try:
            return future.result()
        except BaseException as exc:
            if not isinstance(exc, Exception):  # KeyboardInterrupt and the like, not a case's own failure
                self.cancel_all()
            raise

    def cancel_all(self) -> None:
        """Cancel every coroutine of the loop in one step, so no queued case takes a slot that frees up."""
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._cancel_all)

    def close(self, *closers: Callable[[], Awaitable[Any]]) -> None:
        """Cancel what is still running, await each closer, stop the loop and join its thread."""
        self.cancel_all()
        for closer in closers:
            try:
                self.run(closer())
            except Exception:  # closing must not mask the session's outcome
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    def _cancel_all(self) -> None:
        for task in asyncio.all_tasks(self._loop):
            task.cancel()


@dataclass(frozen=True)
class RunOptions:
    """What evaluate_case needs from the settings."""

    k: int
    require_snippets: bool = False
    store_full_text: bool = False


@dataclass
class JudgeSetup:
    """The judge in use, the metrics it scores, and whether a cache sits in front of it."""

    judge: Judge
    metrics: tuple[str, ...]
    cached: bool = False
    budget: Budget = field(default_factory=Budget)


def as_rag_client(obj: Any) -> RagClient:
    """Accept what a user's ``rageval_client`` fixture may return."""
    inner = getattr(obj, "rag_client", None)
    if inner is not None:
        return inner
    if hasattr(obj, "aask"):
        return obj
    if callable(obj):
        return CallableClient(obj)
    raise TypeError(
        f"the rageval_client fixture returned {type(obj).__name__}; expected a pytest_rageval client "
        "(HttpClient, CallableClient) or a callable fn(question, params) -> dict"
    )


def base_record(case: EvalCase, *, key: str, file: str, line: int) -> dict[str, Any]:
    """The fields of a CaseRecord that come from the eval-set line alone."""
    return {
        "key": key,
        "test_case_id": case.id,
        "file": file,
        "line": line,
        "category": case.category,
        "tags": list(case.tags),
        "difficulty": case.difficulty,
        "answerable": case.answerable,
        "recency_conflict_rule": case.recency_conflict_rule,
        "question": case.question,
        "reference_answer": case.reference_answer,
        "expected_key_facts": list(case.expected_key_facts),
        "params": dict(case.params),
        "metadata": dict(case.metadata),
        "outcome": None,
        "error": None,
        "metrics": {},
        "thresholds": {},
        "misses": [],
        "judge": {},
        "judge_cache": {"hits": 0, "misses": 0},
        "cost": {"judge_tokens": 0, "judge_cost_usd": 0.0},
        "runs": case.runs,
        "flaky": False,
    }


def _chunk_dict(chunk: Chunk, *, position: int, gold: bool, full_text: bool) -> dict[str, Any]:
    data = chunk.model_dump(exclude_none=True)
    text = data.get("text")
    if isinstance(text, str) and not full_text and len(text) > TRUNCATE:
        data["text"] = text[:TRUNCATE]
    data["position"] = position
    data["gold"] = gold
    return data


def _combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Metrics of a repeated case: mean of numbers, majority of booleans."""
    if len(runs) == 1:
        return dict(runs[0])
    combined: dict[str, Any] = {}
    for name in runs[0]:
        values = [r[name] for r in runs if r.get(name) is not None]
        if not values:
            combined[name] = None
        elif isinstance(values[0], bool):
            combined[name] = sum(values) * 2 > len(values)
        else:
            combined[name] = sum(values) / len(values)
    return combined


def fill_response(record: dict[str, Any], case: EvalCase, response: RagResponse, opts: RunOptions) -> None:
    """Store the answer, references and top-K chunks (gold marked) in the record."""
    top = _top_k(response.retrieved_chunks, opts.k)
    marks = gold_marks(top, case, opts.require_snippets)
    ref_marks = gold_marks(response.references, case, opts.require_snippets)
    full = opts.store_full_text
    record["answer"] = response.answer
    record["abstained"] = response.abstained
    record["abstain_reason"] = response.abstain_reason
    record["empty_response"] = not response.answer.strip()
    record["selected_folders"] = response.selected_folders
    record["retrieved_chunks"] = [
        _chunk_dict(c, position=i + 1, gold=m, full_text=full) for i, (c, m) in enumerate(zip(top, marks))
    ]
    record["references"] = [
        _chunk_dict(c, position=i + 1, gold=m, full_text=full)
        for i, (c, m) in enumerate(zip(response.references, ref_marks))
    ]
    record["judge_input"] = {
        "question": case.question,
        "answer": response.answer,
        "context_chunk_ids": [c.chunk_id for c in top],
        "context_chunks_truncated": [(c.text or "")[:TRUNCATE] for c in top],
    }
    if full:
        record["judge_input"]["contexts"] = [c.text or "" for c in top]


async def evaluate_case(
    case: EvalCase,
    client: RagClient,
    opts: RunOptions,
    thresholds: Mapping[str, Threshold],
    *,
    key: str,
    file: str,
    line: int,
    judge: Optional[JudgeSetup] = None,
    spot_check: Optional[JudgeSetup] = None,
) -> dict[str, Any]:
    """Run ``case`` (``case.runs`` times) and return its CaseRecord without an outcome.

    A RAG or judge failure after retries gives a record whose ``error`` is set;
    the item reports it as an error, not a failure. A judge that refuses the
    API key raises ``JudgeAuthError`` so the session can stop once.
    """
    record = base_record(case, key=key, file=file, line=line)
    record["thresholds"] = dict(thresholds)
    per_run: list[dict[str, Any]] = []
    verdicts: list[bool] = []
    latencies: list[dict[str, float]] = []
    attempted: list[str] = []
    for run in range(case.runs):
        try:
            reply = await client.aask(case.question, k=opts.k, params=dict(case.params))
        except RagCallError as exc:
            record["error"] = {"kind": exc.kind, "message": exc.message}
            return record
        response = reply.response
        if run == 0:
            fill_response(record, case, response, opts)
        scores: dict[str, Any] = {}
        classified: Optional[bool] = None
        acknowledges: Optional[bool] = None
        if judge is not None:
            top = _top_k(response.retrieved_chunks, opts.k)
            outcome = await judge_case(
                judge.judge, judge.metrics, case, response, judge_input(case, response, top), repeat_index=run, budget=judge.budget
            )
            attempted.extend(m for m in outcome.attempted if m not in attempted)
            _account(record, outcome, cached=judge.cached)
            if run == 0:
                record["judge"] = {m: verdict_dict(v) for m, v in outcome.verdicts.items()}
            if outcome.error is not None:
                if isinstance(outcome.error, JudgeAuthError):
                    raise outcome.error
                # The retrieval metrics still hold (results.jsonl shows them; `rageval judge` completes the case).
                record["metrics"] = score_case(case, response, k=opts.k, require_snippets=opts.require_snippets)
                record["metrics"]["latency_ms"] = reply.latency_ms
                record["judge_attempted"] = attempted
                record["error"] = {"kind": "judge", "message": str(outcome.error)}
                return record
            if spot_check is not None and run == 0:
                await _spot_check(record, spot_check, case, response, top, outcome.verdicts)
            classified = outcome.abstained
            ack = outcome.verdicts.get("conflict_ack")
            acknowledges = ack.label if ack is not None else None
            scores = {m: v.score for m, v in outcome.verdicts.items() if m in SCALES}
        metrics = score_case(
            case, response, k=opts.k, require_snippets=opts.require_snippets, abstained=classified, acknowledges_conflict=acknowledges
        )
        metrics["latency_ms"] = reply.latency_ms
        metrics.update(scores)
        per_run.append(metrics)
        verdicts.append(not find_misses(metrics, thresholds))
        latencies.append({"total_ms": reply.latency_ms, **_phases(response.timings)})
    if judge is not None:
        record["judge_attempted"] = attempted
    passed = sum(verdicts) * 2 > len(verdicts)
    record["metrics"] = _combine(per_run)
    record["abstained"] = record["metrics"].get("abstained")
    record["latency"] = latencies[0] if len(latencies) == 1 else {"total_ms": sum(l["total_ms"] for l in latencies) / len(latencies)}
    if len(per_run) > 1:
        record["flaky"] = 0 < sum(verdicts) < len(verdicts)
        record["repeats"] = [{"passed": v, "metrics": m} for v, m in zip(verdicts, per_run)]
    # The misses shown are those of a run that agrees with the majority verdict.
    representative = next(m for m, v in zip(per_run, verdicts) if v == passed)
    record["misses"] = [] if passed else [m.as_dict() for m in find_misses(representative, thresholds)]
    return record


async def _spot_check(record: dict[str, Any], setup: JudgeSetup, case: EvalCase, response: RagResponse,
                      top: list[Chunk], primary: Mapping[str, Any]) -> None:
    """Re-judge with the second model; store both scores and whether they disagree."""
    second = await judge_case(setup.judge, setup.metrics, case, response, judge_input(case, response, top), budget=setup.budget)
    _account(record, second, cached=setup.cached)
    pairs = {m: (primary[m], v) for m, v in second.verdicts.items() if m in primary and m in SCALES}
    record["spot_check"] = {
        "model": setup.judge.describe().get("model"),
        "scores": {m: [a.score, b.score] for m, (a, b) in pairs.items()},
        "disagrees": any(disagrees(a, b) for a, b in pairs.values()) if pairs else None,
        "error": str(second.error) if second.error else None,
    }


def _account(record: dict[str, Any], outcome: CaseVerdicts, *, cached: bool) -> None:
    """Add the judge tokens, cost and cache hits/misses of ``outcome`` (failed calls included) to the record."""
    spent = outcome.spent(cached=cached)
    record["cost"]["judge_tokens"] += spent["judge_tokens"]
    record["cost"]["judge_cost_usd"] += spent["judge_cost_usd"]
    record["judge_cache"]["hits"] += spent["hits"]
    record["judge_cache"]["misses"] += spent["misses"]


def _phases(timings: Optional[Mapping[str, float]]) -> dict[str, float]:
    if not timings:
        return {}
    return {
        (name if name.endswith("_ms") else f"{name}_ms"): float(value)
        for name, value in timings.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
