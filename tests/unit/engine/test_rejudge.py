"""rejudge.py (``rageval judge RUN``) on hand-made run folders, with the lexical judge and a loopback OpenAI server."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from openai_server import OpenAIServer, error, metric_of, ok, user_text

from pytest_rageval.engine.evaluate import RunOptions, evaluate_case
from pytest_rageval.engine.rejudge import RejudgeResult, rejudge_run
from pytest_rageval.evaluation.schema import EvalCase
from pytest_rageval.evaluation.thresholds import ThresholdConfig, resolve_thresholds
from pytest_rageval.gate.aggregate import aggregate
from pytest_rageval.judges.base import JudgeAuthError
from pytest_rageval.judges.cache import CachedJudge, JudgeCache
from pytest_rageval.judges.judge_check import CALIBRATION_CASES
from pytest_rageval.judges.judging import JudgeSetup
from pytest_rageval.judges.lexical import LexicalJudge
from pytest_rageval.judges.openai_judge import OpenAIJudge
from pytest_rageval.runs.folder import read_records, write_json_atomic
from pytest_rageval.targets.callable_client import CallableClient

STIP = CALIBRATION_CASES[0]
METRICS = ("groundedness", "correctness")
RUN_FIELDS: dict[str, Any] = {
    "run_id": "20240101-000000-abcdef",
    "timestamp": "2024-01-01T00:00:00+00:00",
    "complete": True,
    "config_hash": "0123456789abcdef",
    "eval_set_hash": "f" * 64,
    "k": 3,
}


def record(case_id: str, answer: str, *, full_text: bool, outcome: str = "passed", **changes: Any) -> dict[str, Any]:
    """A CaseRecord as runner.evaluate_case + the session write it (no judge in the original run)."""
    judge_input: dict[str, Any] = {
        "question": STIP.question,
        "answer": answer,
        "context_chunk_ids": ["stip#tally", "stip#snapshot", "stip#forum"],
        "context_chunks_truncated": [c[:200] for c in STIP.contexts],
    }
    if full_text:
        judge_input["contexts"] = list(STIP.contexts)
    rec: dict[str, Any] = {
        "key": f"eval_sets/stip.jsonl::{case_id}",
        "test_case_id": case_id,
        "file": "eval_sets/stip.jsonl",
        "line": 1,
        "category": "factual",
        "tags": ["governance"],
        "difficulty": None,
        "answerable": True,
        "question": STIP.question,
        "reference_answer": STIP.reference_answer,
        "expected_key_facts": list(STIP.key_facts),
        "params": {},
        "metadata": {},
        "outcome": outcome,
        "error": None,
        "metrics": {"recall_at_k": 1.0, "mrr": 1.0, "abstained": False, "false_abstention": 0, "latency_ms": 120.0},
        "thresholds": {"recall_at_k": 1.0, "groundedness": 3.0, "correctness": 3.0},
        "misses": [],
        "judge": {},
        "judge_cache": {"hits": 0, "misses": 0},
        "cost": {"judge_tokens": 0, "judge_cost_usd": 0.0},
        "runs": 1,
        "flaky": False,
        "answer": answer,
        "abstained": False,
        "abstain_reason": None,
        "empty_response": False,
        "retrieved_chunks": [],
        "references": [],
        "judge_input": judge_input,
        "latency": {"total_ms": 120.0},
    }
    rec.update(changes)
    return rec


def errored_record() -> dict[str, Any]:
    """A judge error from the original run: judge input and retrieval metrics stored, no verdict."""
    rec = record("err-001", STIP.faithful_answer, full_text=True, outcome="error", judge_attempted=["groundedness"])
    rec["error"] = {"kind": "judge", "message": "groundedness: unusable judge answer after 3 attempts"}
    rec["judge_input"]["question"] = rec["question"] = "Who proposed STIP, and when?"  # a case of its own
    return rec


def rag_errored_record() -> dict[str, Any]:
    """A RAG failure: nothing was answered, so there is nothing to judge."""
    rec = record("rag-001", "", full_text=True, outcome="error", metrics={})
    rec["error"] = {"kind": "http", "message": "HTTP 500 after 2 retries"}
    return rec


def make_run(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    run: Path = tmp_path / "results" / RUN_FIELDS["run_id"]
    run.mkdir(parents=True)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    judge = {"name": "none", "model": None, "prompt_version": None, "temperature": None, "heuristic": False}
    write_json_atomic(run / "metrics.json", {**RUN_FIELDS, "judge": judge, **aggregate(records)})
    write_json_atomic(run / "config.json", {"run_id": RUN_FIELDS["run_id"], "judge": None})
    return run


def three_records() -> list[dict[str, Any]]:
    return [
        record("fact-001", STIP.faithful_answer, full_text=True),
        record("fact-002", STIP.hallucinated_answer, full_text=False),
        errored_record(),
        rag_errored_record(),
    ]


def metrics_json(run: Path) -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads((run / "metrics.json").read_text(encoding="utf-8")))


def rejudge(run: Path, setup: JudgeSetup, k: int | None = None) -> RejudgeResult:
    async def main() -> RejudgeResult:
        try:
            return await rejudge_run(run, setup, k=k)
        finally:
            await setup.judge.aclose()

    return asyncio.run(main())


def openai_setup(srv: OpenAIServer, cache_dir: Path | None = None, **kwargs: Any) -> JudgeSetup:
    kwargs.setdefault("backoff", 0.001)
    inner = OpenAIJudge(
        model="judge-model", base_url=srv.base_url, api_key="sk-test", prices={"judge-model": (1.0, 2.0)}, **kwargs
    )
    if cache_dir is None:
        return JudgeSetup(inner, METRICS)
    return JudgeSetup(CachedJudge(inner, JudgeCache(cache_dir)), METRICS, cached=True)


def by_answer(body: dict[str, Any], headers: dict[str, Any]) -> Any:
    """5 for the faithful answer, 1 for the hallucinated one (it names Offchain Labs)."""
    score = 1 if "Offchain Labs" in user_text(body) else 5
    answer: dict[str, Any] = {"reasoning": "compared with the context", "score": score}
    if metric_of(body) == "groundedness":
        answer.update(supported_claims=["a claim"], unsupported_claims=[])
    return ok(json.dumps(answer), prompt_tokens=100, completion_tokens=20)


# --------------------------------------------------------------------------- lexical


def test_lexical_rejudge_fills_records_and_metrics(tmp_path: Path) -> None:
    records = three_records()
    run = make_run(tmp_path, records)
    before = metrics_json(run)
    assert before["aggregate_metrics"]["groundedness_avg"] is None

    result = rejudge(run, JudgeSetup(LexicalJudge(), METRICS))

    assert (result.judged, result.errors, result.left_alone) == (3, 0, 1)
    after = {r["test_case_id"]: r for r in read_records(run)}
    assert list(after) == ["fact-001", "fact-002", "err-001", "rag-001"]  # order kept
    good, bad = after["fact-001"], after["fact-002"]
    assert good["metrics"]["groundedness"] == 5.0 and good["judge"]["groundedness"]["score"] == 5.0
    assert good["groundedness"]["score"] == 5.0 and good["config"]["judge"] == "lexical"  # seed 003's keys follow
    assert good["metrics"]["correctness"] > 3.0 and "correctness" in good["judge"]
    assert good["metrics"]["recall_at_k"] == 1.0  # retrieval metrics kept
    assert good["judge_attempted"] == ["groundedness", "correctness"]
    assert good["outcome"] == "passed" and good["misses"] == []
    assert bad["metrics"]["groundedness"] == 0.0
    assert bad["outcome"] == "failed"
    assert {m["metric"] for m in bad["misses"]} == {"groundedness", "correctness"}
    assert "(heuristic)" in bad["judge"]["groundedness"]["reasoning"]
    # the case whose judging failed in the pytest run is judged now; the RAG failure is untouched, byte for byte
    mended = after["err-001"]
    assert mended["error"] is None and mended["outcome"] == "passed" and mended["metrics"]["groundedness"] == 5.0
    assert mended["metrics"]["recall_at_k"] == 1.0
    assert after["rag-001"] == records[3]

    metrics = metrics_json(run)
    for name in ("run_id", "timestamp", "complete", "config_hash", "eval_set_hash", "k"):
        assert metrics[name] == before[name]
    assert metrics["judge"]["name"] == "lexical" and metrics["judge"]["heuristic"] is True
    agg = metrics["aggregate_metrics"]
    assert agg["groundedness_avg"] == pytest.approx(10 / 3)
    assert agg["correctness_avg"] is not None
    assert agg["judge_coverage"]["groundedness"] == {"scored": 3, "attempted": 3, "coverage": 1.0}
    assert (metrics["passed"], metrics["failed"], metrics["errors"]) == (2, 1, 1)
    assert metrics["cases"]["eval_sets/stip.jsonl::fact-002"]["outcome"] == "failed"
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    assert config["judge"]["name"] == "lexical" and "rejudged_at" in config

    # fact-002 stored only 200-character excerpts of its chunks
    assert result.truncated_contexts is True
    assert any("200-character" in line and "--rageval-store-full-text" in line for line in result.lines)
    assert result.lines[0].startswith("re-judged 3 of 4 records with the lexical")


def test_full_text_runs_give_no_truncation_warning(tmp_path: Path) -> None:
    short = record("short-001", "STIP passed.", full_text=False)
    short["judge_input"]["context_chunks_truncated"] = ["STIP passed the Tally vote."]  # shorter than the cut: whole
    run = make_run(tmp_path, [record("fact-001", STIP.faithful_answer, full_text=True), short])
    result = rejudge(run, JudgeSetup(LexicalJudge(), METRICS))
    assert result.truncated_contexts is False
    assert not any("200-character" in line for line in result.lines)


def test_skipped_and_invalid_records_are_left_alone(tmp_path: Path) -> None:
    skipped = record("skip-001", STIP.faithful_answer, full_text=True, outcome="skipped", metrics={})
    invalid = {
        "key": "eval_sets/stip.jsonl:9",
        "file": "eval_sets/stip.jsonl",
        "line": 9,
        "invalid_line": True,
        "outcome": "error",
        "error": {"kind": "other", "message": "bad line"},
    }
    no_input = record("rag-err", "", full_text=True, outcome="error")
    del no_input["judge_input"]
    records = [skipped, invalid, no_input, record("fact-001", STIP.faithful_answer, full_text=True)]
    run = make_run(tmp_path, records)
    result = rejudge(run, JudgeSetup(LexicalJudge(), METRICS))
    after = list(read_records(run))
    assert after[:3] == records[:3]
    assert result.judged == 1 and result.left_alone == 3
    assert metrics_json(run)["invalid_lines"] == 1


def test_abstention_classifier_runs_when_the_rag_gave_no_flag(tmp_path: Path) -> None:
    unanswerable = record(
        "neg-001",
        "I don't know; the documents do not mention it.",
        full_text=True,
        answerable=False,
        abstained=None,
        reference_answer=None,
        expected_key_facts=[],
        metrics={"abstained": None, "latency_ms": 80.0},
        thresholds={"abstained": True},
        outcome="failed",
        misses=[{"metric": "abstained", "value": None, "threshold": True, "op": "=="}],
    )
    run = make_run(tmp_path, [unanswerable])
    rejudge(run, JudgeSetup(LexicalJudge(), METRICS))
    (rec,) = read_records(run)
    assert rec["judge_attempted"] == ["abstention"]  # abstained: groundedness does not apply; correctness neither
    assert rec["abstained"] is True and rec["metrics"]["abstained"] is True
    assert "false_abstention" not in rec["metrics"]
    assert rec["outcome"] == "passed" and rec["misses"] == []
    agg = metrics_json(run)["aggregate_metrics"]
    assert agg["abstention_accuracy"] == 1.0 and agg["groundedness_avg"] is None


# --------------------------------------------------------------------------- the live run's scoring


OLD, NEW = (
    {"rel_path": "notes/2023.md", "heading_path": "# Rollout"},
    {"rel_path": "notes/2024.md", "heading_path": "# Rollout"},
)
ACKNOWLEDGING = "The rollout now takes 14 days; an earlier note said 10 days, which was updated."
SILENT = "The rollout takes 14 days."


def conflict_case(**changes: Any) -> EvalCase:
    fields: dict[str, Any] = {
        "id": "conflict-001",
        "question": "How long does the rollout take?",
        "gold_supports": [NEW, OLD],
    }
    return EvalCase.model_validate({**fields, "recency_conflict_rule": "acknowledge_both", **changes})


def live_record(case: EvalCase, reply: dict[str, Any], judge: JudgeSetup | None) -> dict[str, Any]:
    """The record a run writes for ``case`` (full text stored), with or without a judge; the thresholds are those of
    a run with a judge either way (a run without one stores none for the judge metrics, and re-judging keeps them)."""

    async def run() -> dict[str, Any]:
        thresholds = resolve_thresholds(case, ThresholdConfig.empty(), judge=True)
        opts = RunOptions(k=3, store_full_text=True)
        client = CallableClient(lambda question, params: copy.deepcopy(reply))
        rec = await evaluate_case(
            case,
            client,
            opts,
            thresholds,
            key=f"eval_sets/c.jsonl::{case.id}",
            file="eval_sets/c.jsonl",
            line=1,
            judge=judge,
        )
        return {**rec, "outcome": "failed" if rec["misses"] else "passed"}

    return asyncio.run(run())


def rag_reply(answer: str, cited: list[dict[str, str]]) -> dict[str, Any]:
    """A RAG answer without an ``abstained`` flag (the judge classifies it) whose references are ``cited``."""
    chunks = [{**NEW, "text": "The rollout takes 14 days."}, {**OLD, "text": "The rollout takes 10 days."}]
    return {"answer": answer, "retrieved_chunks": chunks, "references": [{**c, "text": "..."} for c in cited]}


@pytest.mark.parametrize("answer", [ACKNOWLEDGING, SILENT, "I don't know; the notes do not say."])
@pytest.mark.parametrize("cited", [[NEW, OLD], [NEW]], ids=["both-cited", "one-cited"])
@pytest.mark.parametrize("answerable", [True, False])
def test_rejudging_a_run_without_a_judge_scores_as_a_run_with_the_judge(
    tmp_path: Path, answer: str, cited: list[dict[str, str]], answerable: bool
) -> None:
    """Re-judged, a record holds the metrics the run would have had with that judge: the verdict-fed ones
    (abstained, false_abstention, conflict_rule) scored by the same registry functions."""
    case = conflict_case(answerable=answerable)
    reply = rag_reply(answer, cited)
    without = live_record(case, reply, None)
    assert without["metrics"]["abstained"] is None and without["judge"] == {}
    run = make_run(tmp_path, [without])
    rejudge(run, JudgeSetup(LexicalJudge(), METRICS))
    (rejudged,) = read_records(run)
    judged = live_record(case, reply, JudgeSetup(LexicalJudge(), METRICS))
    assert rejudged["metrics"]["abstained"] is not None and rejudged["metrics"]["conflict_rule"] is not None

    def scored(
        metrics: dict[str, Any],
    ) -> dict[str, Any]:  # a run also lists the judge metrics that did not apply, as null
        return {k: v for k, v in metrics.items() if k != "latency_ms" and v is not None}

    assert scored(rejudged["metrics"]) == scored(judged["metrics"])
    assert (rejudged["abstained"], rejudged["outcome"], rejudged["misses"]) == (
        judged["abstained"],
        judged["outcome"],
        judged["misses"],
    )
    assert (
        rejudged["judge_attempted"] == judged["judge_attempted"] and rejudged["judge"].keys() == judged["judge"].keys()
    )


def test_a_new_acknowledgement_decides_conflict_rule_of_cited_sources(tmp_path: Path) -> None:
    """acknowledge_both: the stored conflict_rule says whether the sources were cited; the new conflict_ack verdict
    then decides (a record keeps no gold, so one whose sources went uncited stays at 0)."""
    case = conflict_case()
    records = [
        live_record(case.model_copy(update={"id": "cited-silent"}), rag_reply(SILENT, [NEW, OLD]), None),
        live_record(case.model_copy(update={"id": "cited-acknowledging"}), rag_reply(ACKNOWLEDGING, [NEW, OLD]), None),
        live_record(case.model_copy(update={"id": "uncited-acknowledging"}), rag_reply(ACKNOWLEDGING, [NEW]), None),
    ]
    assert [r["metrics"]["conflict_rule"] for r in records] == [1, 1, 0]  # no judge: citations alone decide
    run = make_run(tmp_path, records)
    rejudge(run, JudgeSetup(LexicalJudge(), METRICS))
    after = {r["test_case_id"]: r for r in read_records(run)}
    assert {name: r["judge"]["conflict_ack"]["label"] for name, r in after.items()} == {
        "cited-silent": False,
        "cited-acknowledging": True,
        "uncited-acknowledging": True,
    }
    conflict_rule = {name: r["metrics"]["conflict_rule"] for name, r in after.items()}
    assert conflict_rule == {"cited-silent": 0, "cited-acknowledging": 1, "uncited-acknowledging": 0}
    missed = {name: [m["metric"] for m in r["misses"]] for name, r in after.items()}
    assert "conflict_rule" in missed["cited-silent"] and "conflict_rule" not in missed["cited-acknowledging"]
    assert metrics_json(run)["aggregate_metrics"]["conflict_rule_rate"] == pytest.approx(1 / 3)


# --------------------------------------------------------------------------- OpenAI judge over the loopback server


def test_openai_rejudge_twice_second_time_from_cache(tmp_path: Path) -> None:
    records = three_records()
    run = make_run(tmp_path, records)
    cache_dir = tmp_path / ".rageval_cache"
    with OpenAIServer(by_answer) as srv:
        first = rejudge(run, openai_setup(srv, cache_dir))
        assert sorted(srv.metrics()) == ["correctness"] * 3 + ["groundedness"] * 3
        texts = [user_text(b) for b in srv.bodies()]
        after_first = {r["test_case_id"]: r for r in read_records(run)}

        second = rejudge(run, openai_setup(srv, cache_dir))
        assert len(srv.requests) == 6  # the second re-judge sent nothing

    # full text went to the judge for fact-001, 200-character excerpts for fact-002
    faithful = [t for t in texts if "Offchain Labs" not in t]
    hallucinated = [t for t in texts if "Offchain Labs" in t]
    assert all("dk3 (@dk3)" in t for t in faithful)
    assert all("dk3 (@dk3)" not in t and "The STIP program allocated 50 million" in t for t in hallucinated)

    assert first.judged == 3 and first.cache_misses == 6 and first.cache_hits == 0
    assert first.judge_tokens == 6 * 120 and first.judge_cost_usd == pytest.approx(6 * (100 * 1.0 + 20 * 2.0) / 1e6)
    good = after_first["fact-001"]
    assert good["metrics"]["groundedness"] == 5.0 and good["metrics"]["correctness"] == 5.0
    assert good["judge_cache"] == {"hits": 0, "misses": 2}
    assert good["cost"]["judge_tokens"] == 240
    assert after_first["fact-002"]["metrics"]["groundedness"] == 1.0
    assert after_first["fact-002"]["outcome"] == "failed"

    assert second.judged == 3 and second.cache_hits == 6 and second.cache_misses == 0
    assert second.judge_tokens == 0 and second.judge_cost_usd == 0.0
    after_second = {r["test_case_id"]: r for r in read_records(run)}
    assert after_second["fact-001"]["judge_cache"] == {"hits": 2, "misses": 0}
    assert after_second["fact-001"]["judge"]["groundedness"]["cached"] is True
    assert after_second["fact-001"]["metrics"] == good["metrics"]
    assert after_second["err-001"]["outcome"] == "passed"  # its judging failed in the pytest run; it is judged now
    assert after_second["rag-001"] == records[3]
    metrics = metrics_json(run)
    assert metrics["judge"] == {
        "name": "openai",
        "model": "judge-model",
        "prompt_version": metrics["judge"]["prompt_version"],
        "temperature": 0.0,
        "heuristic": False,
    }
    assert metrics["aggregate_metrics"]["judge_cache"] == {"hits": 6, "misses": 0}
    assert metrics["aggregate_metrics"]["groundedness_avg"] == pytest.approx(11 / 3)
    assert metrics["run_id"] == RUN_FIELDS["run_id"]


def test_k_limits_the_contexts_judged(tmp_path: Path) -> None:
    run = make_run(tmp_path, [record("fact-001", STIP.faithful_answer, full_text=True)])
    with OpenAIServer(by_answer) as srv:
        result = rejudge(run, openai_setup(srv), k=1)
        texts = [user_text(b) for b in srv.bodies()]
    assert texts and all('<context id="1"' in t and '<context id="2"' not in t for t in texts)
    assert any("top 1 stored contexts" in line for line in result.lines)


def test_judge_failure_makes_an_error_that_a_later_rejudge_retries(tmp_path: Path) -> None:
    run = make_run(tmp_path, [record("fact-001", STIP.faithful_answer, full_text=True)])
    with OpenAIServer(lambda body, headers: ok("not json at all")) as srv:
        result = rejudge(run, openai_setup(srv, max_reasks=0))
    assert (result.judged, result.errors) == (0, 1)
    (rec,) = read_records(run)
    assert rec["outcome"] == "error" and rec["error"]["kind"] == "judge"
    assert "not valid JSON" in rec["error"]["message"]
    assert "groundedness" not in rec["metrics"] and rec["metrics"]["recall_at_k"] == 1.0
    assert metrics_json(run)["errors"] == 1
    assert any(line.startswith("error: eval_sets/stip.jsonl::fact-001") for line in result.lines)

    with OpenAIServer(by_answer) as srv:
        again = rejudge(run, openai_setup(srv))
    assert (again.judged, again.errors) == (1, 0)
    (rec,) = read_records(run)
    assert rec["error"] is None and rec["outcome"] == "passed" and rec["metrics"]["groundedness"] == 5.0
    assert metrics_json(run)["passed"] == 1


def test_auth_error_stops_before_anything_is_written(tmp_path: Path) -> None:
    run = make_run(tmp_path, three_records())
    results_before = (run / "results.jsonl").read_bytes()
    metrics_before = (run / "metrics.json").read_bytes()
    with OpenAIServer(
        lambda body, headers: error(401, "Incorrect API key provided", type_="invalid_request_error")
    ) as srv:
        with pytest.raises(JudgeAuthError):
            rejudge(run, openai_setup(srv))
    assert (run / "results.jsonl").read_bytes() == results_before
    assert (run / "metrics.json").read_bytes() == metrics_before


def test_many_records_are_judged_concurrently_but_bounded(tmp_path: Path) -> None:
    import threading
    import time

    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Any:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return by_answer(body, headers)

    records = [record(f"fact-{i:03d}", STIP.faithful_answer + f" Case {i}.", full_text=True) for i in range(20)]
    run = make_run(tmp_path, copy.deepcopy(records))
    with OpenAIServer(respond) as srv:
        result = rejudge(run, openai_setup(srv))
        assert len(srv.requests) == 40
    assert result.judged == 20
    # 8 cases in flight, each with its two metrics concurrently
    assert 2 < state["peak"] <= 16


# --------------------------------------------------------------------------- unreadable lines


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("damage", "command", "refused"),
    [
        ("middle", "judge", True),
        ("middle", "report", True),
        ("middle", "merge", True),
        ("torn-tail", "judge", True),
        ("torn-tail", "merge", True),
        ("torn-tail", "report", False),
    ],
)
def test_a_line_that_cannot_be_read_is_never_dropped(tmp_path: Path, damage: str, command: str, refused: bool) -> None:
    """`rageval judge`/`merge` never rewrite a run without a line they could not read; `report` only skips a torn tail."""
    run = make_run(tmp_path, three_records())
    results = run / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
    if damage == "middle":
        lines.insert(1, '{"key": "cut short\n')
    else:
        lines.append('{"key": "torn')
    results.write_text("".join(lines), encoding="utf-8")
    before = results.read_bytes()
    args = {
        "judge": ["judge", str(run), "--judge", "lexical"],
        "report": ["report", str(run)],
        "merge": ["merge", str(run), "-o", str(tmp_path / "merged")],
    }[command]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert results.read_bytes() == before
    if refused:
        line = 2 if damage == "middle" else len(lines)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"results.jsonl:{line}: cannot read this record" in proc.stderr and "Traceback" not in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert (run / "report.html").exists()
