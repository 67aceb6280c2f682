"""``rageval judge RUN``: judge a finished run later from its stored judge inputs.

Every record of ``RUN/results.jsonl`` that carries ``judge_input``, has no
error but a judge failure and is neither skipped nor an invalid line is judged again with
``judging.judge_case``, exactly as ``evaluate.evaluate_case`` judges a case: the
verdicts go to ``record["judge"]``, the scale scores to ``record["metrics"]``, the
deterministic metrics a new verdict feeds (abstained, false_abstention,
conflict_rule) are scored again by their registry scoring functions
(``metrics.score_verdict_fed``), the attempted metrics to ``record["judge_attempted"]``, tokens, cost and cache
hits to ``record["cost"]`` / ``record["judge_cache"]`` (they describe this
judging, replacing the old numbers); misses and the pass/fail outcome are
recomputed against the thresholds stored in the record. A record whose judging
failed (in the pytest run or an earlier re-judge) is judged again; a judge
failure makes the record an error of kind ``judge``. results.jsonl is then rewritten atomically and
metrics.json recomputed with the Aggregator, keeping the run's identity fields.

Contexts are ``judge_input["contexts"]`` (full text, stored with
``--rageval-store-full-text``) or else the 200-character excerpts in
``judge_input["context_chunks_truncated"]``; the result says when verdicts were
made on excerpts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_rageval.engine.conversation import summarise_turns
from pytest_rageval.engine.evaluate import TRUNCATE
from pytest_rageval.engine.judge_factory import judge_info
from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.metrics import score_verdict_fed
from pytest_rageval.evaluation.record import error
from pytest_rageval.evaluation.registry import ScoreContext
from pytest_rageval.evaluation.schema import EvalCase, RagResponse, id_problem
from pytest_rageval.evaluation.thresholds import find_misses
from pytest_rageval.gate.aggregate import Aggregator
from pytest_rageval.gate.configs import add_ranking
from pytest_rageval.judges.base import JudgeAuthError, JudgeInput
from pytest_rageval.judges.judging import CaseVerdicts, JudgeSetup, judge_case, verdict_dict
from pytest_rageval.runs import user_fields
from pytest_rageval.runs.artifacts import case_config, with_seed_keys
from pytest_rageval.runs.folder import RunFolder, RunFolderError
from pytest_rageval.sanitize import error_message

__all__ = ["CONCURRENCY", "KEPT_RUN_FIELDS", "RejudgeResult", "rejudge_run"]

CONCURRENCY = 8
#: Top-level metrics.json fields carried over from the original run.
KEPT_RUN_FIELDS = ("run_id", "timestamp", "complete", "config_hash", "eval_set_hash")


@dataclass
class RejudgeResult:
    """What a re-judge did; ``lines`` is the human summary."""

    judged: int
    errors: int
    truncated_contexts: bool
    lines: list[str] = field(default_factory=list)
    left_alone: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    judge_tokens: int = 0
    judge_cost_usd: float = 0.0


@dataclass
class _Job:
    record: dict[str, Any]  # the case's record, or a conversation turn's
    case: EvalCase
    response: RagResponse
    inp: JudgeInput
    truncated: bool
    conversation: dict[str, Any] | None = None  # the conversation a turn belongs to

    @property
    def name(self) -> str:
        """The record's key, with its turn for a conversation's."""
        if self.conversation is None:
            return str(self.record.get("key") or self.case.id)
        return f"{self.conversation.get('key')} turn {self.record.get('turn')}"


def _judgeable(record: Mapping[str, Any]) -> bool:
    """Has a judge input, is no skipped/invalid line, and has no error but a judge failure (which judging may mend)."""
    if not isinstance(record.get("judge_input"), Mapping):
        return False
    if record.get("invalid_line") or record.get("outcome") == "skipped":
        return False
    error = record.get("error")
    return not error or (isinstance(error, Mapping) and error.get("kind") == "judge")


def _case(record: Mapping[str, Any], question: str) -> EvalCase:
    """The minimal EvalCase judge_case needs, rebuilt from the record."""
    case_id = record.get("test_case_id")
    case = EvalCase.model_validate(
        {
            "id": case_id if isinstance(case_id, str) and id_problem(case_id) is None else "case",
            "question": question,
            "answerable": record.get("answerable", True) is not False,
            "reference_answer": record.get("reference_answer"),
            "expected_key_facts": list(record.get("expected_key_facts") or []),
        }
    )
    rule = record.get("recency_conflict_rule")
    if rule:
        # the rule needs gold_supports to validate; judging only reads the rule itself
        case = case.model_copy(update={"recency_conflict_rule": rule})
    return case


def _job(record: dict[str, Any], k: int | None) -> _Job:
    stored = record["judge_input"]
    question = str(stored.get("question") or record.get("question") or "")
    answer = str(stored.get("answer") if stored.get("answer") is not None else record.get("answer") or "")
    full = stored.get("contexts")
    if isinstance(full, list):
        contexts = [str(t or "") for t in full]
        truncated = False
    else:
        contexts = [str(t or "") for t in stored.get("context_chunks_truncated") or []]
        # an excerpt shorter than the cut is the whole chunk
        truncated = any(len(t) >= TRUNCATE for t in contexts)
    ids = list(stored.get("context_chunk_ids") or [])
    if k is not None:
        contexts = contexts[:k]
    ids = (ids + [None] * len(contexts))[: len(contexts)]
    inp = JudgeInput(
        question=question,
        answer=answer,
        contexts=tuple(contexts),
        context_ids=tuple(None if i is None else str(i) for i in ids),
        reference_answer=record.get("reference_answer"),
        key_facts=tuple(str(f) for f in record.get("expected_key_facts") or []),
    )
    # The RAG's own abstained flag: when an abstention verdict exists, the old flag came from the classifier.
    old_judge = record.get("judge") or {}
    abstained = None if "abstention" in old_judge else record.get("abstained")
    response = RagResponse(answer=answer, abstained=abstained if isinstance(abstained, bool) else None)
    return _Job(record, _case(record, question), response, inp, truncated)


def _jobs(records: list[dict[str, Any]], k: int | None, results: Path) -> list[_Job]:
    """The judging of each judgeable record; RunFolderError naming the record that cannot be judged again."""
    jobs = []
    for index, record in enumerate(records):
        try:
            if isinstance(record.get("turns"), list):  # a conversation: each turn judged as its own case is
                jobs += _turn_jobs(record, k)
            elif _judgeable(record):
                jobs.append(_job(record, k))
        except ValueError as exc:  # a hand-edited record (no question left, say): name it, change nothing
            raise RunFolderError(
                f"{results}: record {index + 1} ({record.get('key')}): cannot be judged again: {error_message(exc)}; nothing was changed"
            ) from None
    return jobs


def _turn_jobs(record: dict[str, Any], k: int | None) -> list[_Job]:
    """The judging of each judgeable turn of a conversation that is no skipped or invalid line and whose error, if
    any, is a judge failure (a turn whose call failed ended the conversation: there is nothing to judge)."""
    if record.get("invalid_line") or record.get("outcome") == "skipped":
        return []
    error = record.get("error")
    if error and not (isinstance(error, Mapping) and error.get("kind") == "judge"):
        return []
    jobs = []
    for turn in record["turns"]:
        if isinstance(turn, dict) and _judgeable(turn):
            job = _job({**turn, "test_case_id": record.get("test_case_id")}, k)
            job.record, job.conversation = turn, record
            jobs.append(job)
    return jobs


def _apply(job: _Job, outcome: CaseVerdicts, setup: JudgeSetup) -> None:
    """Write the verdicts into the record the way evaluate.evaluate_case does."""
    record = job.record
    record.pop("spot_check", None)  # compared the old verdicts with another model
    record["judge"] = {m: verdict_dict(v) for m, v in outcome.verdicts.items()}
    record["judge_attempted"] = list(outcome.attempted)
    _single_judgement(record)
    spent = outcome.spent(cached=setup.cached)  # this judging's numbers replace the old ones
    record["cost"] = {"judge_tokens": spent["judge_tokens"], "judge_cost_usd": spent["judge_cost_usd"]}
    record["judge_cache"] = {"hits": spent["hits"], "misses": spent["misses"]}
    metrics: dict[str, Any] = dict(record.get("metrics") or {})
    for metric in registry.metric_names("judge"):
        metrics.pop(metric, None)
    if outcome.error is not None:
        record["metrics"] = metrics
        record["error"] = error("judge", str(outcome.error))
        record["outcome"] = "error"
        record["misses"] = []
        return
    metrics.update(score_verdict_fed(outcome.verdicts, job.case, job.response, _stored_context(job, outcome, metrics)))
    metrics.update(outcome.scores())
    record["metrics"] = metrics
    if outcome.abstained is not None:  # the classifier ran: the record's abstention is its answer, as in a run
        record["abstained"] = metrics.get("abstained")
    record["error"] = None
    misses = find_misses(metrics, record.get("thresholds") or {})
    record["misses"] = [m.as_dict() for m in misses]
    old = record.get("outcome")
    if old in ("passed", "failed", "error", None):
        record["outcome"] = "failed" if misses else "passed"
    elif old in ("xfailed", "xpassed"):
        record["outcome"] = "xfailed" if misses else "xpassed"


#: The gold item that stands for the recency rule's sources in :func:`_stored_context`.
_SOURCES = "sources"


def _stored_context(job: _Job, outcome: CaseVerdicts, metrics: Mapping[str, Any]) -> ScoreContext:
    """What the record tells the scoring functions of the metrics the new verdicts feed.

    The new abstention (the classifier's, else the RAG's own flag) and conflict acknowledgement, and whether
    the references cited the recency rule's sources: a record keeps no gold, so that is its stored
    conflict_rule (a 0 that an earlier judge's missing acknowledgement made stays a 0: the record does not
    say whether the sources were cited).
    """
    cited = frozenset({_SOURCES}) if metrics.get("conflict_rule") == 1 else frozenset()
    return ScoreContext(
        k=max(len(job.inp.contexts), 1),
        cited=cited,
        items=(_SOURCES,),
        abstained=job.response.abstained if outcome.abstained is None else outcome.abstained,
        acknowledges_conflict=outcome.acknowledges_conflict,
    )


def _single_judgement(record: dict[str, Any]) -> None:
    """A repeated case is re-judged once, on the answer its record shows (only that run's answer is stored):
    its per-run verdicts and stability class no longer hold, so they go (metrics.json ``repeats`` counts it no more)."""
    if record.pop("repeats", None) is not None:
        record.pop("stability", None)
        record.pop("shown_run", None)
        record["flaky"] = False


async def rejudge_run(run_dir: Path, setup: JudgeSetup, *, k: int | None = None) -> RejudgeResult:
    """Judge ``run_dir``'s stored judge inputs with ``setup`` and rewrite results.jsonl and metrics.json.

    ``k`` judges only the first K stored contexts of each case. A JudgeAuthError
    (401/403) propagates before anything is written.
    """
    run_dir = Path(run_dir)
    folder = RunFolder(run_dir)
    records = list(folder.records(torn_tail=False))  # rewritten below: no line may be dropped
    old_metrics, config = folder.metrics(), folder.config()  # read and checked before anything is rewritten
    jobs = _jobs(records, k, folder.results_path)
    semaphore = asyncio.Semaphore(CONCURRENCY)

    async def one(job: _Job) -> CaseVerdicts:
        async with semaphore:
            return await judge_case(setup.judge, setup.metrics, job.case, job.response, job.inp, budget=setup.budget)

    outcomes = await asyncio.gather(*(one(job) for job in jobs))
    for outcome in outcomes:
        if isinstance(outcome.error, JudgeAuthError):
            raise outcome.error
    judge = judge_info(setup.judge)
    for job, outcome in zip(jobs, outcomes):
        _apply(job, outcome, setup)
        old = job.record.get("config") or {}
        if job.conversation is None:
            with_seed_keys(job.record, case_config(k=old.get("k"), config_hash=old.get("config_hash"), judge=judge))
    for conversation in {id(j.conversation): j.conversation for j in jobs if j.conversation is not None}.values():
        old = conversation.get("config") or {}
        with_seed_keys(conversation, case_config(k=old.get("k"), config_hash=old.get("config_hash"), judge=judge))
        summarise_turns(conversation)

    folder.write_records(records)
    aggregator = Aggregator()
    for record in records:
        aggregator.add(record)
    metrics: dict[str, Any] = {name: old_metrics.get(name) for name in KEPT_RUN_FIELDS}
    metrics["run_id"] = metrics["run_id"] or run_dir.name
    metrics["judge"] = judge
    metrics["k"] = old_metrics.get("k")
    metrics["rejudged_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    metrics.update(aggregator.result())
    metrics.update(user_fields.carried(old_metrics))  # the user section, as it was
    add_ranking(metrics, (old_metrics.get("config_ranking") or {}).get("metric"))  # a matrix run: configs re-ranked
    folder.write_metrics(metrics)
    _update_config(folder, config, setup, metrics["rejudged_at"])
    return _result(records, jobs, outcomes, metrics, setup, k)


def _update_config(folder: RunFolder, config: dict[str, Any], setup: JudgeSetup, when: str) -> None:
    """Record the new judge (and its prompt versions) in the run's config.json, when it has one."""
    if not config:
        return
    config["judge"] = setup.judge.describe()
    config["rejudged_at"] = when
    folder.write_config(config)


def _result(
    records: list[dict[str, Any]],
    jobs: list[_Job],
    outcomes: list[CaseVerdicts],
    metrics: Mapping[str, Any],
    setup: JudgeSetup,
    k: int | None,
) -> RejudgeResult:
    # a conversation is one record however many of its turns were judged
    judged_records = {id(j.conversation if j.conversation is not None else j.record): j for j in jobs}
    failed = {id(j.conversation if j.conversation is not None else j.record) for j, o in zip(jobs, outcomes) if o.error}
    errors = len(failed)
    judged = len(judged_records) - errors
    truncated = [j for j in jobs if j.truncated]
    judgings = [j.conversation if j.conversation is not None else j.record for j in judged_records.values()]
    hits = sum(int(r["judge_cache"]["hits"]) for r in judgings)
    misses = sum(int(r["judge_cache"]["misses"]) for r in judgings)
    tokens = sum(int(r["cost"]["judge_tokens"]) for r in judgings)
    usd = sum(float(r["cost"]["judge_cost_usd"]) for r in judgings)
    left = len(records) - len(judged_records)
    judge = metrics.get("judge") or {}
    who = f"{judge.get('name')}" + (f" ({judge.get('model')})" if judge.get("model") else "")
    lines = [
        f"re-judged {judged} of {len(records)} records with the {who} judge"
        + (f", {errors} judge error{'s' if errors != 1 else ''}" if errors else "")
        + (f"; {left} left alone (errored, skipped, invalid or without judge input)" if left else "")
    ]
    spent = f"judge: ~{tokens:,} tokens, ${usd:.4f}" if tokens or usd else "judge: no tokens spent"
    if setup.cached:
        spent += f"; cache {hits} hits, {misses} misses"
    lines.append(spent)
    agg = metrics.get("aggregate_metrics") or {}
    shown = [
        f"{name} {agg[name]:.2f}"
        for name in ("groundedness_avg", "correctness_avg")
        if isinstance(agg.get(name), (int, float))
    ]
    if shown:
        lines.append("now " + ", ".join(shown))
    judge_names = set(registry.metric_names("judge"))
    if jobs and not any(set(j.record.get("thresholds") or {}) & judge_names for j in jobs):
        lines.append("the run stored no judge-metric thresholds, so pass/fail did not change with the verdicts")
    if k is not None:
        lines.append(f"judged on at most the top {k} stored contexts of each case")
    if any(int(j.record.get("runs") or 1) > 1 for j in jobs):
        lines.append(
            "repeated cases were judged once, on the answer of the run their record shows; their per-run results and stability classes were dropped"
        )
    if truncated:
        lines.append(
            f"warning: {len(truncated)} of {len(jobs)} judged answers stored only {TRUNCATE}-character context excerpts, "
            "so their verdicts were made on excerpts; re-run with --rageval-store-full-text for faithful re-judging"
        )
    for job, outcome in zip(jobs, outcomes):
        if outcome.error is not None:
            lines.append(f"error: {job.name}: {outcome.error}")
    return RejudgeResult(
        judged=judged,
        errors=errors,
        truncated_contexts=bool(truncated),
        lines=lines,
        left_alone=left,
        cache_hits=hits,
        cache_misses=misses,
        judge_tokens=tokens,
        judge_cost_usd=usd,
    )
