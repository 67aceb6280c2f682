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
import inspect
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pytest_rageval import defaults
from pytest_rageval.engine.conversation import evaluate_conversation
from pytest_rageval.evaluation import registry, stability
from pytest_rageval.evaluation.anchors import GoldMatcher, doc_item_id, normalize_heading_path, support_item_id
from pytest_rageval.evaluation.anchors import top_k as _top_k
from pytest_rageval.evaluation.metrics import gold_marks, score_case, unmatchable_supports
from pytest_rageval.evaluation.record import CaseError, CaseRecord, ErrorKind, error
from pytest_rageval.evaluation.registry import Threshold
from pytest_rageval.evaluation.schema import Chunk, EvalCase, RagResponse, definition_hash
from pytest_rageval.evaluation.stored_chunk import stored_chunk
from pytest_rageval.evaluation.thresholds import default_thresholds, find_misses, judge_metrics
from pytest_rageval.flow import CASE_ORDER
from pytest_rageval.judges import spot_sample
from pytest_rageval.judges.base import JudgeAuthError, JudgeInput, Verdict
from pytest_rageval.judges.cache import warm
from pytest_rageval.judges.judging import CaseVerdicts, JudgeSetup, judge_case, judge_input, verdict_dict
from pytest_rageval.sanitize import Limits, cap, error_message, keep_notes
from pytest_rageval.targets.callable_client import CallableClient
from pytest_rageval.targets.first_call import TargetMismatch
from pytest_rageval.targets.protocol import RagCallError, RagClient
from pytest_rageval.targets.user_client import attribute

T = TypeVar("T")
TRUNCATE = 200
#: ``record["warnings"]`` entry: the case has gold_supports but the response carries no rel_path at all.
NO_REL_PATH = "gold_supports_without_rel_path"
#: Seconds the engine waits for each closer, and for its loop thread, when the session ends.
_CLOSE_TIMEOUT = 3.0
#: How often a waiting xdist worker looks for the controller's stop file (seconds).
_STOP_POLL = 0.2


class Engine:
    """An asyncio event loop in a daemon thread for the whole session.

    ``submit`` starts a coroutine at once, at most ``concurrency`` of them
    running together; the caller waits on the returned future.
    """

    def __init__(self, concurrency: int = 1, *, stop_file: Path | None = None) -> None:
        self._stop_file = stop_file  # an xdist worker: the controller creates it when SIGTERM stops the session
        self._loop = asyncio.new_event_loop()
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._submitted: weakref.WeakSet[Any] = weakref.WeakSet()  # the cases' coroutines, until they are gone
        self._thread = threading.Thread(target=self._serve, name="rageval-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        """Run the loop until ``close`` stops it: a SystemExit or KeyboardInterrupt escaping a task (asyncio
        re-raises those out of the loop) ends only that task, whose waiter gets it, not every case."""
        while True:
            try:
                self._loop.run_forever()
                return
            except BaseException:
                continue

    def submit(self, coro: Awaitable[T], *, order: int | None = None) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop, bounded by the concurrency slots; ``order`` (the case's collection
        index) ranks its judge requests: the endpoint limiter serves the earliest case first."""

        if inspect.iscoroutine(coro):
            self._submitted.add(coro)

        async def bounded() -> T:
            if order is not None:
                CASE_ORDER.set(order)  # this task's own context, inherited by the judge calls it starts
            async with self._slots:
                return await coro

        return asyncio.run_coroutine_threadsafe(bounded(), self._loop)

    def run(self, coro: Awaitable[T], *, timeout: float | None = None) -> T:
        """Run ``coro`` on the loop (not counted against the slots) and wait; Ctrl-C cancels everything."""
        return self.wait(asyncio.run_coroutine_threadsafe(coro, self._loop), timeout=timeout)  # type: ignore[arg-type]

    def wait(self, future: concurrent.futures.Future[T], *, timeout: float | None = None) -> T:
        """Wait for a future of this engine; an interrupt (Ctrl-C, SIGTERM) cancels every case in flight.

        Only an interrupt that arrives while waiting cancels the rest: a case whose own result is a
        BaseException (a target's SystemExit) is that case's outcome. ``timeout`` raises TimeoutError.
        """
        try:
            done = self._wait(future, timeout)
        except BaseException:
            self.cancel_all()
            raise
        if not done:
            future.cancel()
            raise TimeoutError(f"no result within {timeout:g} s")
        return future.result()

    def _wait(self, future: concurrent.futures.Future[T], timeout: float | None) -> bool:
        """Whether ``future`` finished within ``timeout``; KeyboardInterrupt once the stop file appears."""
        if self._stop_file is None:
            return bool(concurrent.futures.wait([future], timeout=timeout)[0])
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = _STOP_POLL if deadline is None else min(_STOP_POLL, max(0.0, deadline - time.monotonic()))
            if concurrent.futures.wait([future], timeout=step)[0]:
                return True
            if self._stop_file.exists():
                raise KeyboardInterrupt("the controller was stopped (SIGTERM)")
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def cancel_all(self) -> None:
        """Cancel every coroutine of the loop in one step, so no queued case takes a slot that frees up."""
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._cancel_all)

    def close(self, *closers: Callable[[], Awaitable[Any]]) -> None:
        """Cancel what is still running, await each closer (a few seconds at most), stop the loop and join its thread.

        Bounded: a loop blocked by a target (an async function that sleeps without awaiting) cannot keep
        the session from ending; its daemon thread is left behind.
        """
        self.cancel_all()
        blocked = False
        for closer in closers:
            try:
                self.run(closer(), timeout=_CLOSE_TIMEOUT)
            except TimeoutError:  # the loop does not run (a target blocks it): nothing more will
                blocked = True
                break
            except Exception:  # closing must not mask the session's outcome
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=0.5 if blocked else _CLOSE_TIMEOUT)
        if not self._thread.is_alive():
            self._loop.close()
            for coro in list(self._submitted):  # cancelled before they began: no "never awaited" warning
                if inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
                    coro.close()

    def _cancel_all(self) -> None:
        for task in asyncio.all_tasks(self._loop):
            task.cancel()


@dataclass(frozen=True)
class RunOptions:
    """What evaluate_case needs from the settings."""

    k: int
    require_snippets: bool = False
    store_full_text: bool = False
    limits: Limits = field(default_factory=Limits)


def as_rag_client(obj: Any) -> RagClient:
    """Accept what a user's ``rageval_client`` fixture may return."""
    inner: RagClient | None = attribute(obj, "rag_client")
    if inner is not None:
        return inner
    if attribute(obj, "aask") is not None:
        client: RagClient = obj
        return client
    if callable(obj):
        return CallableClient(obj)
    raise TypeError(
        f"the rageval_client fixture returned {type(obj).__name__}; expected a pytest_rageval client "
        "(HttpClient, CallableClient) or a callable fn(question, params) -> dict"
    )


def base_record(case: EvalCase, *, key: str, file: str, line: int) -> CaseRecord:
    """The fields of a CaseRecord that come from the eval-set line alone."""
    return {
        "key": key,
        "test_case_id": case.id,
        "definition": definition_hash(case),
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
        "notes": [],
    }


def _combine(runs: list[dict[str, Any]], expected: tuple[str, ...] = ()) -> dict[str, Any]:
    """Metrics of a (repeated) case: mean of numbers, majority of booleans, over the runs that scored each.

    Every metric any run has is kept, and every ``expected`` one (the judge
    metrics in use): null where no run scored it (it did not apply), never missing.
    """
    names = list(dict.fromkeys(name for run in runs for name in run))
    names += [name for name in expected if name not in names]
    combined: dict[str, Any] = {}
    for name in names:
        values = [r[name] for r in runs if r.get(name) is not None]
        if len(values) <= 1:
            combined[name] = values[0] if values else None
        elif isinstance(values[0], bool):
            combined[name] = sum(values) * 2 > len(values)
        else:
            combined[name] = sum(values) / len(values)
    return combined


def fill_response(record: CaseRecord, case: EvalCase, response: RagResponse, opts: RunOptions) -> None:
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
    cut = None if full else TRUNCATE
    record["retrieved_chunks"] = [
        stored_chunk(c, position=i + 1, gold=m, max_text=cut) for i, (c, m) in enumerate(zip(top, marks))
    ]
    record["references"] = [
        stored_chunk(c, position=i + 1, gold=m, max_text=cut)
        for i, (c, m) in enumerate(zip(response.references, ref_marks))
    ]
    record["expected_gold"] = expected_gold(case, top, opts.require_snippets)
    record["judge_input"] = {  # re-judging reads the answer from record["answer"]: it is stored once
        "question": case.question,
        "context_chunk_ids": [c.chunk_id for c in top],
        "context_chunks_truncated": [(c.text or "")[:TRUNCATE] for c in top],
    }
    if full:
        record["judge_input"]["contexts"] = [c.text or "" for c in top]
        record["trace"] = case_trace(case, response, opts)


def expected_gold(case: EvalCase, top: Sequence[Chunk], require_snippets: bool) -> list[dict[str, Any]]:
    """Each gold item of ``case`` as people read it (``rel_path > heading``, ``doc_id X``) and whether a top-K
    chunk matched it: the failure message shows them beside the retrieved chunks."""
    matcher = GoldMatcher(case, require_snippets)
    found = frozenset().union(*(matcher.match(chunk) for chunk in top))
    items = [
        (support_item_id(i), " > ".join([s.rel_path, *normalize_heading_path(s.heading_path)]))
        for i, s in enumerate(case.gold_supports)
    ]
    items += [(doc_item_id(doc_id), f"doc_id {doc_id}") for doc_id in case.gold_doc_ids]
    return [{"anchor": anchor, "found": item in found} for item, anchor in items]


def case_trace(case: EvalCase, response: RagResponse, opts: RunOptions) -> dict[str, Any]:
    """What ``rageval rescore`` needs besides the stored answer and chunks (with full text only): the eval-set
    line as read (its gold), the run's K and snippet rule, and the RAG's own ``abstained`` flag (the record's
    ``abstained`` may be the judge's classification)."""
    return {
        "k": opts.k,
        "require_snippets": opts.require_snippets,
        "case": case.model_dump(mode="json", exclude_defaults=True),
        "rag_abstained": response.abstained,
    }


def run_trace(
    case: EvalCase, response: RagResponse, verdicts: Mapping[str, Verdict], latency_ms: float, opts: RunOptions
) -> dict[str, Any]:
    """One run of a repeated case as ``rageval rescore`` replays it (with full text only): what
    :func:`fill_response` stores of the shown run, and that run's verdicts and latency."""
    run: dict[str, Any] = {}
    fill_response(run, case, response, opts)  # type: ignore[arg-type]
    keep = ("answer", "abstain_reason", "selected_folders", "retrieved_chunks", "references")
    return {
        **{name: run[name] for name in keep},
        "abstained": response.abstained,
        "latency_ms": latency_ms,
        "judge": _judge_dicts(verdicts, opts.limits, []),
    }


async def evaluate_case(
    case: EvalCase,
    client: RagClient,
    opts: RunOptions,
    thresholds: Mapping[str, Threshold],
    *,
    key: str,
    file: str,
    line: int,
    judge: JudgeSetup | None = None,
    spot_input: bool = False,
    repeat: int | None = None,
    params: Mapping[str, Any] | None = None,
    resolve: Callable[[EvalCase], Mapping[str, Threshold]] | None = None,
) -> CaseRecord:
    """Run ``case`` (``case.runs`` times, or ``repeat`` times: stability.runs_for) and return its CaseRecord without an outcome.

    ``params`` are sent instead of the case's own (a config of the matrix: the case's under the config's).

    A RAG or judge failure after retries gives a record whose ``error`` is set;
    the item reports it as an error, not a failure. A judge that refuses the
    API key raises ``JudgeAuthError`` so the session can stop once. A repeated
    case shows one run that agrees with the majority verdict: its answer,
    retrieval, verdicts and misses (``shown_run``, 1-based). With
    ``spot_input`` a judged case carries what the spot check needs to re-judge
    it (``record["spot_input"]``, see judges/spot_sample.py; not written to results.jsonl).
    ``repeat`` is ``--rageval-repeat``: it applies to a judge-dependent case
    without its own ``repeat``/``flaky`` (every case when ``judge`` is None).

    A conversation (a case with ``turns``) is asked turn by turn (engine/conversation.py), each turn evaluated
    here as a one-question case with the thresholds ``resolve`` gives it (else :func:`turn_thresholds`).
    """
    if case.turns is not None:
        conversation = base_record(case, key=key, file=file, line=line)
        conversation["thresholds"] = dict(thresholds)
        if opts.store_full_text:  # what `rageval rescore` replays the conversation from (its turns keep theirs)
            conversation["trace"] = {
                "k": opts.k,
                "require_snippets": opts.require_snippets,
                "case": case.model_dump(mode="json", exclude_defaults=True),
                "rag_abstained": None,
            }

        def turn_limits(turn: EvalCase) -> Mapping[str, Threshold]:
            return resolve(turn) if resolve is not None else turn_thresholds(case, turn, thresholds)

        async def ask_turn(turn: EvalCase, sent: Mapping[str, Any]) -> CaseRecord:
            return await evaluate_case(
                turn, client, opts, turn_limits(turn), key=key, file=file, line=line, judge=judge, repeat=repeat,
                params=sent,
            )  # fmt: skip

        return await evaluate_conversation(case, conversation, case.params if params is None else params, ask_turn)
    definition = definition_hash(case)  # the line's, before --rageval-repeat sets its runs
    case = stability.with_repeat(case, repeat, thresholds, judge_metrics(), judge_in_use=judge is not None)
    record = base_record(case, key=key, file=file, line=line)
    record["definition"] = definition
    record["thresholds"] = dict(thresholds)
    step = _Step()
    try:
        await _evaluate(
            record,
            case,
            client,
            opts,
            thresholds,
            judge=judge,
            spot_input=spot_input,
            step=step,
            params=case.params if params is None else params,
        )
    except (JudgeAuthError, TargetMismatch, asyncio.CancelledError):
        raise
    except Exception as exc:
        record["error"] = _error(step.kind, f"{error_message(exc)} (while {step.doing})", opts.limits)
    record["notes"] = keep_notes(step.notes)
    return record


@dataclass
class _Step:
    """Where evaluate_case is (what an unexpected exception there is counted as), and the case's notes."""

    kind: ErrorKind = "target"
    doing: str = "asking the RAG system"
    notes: list[str] = field(default_factory=list)

    def at(self, kind: ErrorKind, doing: str) -> None:
        self.kind, self.doing = kind, doing


def turn_thresholds(case: EvalCase, turn: EvalCase, thresholds: Mapping[str, Threshold]) -> dict[str, Threshold]:
    """A turn's thresholds from its conversation's (where no resolver is at hand): the defaults that apply to the
    turn in place of the conversation's own, then what was configured, then the turn's own ``thresholds``."""
    judged = any(name in judge_metrics() for name in thresholds)
    own_defaults = default_thresholds(case, judge=judged)
    configured = {m: v for m, v in thresholds.items() if own_defaults.get(m, _NOT_SET) != v}
    return {**default_thresholds(turn, judge=judged), **configured, **turn.thresholds}


_NOT_SET = object()


def _error(kind: ErrorKind, message: str, limits: Limits) -> CaseError:
    """A record's ``error``; a message longer than ``limits.error`` is cut and says so."""
    text, note = cap(message, limits.error, "message")
    return error(kind, f"{text} ... ({note})" if note else text)


async def _evaluate(
    record: CaseRecord,
    case: EvalCase,
    client: RagClient,
    opts: RunOptions,
    thresholds: Mapping[str, Threshold],
    *,
    judge: JudgeSetup | None,
    spot_input: bool,
    step: _Step,
    params: Mapping[str, Any],
) -> None:
    """evaluate_case's work, filling ``record``; ``step`` follows where it is."""
    per_run: list[dict[str, Any]] = []
    verdicts: list[bool] = []
    latencies: list[dict[str, float]] = []
    attempted: list[str] = []
    seen: list[tuple[RagResponse, Mapping[str, Verdict], JudgeInput | None]] = []
    if judge is not None:
        warm(judge.judge)
    for run in range(case.runs):
        step.at("target", "asking the RAG system")
        try:
            reply = await client.aask(case.question, k=opts.k, params=dict(params))
        except RagCallError as exc:
            record["error"] = _error(exc.kind, exc.message, opts.limits)
            return
        step.at("invalid_response", "reading the RAG response")
        response, cut = bound_response(reply.response, opts.limits)
        step.notes += [*reply.notes, *cut]
        if run == 0:
            fill_response(record, case, response, opts)
            if unmatchable_supports(case, response):
                record["warnings"] = [NO_REL_PATH]
        scores: dict[str, Any] = {}
        classified: bool | None = None
        acknowledges: bool | None = None
        run_verdicts: Mapping[str, Verdict] = {}
        inp: JudgeInput | None = None
        if judge is not None:
            step.at("judge", "judging the answer")
            inp = judge_input(case, response, _top_k(response.retrieved_chunks, opts.k))
            outcome = await judge_case(
                judge.judge, judge.metrics, case, response, inp, repeat_index=run, budget=judge.budget
            )
            attempted.extend(m for m in outcome.attempted if m not in attempted)
            record["judge_attempted"] = attempted  # on every way out: a later run's failure keeps what was asked
            _account(record, outcome, cached=judge.cached)
            if run == 0:
                record["judge"] = _judge_dicts(outcome.verdicts, opts.limits, step.notes)
            if outcome.error is not None:
                if isinstance(outcome.error, JudgeAuthError):
                    raise outcome.error
                # The retrieval metrics still hold (results.jsonl shows them; `rageval judge` completes the case).
                record["metrics"] = score_case(case, response, k=opts.k, require_snippets=opts.require_snippets)
                record["metrics"]["latency_ms"] = reply.latency_ms
                record["error"] = _error("judge", str(outcome.error), opts.limits)
                return
            run_verdicts = outcome.verdicts
            classified = outcome.abstained
            acknowledges = outcome.acknowledges_conflict
            scores = outcome.scores()
        step.at("invalid_response", "scoring the RAG response")
        metrics = score_case(
            case,
            response,
            k=opts.k,
            require_snippets=opts.require_snippets,
            abstained=classified,
            acknowledges_conflict=acknowledges,
        )
        metrics["latency_ms"] = reply.latency_ms
        if reply.ttft_ms is not None:  # a streamed answer
            metrics["ttft_ms"] = reply.ttft_ms
        metrics.update(scores)
        per_run.append(metrics)
        verdicts.append(not find_misses(metrics, thresholds))
        latencies.append({"total_ms": reply.latency_ms, **_phases(response.timings)})
        seen.append((response, run_verdicts, inp))
    passed = sum(verdicts) * 2 > len(verdicts)
    shown = next(i for i, v in enumerate(verdicts) if v == passed)  # the first run that agrees with the majority
    response, run_verdicts, inp = seen[shown]
    if shown:
        fill_response(record, case, response, opts)
    if judge is not None:
        record["judge"] = _judge_dicts(run_verdicts, opts.limits, step.notes)
    record["metrics"] = _combine(
        per_run, tuple(m for m in judge.metrics if m in registry.metric_names("judge")) if judge is not None else ()
    )
    record["abstained"] = record["metrics"].get("abstained")
    record["latency"] = (
        latencies[0]
        if len(latencies) == 1
        else {"total_ms": sum(lat["total_ms"] for lat in latencies) / len(latencies)}
    )
    if len(per_run) > 1:
        record["flaky"] = 0 < sum(verdicts) < len(verdicts)  # kept for readers of older records: stability == "flaky"
        klass = stability.classify(verdicts)
        if klass is not None:
            record["stability"] = klass
        record["repeats"] = [{"passed": v, "metrics": m} for v, m in zip(verdicts, per_run)]
        if opts.store_full_text:  # every run, so that `rageval rescore` replays them all
            for entry, (resp, verdicts_of_run, _), metrics_of_run in zip(record["repeats"], seen, per_run):
                entry["trace"] = run_trace(case, resp, verdicts_of_run, metrics_of_run["latency_ms"], opts)
        record["shown_run"] = shown + 1
    record["misses"] = [] if passed else [m.as_dict() for m in find_misses(per_run[shown], thresholds)]
    if spot_input and inp is not None:
        payload = spot_sample.spot_input(case, inp, per_run[shown]["abstained"], run_verdicts)
        if payload is not None:
            record["spot_input"] = payload


def bound_response(response: RagResponse, limits: Limits) -> tuple[RagResponse, list[str]]:
    """``response`` with its answer, abstain reason and every text of its chunks cut to ``limits``, and notes."""
    notes: list[str] = []
    update: dict[str, Any] = {}
    for name, limit in (("answer", limits.answer), ("abstain_reason", limits.answer)):
        value = getattr(response, name)
        if isinstance(value, str):
            value, note = cap(value, limit, name)
            if note:
                update[name] = value
                notes.append(note)
    for name in ("retrieved_chunks", "references"):
        chunks = getattr(response, name)
        bounded = [_bound_chunk(chunk, limits.chunk_text, f"{name}[{i}]", notes) for i, chunk in enumerate(chunks)]
        if any(new is not old for new, old in zip(bounded, chunks)):
            update[name] = bounded
    return (response.model_copy(update=update) if update else response), notes


def _bound_chunk(chunk: Chunk, limit: int, where: str, notes: list[str]) -> Chunk:
    """``chunk`` with each of its text fields (text, ids, paths, extra fields) cut to ``limit`` characters."""
    update: dict[str, Any] = {}
    for name, value in chunk:
        if isinstance(value, str):
            value, note = cap(value, limit, f"{where}.{name}")
            if note:
                update[name] = value
                notes.append(note)
    if not update:
        return chunk
    return Chunk.model_validate({**chunk.model_dump(), **update})


def _judge_dicts(verdicts: Mapping[str, Verdict], limits: Limits, notes: list[str]) -> dict[str, Any]:
    """The verdicts as stored (verdict_dict) with reasoning, claims and the raw answer cut to ``limits.reasoning``."""
    out: dict[str, Any] = {}
    for metric, verdict in verdicts.items():
        data = verdict_dict(verdict)
        for name in ("reasoning", "raw"):
            if isinstance(data.get(name), str):
                data[name], note = cap(data[name], limits.reasoning, f"{metric} judge {name}")
                if note:
                    notes.append(note)
        for name in ("supported_claims", "unsupported_claims"):
            if isinstance(data.get(name), list):
                claims = data[name]
                if len(claims) > defaults.MAX_CLAIMS_KEPT:
                    notes.append(f"{metric} judge {name} cut from {len(claims):,} to {defaults.MAX_CLAIMS_KEPT} claims")
                    claims = claims[: defaults.MAX_CLAIMS_KEPT]
                data[name] = [cap(c, limits.reasoning, "")[0] if isinstance(c, str) else c for c in claims]
        out[metric] = data
    return out


def _account(record: CaseRecord, outcome: CaseVerdicts, *, cached: bool) -> None:
    """Add the judge tokens, cost and cache hits/misses of ``outcome`` (failed calls included) to the record."""
    spent = outcome.spent(cached=cached)
    record["cost"]["judge_tokens"] += spent["judge_tokens"]
    record["cost"]["judge_cost_usd"] += spent["judge_cost_usd"]
    record["judge_cache"]["hits"] += spent["hits"]
    record["judge_cache"]["misses"] += spent["misses"]


def _phases(timings: Mapping[str, float] | None) -> dict[str, float]:
    if not timings:
        return {}
    return {
        (name if name.endswith("_ms") else f"{name}_ms"): float(value)
        for name, value in timings.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
