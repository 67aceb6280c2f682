"""``rageval rescore RUN``: a new run recomputed from a run stored with full text, sending nothing.

A run made with ``--rageval-store-full-text`` keeps, per case, the top-K
chunks with every field and their full text, the references, the answer, the
judge's verdicts and a ``trace`` (runner.case_trace: the eval-set line as read,
K, the snippet rule, the RAG's own ``abstained`` flag); a repeated case keeps
each run (runner.run_trace). Each such record is replayed through
``evaluate.evaluate_case`` itself, with a client that answers from the record
(:class:`StoredClient`) at a K no larger than the run's: the deterministic
metrics, thresholds, misses and outcome come from the very code a pytest run
uses, so a smaller K reproduces a run made at that K. The judge is the run's:

* ``lexical``: judged again on the rebuilt top-K contexts (offline, it sends nothing);
* none: no judge metrics, as in the run;
* an LLM judge: its stored verdicts are carried over unchanged (:class:`StoredVerdicts`),
  made on the run's own K contexts; the result says so.

Errored, skipped and invalid-line records are carried over unchanged (counted,
not rescored), so is a repeated case whose runs were not each stored. Latency is
the run's (nothing is asked). The new run gets a fresh run id in a new folder
(by default beside RUN, ``latest`` moved as a pytest run moves it), its
config.json saying which run it was rescored from with which K and thresholds.

Matrix runs (``[tool.rageval.matrix]``): every record is rescored at the one
``--k`` given; a run whose config matrix has a ``k``/``top_k`` axis is rescored
with each record at its own config's k, and ``--k`` is refused for it.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_rageval.engine.evaluate import RunOptions, evaluate_case
from pytest_rageval.engine.judge_factory import judge_info
from pytest_rageval.errors import DataError
from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation import thresholds as _thresholds
from pytest_rageval.evaluation.registry import Threshold
from pytest_rageval.evaluation.schema import Chunk, EvalCase, RagResponse
from pytest_rageval.evaluation.stored_chunk import chunk_of
from pytest_rageval.gate.aggregate import Aggregator, xfail_counts
from pytest_rageval.judges.base import Judge, JudgeInput, Verdict
from pytest_rageval.judges.judging import JudgeSetup
from pytest_rageval.judges.lexical import LexicalJudge
from pytest_rageval.runs import user_fields
from pytest_rageval.runs.artifacts import (
    case_config,
    compose_metrics,
    config_hash,
    new_run_id,
    what_ran,
    why_not_latest,
    with_seed_keys,
)
from pytest_rageval.runs.folder import RunFolder
from pytest_rageval.sanitize import Limits, error_message
from pytest_rageval.targets.protocol import RagReply

__all__ = ["RescoreError", "RescoreResult", "StoredClient", "StoredVerdicts", "rescore_run"]

#: Top-level metrics.json fields of the selection, carried over from the run.
_SELECTION_FIELDS = ("partial", "cases_in_eval_set", "cases_selected", "shard")
FULL_TEXT_HINT = "re-run it with --rageval-store-full-text to rescore it"


class RescoreError(DataError, ValueError):
    """The run cannot be rescored as asked; the message says why on one line."""


@dataclass
class RescoreResult:
    """The new run and what rescoring did; ``lines`` is the human summary."""

    run_dir: Path
    metrics: dict[str, Any]
    rescored: int = 0
    carried: int = 0
    lines: list[str] = field(default_factory=list)


@dataclass
class _Job:
    """One stored record to replay: its case, each stored run's response, verdicts and latency."""

    index: int
    record: dict[str, Any]
    case: EvalCase
    responses: list[RagResponse]
    verdicts: list[dict[str, Any]]
    latencies: list[float]
    require_snippets: bool
    questions: list[str] | None = None  # a conversation: each turn's question, which picks its stored verdicts


class StoredClient:
    """A RAG client answering from a stored record: run ``i`` of the case gets the ``i``-th stored response."""

    def __init__(self, responses: Sequence[RagResponse], latencies: Sequence[float]) -> None:
        self.responses = list(responses)
        self.latencies = list(latencies)
        self.calls = 0

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        run = min(self.calls, len(self.responses) - 1)
        self.calls += 1
        return RagReply(response=self.responses[run], latency_ms=self.latencies[run], attempts=1)

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": "stored", "responses": len(self.responses)}


class StoredVerdicts(Judge):
    """An LLM judge's stored verdicts of one case, given back unchanged (run ``repeat_index``'s own)."""

    def __init__(
        self,
        description: Mapping[str, Any],
        verdicts: Sequence[Mapping[str, Any]],
        questions: Sequence[str] | None = None,
    ) -> None:
        super().__init__(name=str(description.get("name") or "stored"), heuristic=bool(description.get("heuristic")))
        self._description = dict(description)
        self._verdicts = [dict(v) for v in verdicts]
        self._questions = list(questions) if questions is not None else None  # a conversation's, turn by turn

    def describe(self) -> dict[str, Any]:
        return dict(self._description)

    def supports(self, metric: str) -> bool:
        return any(metric in run for run in self._verdicts)

    async def judge(self, metric: str, inp: JudgeInput, *, repeat_index: int = 0) -> Verdict:
        if self._questions is not None and inp.question in self._questions:
            repeat_index = self._questions.index(inp.question)  # the turn asked this question
        run = self._verdicts[min(repeat_index, len(self._verdicts) - 1)]
        # cost fields zeroed: nothing is spent now (the record keeps the stored verdicts as they were)
        return Verdict.model_validate({**run[metric], "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0})

    async def aclose(self) -> None:
        return None


def rescore_run(
    run_dir: Path,
    *,
    k: int | None = None,
    thresholds: Mapping[str, Threshold] | None = None,
    output_dir: Path | None = None,
    now: datetime | None = None,
) -> RescoreResult:
    """Rescore ``run_dir`` at ``k`` (default: the run's K) with ``thresholds`` overriding (like
    ``--rageval-threshold``) into a new run folder under ``output_dir`` (default: beside ``run_dir``).

    RescoreError for a run not stored with full text, a K below 1 or above the run's; a torn or
    corrupt results.jsonl line raises runs.folder.UnreadableRecord naming file and line.
    """
    run_dir = Path(run_dir)
    source = RunFolder(run_dir)
    if not source.results_path.is_file():
        raise RescoreError(f"{run_dir}: no results.jsonl (not a run folder)")
    records = list(source.records(torn_tail=False))  # every record is carried or rescored: none may be dropped
    config, old_metrics = source.config(), source.metrics()
    found = config.get("config")
    snapshot: dict[str, Any] = found if isinstance(found, dict) else {}
    stored = snapshot.get("store_full_text", any(isinstance(r.get("trace"), dict) for r in records))
    if not stored:  # (a full-text run of an older version: its first record without a trace is named below)
        raise RescoreError(f"{run_dir}: the run was not stored with full text; {FULL_TEXT_HINT}")
    run_k = _run_k(records, snapshot, old_metrics)
    own_k = _matrix_sets_k(records)
    if own_k and k is not None:
        raise RescoreError(
            f"--k {k}: this run's config matrix sets k per config; rescore it without --k (each config at its own k), with --threshold only"
        )
    new_k = run_k if k is None else k
    if new_k < 1:
        raise RescoreError(f"--k {new_k}: K must be at least 1")
    if new_k > run_k:
        raise RescoreError(f"--k {new_k}: larger than the run's K ({run_k}); only the top {run_k} chunks were stored")
    overrides = dict(thresholds or {})
    judge_desc = config.get("judge") if isinstance(config.get("judge"), dict) else None
    judge_name = (judge_desc or {}).get("name") or (old_metrics.get("judge") or {}).get("name") or "none"
    judge_metrics = tuple(snapshot.get("judge_metrics") or registry.default_judge_metrics())
    limits = Limits(**snapshot["limits"]) if isinstance(snapshot.get("limits"), dict) else Limits()

    jobs: list[_Job] = []
    carried: dict[str, int] = {}
    for index, record in enumerate(records):
        why = _not_rescored(record)
        if why is None:
            job = _job(index, record, source.results_path)
            if job is None:
                why = "repeated cases whose runs were not each stored"
            else:
                jobs.append(job)
        if why is not None:
            carried[why] = carried.get(why, 0) + 1
    for job in [] if own_k else jobs:
        stored_k = int(job.record["trace"].get("k") or run_k)
        if new_k > stored_k:
            raise RescoreError(f"--k {new_k}: larger than the K ({stored_k}) {job.record.get('key')} was run at")

    new_snapshot = copy.deepcopy(snapshot)
    new_snapshot["k"] = new_k
    cli = dict((new_snapshot.get("thresholds") or {}).get("cli") or {})
    cli.update(overrides)
    new_snapshot["thresholds"] = {**(new_snapshot.get("thresholds") or {}), "cli": cli}
    new_hash = config_hash(new_snapshot) if snapshot else str(old_metrics.get("config_hash"))
    judge_fields = dict(old_metrics.get("judge") or judge_info(None))
    per_case = case_config(k=new_k, config_hash=new_hash, judge=judge_fields)

    out = list(records)
    asyncio.run(
        _replay_all(
            jobs,
            out,
            new_k=None if own_k else new_k,
            run_k=run_k,
            overrides=overrides,
            judge_name=judge_name,
            judge_desc=judge_desc or {},
            judge_metrics=judge_metrics,
            limits=limits,
            per_case=per_case,
        )
    )

    aggregator = Aggregator()
    for record in out:
        aggregator.add(record)
    run_id = new_run_id(now)
    digests = config.get("eval_set_files") or old_metrics.get("eval_set_files") or {}
    rescored_from = {
        "run_id": old_metrics.get("run_id") or run_dir.name,
        "run": str(run_dir),
        "k": run_k,
        "new_k": new_k,
        "thresholds": overrides,
        "judge": _judge_handling(judge_name),
        "rescored": len(jobs),
        "carried": sum(carried.values()),
    }
    metrics = compose_metrics(
        run_id=run_id,
        complete=bool(old_metrics.get("complete", True)),
        config_hash=new_hash,
        digests=digests if isinstance(digests, dict) else {},
        judge=judge_fields,
        k=new_k,
        aggregated=aggregator.result(),
        selection={name: old_metrics.get(name) for name in _SELECTION_FIELDS} if "partial" in old_metrics else None,
        timestamp=(now or datetime.now(timezone.utc)).isoformat(timespec="milliseconds"),
        run={**what_ran(old_metrics), **user_fields.carried(old_metrics)},
    )
    metrics["rescored_from"] = rescored_from
    new_config = dict(config)
    new_config.update(
        run_id=run_id,
        config_hash=new_hash,
        config=new_snapshot,
        eval_set_hash=metrics["eval_set_hash"],
        rescored_from=rescored_from,
    )
    folder = RunFolder.new(Path(output_dir) if output_dir is not None else run_dir.parent, run_id)
    for record in out:
        folder.add(record)
    kept = why_not_latest(metrics, whole_share=not old_metrics.get("partial"))
    folder.finish(metrics, new_config, move_latest=kept is None)
    result = RescoreResult(folder.run_dir, metrics, rescored=len(jobs), carried=sum(carried.values()))
    result.lines = _summary(
        result,
        jobs,
        carried,
        run_k=run_k,
        new_k=new_k,
        overrides=overrides,
        judge_name=judge_name,
        old_metrics=old_metrics,
        latest_kept=kept,
    )
    return result


def _matrix_sets_k(records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the run's config matrix has a ``k``/``top_k`` axis (its records were run at their config's k)."""
    return any(isinstance(r.get("matrix"), dict) and ("k" in r["matrix"] or "top_k" in r["matrix"]) for r in records)


def _run_k(records: Sequence[Mapping[str, Any]], snapshot: Mapping[str, Any], old_metrics: Mapping[str, Any]) -> int:
    """The run's K: its configuration's, else metrics.json's, else the largest K a record was stored at."""
    for value in (snapshot.get("k"), old_metrics.get("k")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    stored: list[int] = [
        r["trace"]["k"] for r in records if isinstance(r.get("trace"), dict) and isinstance(r["trace"].get("k"), int)
    ]
    if not stored:
        raise RescoreError(f"the run stored no K ({FULL_TEXT_HINT})")
    return max(stored)


def _not_rescored(record: Mapping[str, Any]) -> str | None:
    """Why a record is carried over as it is (None when it is rescored)."""
    if record.get("invalid_line"):
        return "invalid eval-set lines"
    if record.get("outcome") == "skipped":
        return "skipped cases"
    if record.get("error") or record.get("outcome") == "error":
        return "errored cases"
    return None


def _job(index: int, record: dict[str, Any], results: Path) -> _Job | None:
    """The replay of ``record``; None for a repeated case whose runs were not each stored."""
    where = f"{results}: record {index + 1} ({record.get('key') or record.get('test_case_id')})"
    trace = record.get("trace")
    if not isinstance(trace, dict) or not isinstance(trace.get("case"), dict):
        raise RescoreError(f"{where}: the run was not stored with full text; {FULL_TEXT_HINT}")
    try:
        case = EvalCase.model_validate(trace["case"])
        runs = int(record.get("runs") or 1)
        if case.turns is not None:
            return _conversation_job(index, record, case, trace)
        if runs > 1:
            repeats = record.get("repeats") or []
            sources = [r.get("trace") for r in repeats if isinstance(r, dict)]
            if len(sources) != runs or not all(isinstance(s, dict) for s in sources):
                return None
        else:
            metrics = record.get("metrics") or {}
            sources = [{**record, "abstained": trace.get("rag_abstained"), "latency_ms": metrics.get("latency_ms")}]
        responses = [_response(source) for source in sources]  # type: ignore[arg-type]
    except Exception as exc:
        raise RescoreError(f"{where}: cannot be rescored: {error_message(exc)}") from None
    return _Job(
        index,
        record,
        case,
        responses,
        verdicts=[dict(s.get("judge") or {}) for s in sources],  # type: ignore[union-attr]
        latencies=[float(s.get("latency_ms") or 0.0) for s in sources],  # type: ignore[union-attr]
        require_snippets=bool(trace.get("require_snippets")),
    )


def _conversation_job(index: int, record: dict[str, Any], case: EvalCase, trace: Mapping[str, Any]) -> _Job | None:
    """A conversation's replay: each turn's stored response in turn order (None when a turn was repeated)."""
    turns = [t for t in record.get("turns") or [] if isinstance(t, dict)]
    if any(int(t.get("runs") or 1) > 1 for t in turns):
        return None
    sources = [
        {
            **t,
            "abstained": (t.get("trace") or {}).get("rag_abstained"),
            "latency_ms": (t.get("metrics") or {}).get("latency_ms"),
        }
        for t in turns
    ]
    return _Job(
        index,
        record,
        case,
        [_response(source) for source in sources],
        verdicts=[dict(s.get("judge") or {}) for s in sources],
        latencies=[float(s.get("latency_ms") or 0.0) for s in sources],
        require_snippets=bool(trace.get("require_snippets")),
        questions=[str(t.get("question")) for t in turns],
    )


def _response(source: Mapping[str, Any]) -> RagResponse:
    """The RAG's response as the run scored it, from what it stored (chunks without the fields the runner added)."""

    def chunks(name: str) -> list[Chunk]:
        return [chunk_of(c) for c in source.get(name) or []]

    return RagResponse(
        answer=str(source.get("answer") or ""),
        abstained=source.get("abstained"),
        abstain_reason=source.get("abstain_reason"),
        selected_folders=source.get("selected_folders"),
        retrieved_chunks=chunks("retrieved_chunks"),
        references=chunks("references"),
    )


async def _replay_all(
    jobs: Sequence[_Job],
    out: list[dict[str, Any]],
    *,
    new_k: int | None,
    run_k: int,
    overrides: Mapping[str, Threshold],
    judge_name: str,
    judge_desc: Mapping[str, Any],
    judge_metrics: tuple[str, ...],
    limits: Limits,
    per_case: Mapping[str, Any],
) -> None:
    """Replay each job through evaluate.evaluate_case and put the new record in its place in ``out``.

    ``new_k`` None: each record at the K it was run at (a config matrix with a k axis)."""
    lexical = LexicalJudge(judge_desc.get("citation_patterns") or ()) if judge_name == "lexical" else None
    judged = _thresholds.judge_metrics()
    for job in jobs:
        judge: Judge | None = None
        if lexical is not None:
            judge = lexical
        elif judge_name != "none":
            judge = StoredVerdicts(judge_desc or {"name": judge_name}, job.verdicts, job.questions)
        setup = JudgeSetup(judge, judge_metrics) if judge is not None else None
        limit = dict(job.record.get("thresholds") or {})
        limit.update(overrides)
        if setup is None:  # as thresholds.resolve_thresholds: judge thresholds apply only with a judge
            limit = {m: v for m, v in limit.items() if m not in judged}
        k = new_k if new_k is not None else int(job.record["trace"].get("k") or run_k)
        opts = RunOptions(k=k, require_snippets=job.require_snippets, store_full_text=True, limits=limits)
        new = await evaluate_case(
            job.case,
            StoredClient(job.responses, job.latencies),
            opts,
            limit,
            key=str(job.record.get("key")),
            file=str(job.record.get("file")),
            line=int(job.record.get("line") or 0),
            judge=setup,
        )
        out[job.index] = _merged(
            job, dict(new), carried_verdicts=lexical is None and judge is not None, per_case=per_case
        )


def _merged(job: _Job, new: dict[str, Any], *, carried_verdicts: bool, per_case: Mapping[str, Any]) -> dict[str, Any]:
    """The rescored record: the stored one with every field the replay made replaced, and the outcome recomputed."""
    old = job.record
    record = {name: value for name, value in old.items() if name != "spot_check"}  # compared verdicts of another run
    record.update(new)
    for name in ("notes", "latency"):  # what the RAG sent and how long it took: the run's
        if name in old:
            record[name] = old[name]
    if carried_verdicts:
        record["judge"] = old.get("judge") or {}
        for name in ("cost", "judge_cache"):
            record[name] = new[name]  # nothing spent now
    if record.get("error"):
        record["outcome"] = "error"
    else:
        missed = bool(record.get("misses"))
        was = old.get("outcome")
        record["outcome"] = (
            ("xfailed" if missed else "xpassed")
            if was in ("xfailed", "xpassed")
            else ("failed" if missed else "passed")
        )
    return with_seed_keys(record, per_case)


def _shown(value: Threshold) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else f"{value:g}"


def _judge_handling(judge_name: str) -> str:
    if judge_name == "none":
        return "none"
    return "re-run (lexical, offline)" if judge_name == "lexical" else "verdicts carried over"


def _summary(
    result: RescoreResult,
    jobs: Sequence[_Job],
    carried: Mapping[str, int],
    *,
    run_k: int,
    new_k: int,
    overrides: Mapping[str, Threshold],
    judge_name: str,
    old_metrics: Mapping[str, Any],
    latest_kept: str | None,
) -> list[str]:
    metrics = result.metrics
    lines = [
        f"rescored {result.rescored} of {result.rescored + result.carried} records at K={new_k} (the run's K: {run_k}); nothing was sent"
    ]
    for why, count in carried.items():
        lines.append(f"carried over unchanged, not rescored: {count} {why}")
    if overrides:
        lines.append("thresholds overridden: " + ", ".join(f"{m}={_shown(v)}" for m, v in overrides.items()))
        unjudged = sorted(set(overrides) & _thresholds.judge_metrics()) if judge_name == "none" else []
        if unjudged:
            lines.append(f"not applied (the run had no judge): {', '.join(unjudged)}")
    if judge_name == "lexical":
        lines.append("judge: the lexical judge ran again on the top-K contexts (offline)")
    elif judge_name != "none":
        names = sorted({m for job in jobs for run in job.verdicts for m in run})
        with_verdicts = sum(1 for job in jobs if any(job.verdicts))
        lines.append(
            f"judge: {judge_name} verdicts carried over unchanged for {with_verdicts} case"
            f"{'s' if with_verdicts != 1 else ''} ({', '.join(names) or 'none'}), made on the run's top-{run_k} "
            "contexts; run `rageval judge` on the new run to judge them at the new K"
        )
    lines.append("latency: the run's own (nothing was asked)")
    if isinstance((old_metrics.get("aggregate_metrics") or {}).get("judge_reliability"), dict):
        lines.append("the run's spot check is not carried over")
    if latest_kept:
        lines.append(f"latest not moved: {latest_kept}")
    lines.append(
        f"{result.run_dir} ({metrics['total_tests']} cases: {metrics['passed']} passed, {metrics['failed']} failed, "
        f"{metrics['errors']} errors{xfail_counts(metrics)})"
    )
    return lines
