"""``rageval rescore RUN``: a run made at K=10 with --rageval-store-full-text, rescored at K=5, equals a run made
at K=5 (loopback ask server and OpenAI-compatible judge counting every request; the real ``rageval`` command)."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from ask_server import AskServer, answer, chunk
from openai_server import OpenAIServer

from pytest_rageval.cli import main

GOLD_A = {"rel_path": "docs/a.md", "heading_path": "# A"}
GOLD_B = {"rel_path": "docs/b.md", "heading_path": "# B"}
DEEP_FACT = "The budget was 50 ARB."

CASES = [
    {
        "id": "top",
        "question": "q-top",
        "gold_supports": [GOLD_A],
        "reference_answer": "A fact.",
        "expected_key_facts": ["A fact"],
    },
    # gold at rank 7: found at K=10, missed at K=5 (and the answer's fact is only in that chunk: lexical groundedness drops)
    {"id": "deep", "question": "q-deep", "gold_supports": [GOLD_A], "reference_answer": DEEP_FACT},
    {"id": "second", "question": "q-second", "gold_supports": [GOLD_A]},  # rank 2: mrr 0.5
    {"id": "multi", "question": "q-multi", "gold_supports": [GOLD_A, GOLD_B], "required_support_groups": [[0, 1]]},
    {
        "id": "conflict",
        "question": "q-conflict",
        "gold_supports": [GOLD_A, GOLD_B],
        "recency_conflict_rule": "acknowledge_both",
    },
    {"id": "mars", "question": "q-mars", "answerable": False},
    {"id": "unsure", "question": "q-unsure", "answerable": False},  # no abstained field: the judge classifies
    {"id": "ids", "question": "q-ids", "gold_doc_ids": ["doc-9"]},
    {"id": "again", "question": "q-again", "gold_supports": [GOLD_A], "repeat": 3},
    {"id": "broken", "question": "q-broken", "gold_supports": [GOLD_A]},  # the RAG answers 404: an error
]

#: Per question: the rank (1-based) of each gold chunk among 12.
GOLD_RANKS: dict[str, dict[int, dict[str, Any]]] = {
    "q-top": {1: GOLD_A},
    "q-deep": {7: GOLD_A},
    "q-second": {2: GOLD_A},
    "q-multi": {3: GOLD_A, 6: GOLD_B},
    "q-conflict": {1: GOLD_A, 2: GOLD_B},
    "q-again": {4: GOLD_A},
}


def chunks_for(question: str) -> list[dict[str, Any]]:
    golds = GOLD_RANKS.get(question, {})
    out = []
    for rank in range(1, 13):
        gold = golds.get(rank)
        if gold is not None:
            text = DEEP_FACT if question == "q-deep" else "A fact. " + "filler " * 60  # longer than 200 characters
            out.append(chunk(gold["rel_path"], gold["heading_path"], rank, text=text))
        else:
            out.append(
                chunk(
                    f"docs/other{rank}.md",
                    "# Other",
                    rank,
                    doc_id="doc-9" if (question, rank) == ("q-ids", 8) else None,
                    text=f"Unrelated text number {rank}.",
                )
            )
    return out


def rag(body: dict[str, Any]) -> Any:
    """The system under test: its answer does not depend on K (the retrieval does)."""
    question, k = body["question"], body["k"]
    if question == "q-broken":
        return 404, {"error": "no such route"}  # not retried
    chunks = chunks_for(question)[:k]
    if question == "q-mars":
        return answer("I could not find this.", chunks, references=[], abstained=True)
    if question == "q-unsure":
        return answer("I am not sure, I could not find this in the notes.", chunks, references=[], abstained=None)
    if question == "q-deep":
        return answer(DEEP_FACT, chunks, references=[])
    if question == "q-conflict":
        refs = [chunk("docs/a.md", "# A", 1, text="new"), chunk("docs/b.md", "# B", 2, text="old")]
        return answer("The newer note says one thing, the older another.", chunks, references=refs)
    return answer("A fact.", chunks, folders=["docs"])


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("RAGEVAL_JUDGE_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    pytester.makefile(".jsonl", **{"eval_sets/r": "\n".join(json.dumps(c) for c in CASES) + "\n"})
    return pytester


def run(pytester: pytest.Pytester, url: str, k: int, *extra: str) -> Path:
    """One ``pytest --rageval`` run into ``results/``; its folder."""
    result = pytester.runpytest(
        "--rageval", f"--rageval-target={url}", f"--rageval-k={k}", "-p", "no:cacheprovider", *extra
    )
    assert result.ret in (0, 1), result.stdout.str()
    return newest(pytester.path / "results")


def newest(output: Path) -> Path:
    return output / (output / "latest").read_text().strip()


def rescore(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``rageval`` command in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "rescore", str(run_dir), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def metrics_of(run_dir: Path) -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads((run_dir / "metrics.json").read_text(encoding="utf-8")))


def records_of(run_dir: Path) -> dict[str, dict[str, Any]]:
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["key"]: r for r in map(json.loads, lines)}


def without_latency(data: Any) -> Any:
    """``data`` without what depends on the clock (latency, run id, timestamp) or names the rescored run."""
    if isinstance(data, dict):
        drop = {
            "latency",
            "latency_ms",
            "run_id",
            "timestamp",
            "rescored_from",
            "session",
        }  # session: the pytest session's exit status and parts
        return {k: without_latency(v) for k, v in data.items() if k not in drop}
    if isinstance(data, list):
        return [without_latency(v) for v in data]
    return data


@pytest.mark.parametrize("judge", ["lexical", "none"])
def test_rescore_at_a_smaller_k_reproduces_a_run_made_at_it(
    project: pytest.Pytester, judge: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with AskServer(rag) as srv:
        run10 = run(project, srv.url, 10, "--rageval-store-full-text", f"--rageval-judge={judge}")
        run5 = run(project, srv.url, 5, "--rageval-store-full-text", f"--rageval-judge={judge}")
        plain5 = run(project, srv.url, 5, f"--rageval-judge={judge}")  # an everyday run at K=5 (200-character excerpts)
        asked = len(srv.requests)
        done = rescore(run10, "--k", "5")
        assert len(srv.requests) == asked  # nothing sent to the RAG (the lexical judge has no endpoint at all)
    assert done.returncode == 0, done.stderr
    if judge == "none":  # a threshold on a judge metric applies to nothing without a judge, and says so
        capsys.readouterr()
        assert main(["rescore", str(run10), "--threshold", "groundedness=4", "-o", str(project.path / "other")]) == 0
        assert "not applied (the run had no judge): groundedness" in capsys.readouterr().out
        assert "groundedness" not in records_of(newest(project.path / "other"))["eval_sets/r.jsonl::top"]["thresholds"]
    new = newest(project.path / "results")
    assert new.parent == run10.parent and new not in (run10, run5, plain5)  # a new run beside it, `latest` moved to it
    assert "rescored 9 of 10 records at K=5 (the run's K: 10); nothing was sent" in done.stdout
    assert "carried over unchanged, not rescored: 1 errored cases" in done.stdout
    assert "latency: the run's own" in done.stdout
    assert (new / "report.html").is_file()

    # metrics.json: identical but for run id, timestamp and latency (config_hash too: both store full text)
    assert without_latency(metrics_of(new)) == without_latency(metrics_of(run5))
    assert metrics_of(run10)["aggregate_metrics"] != metrics_of(run5)["aggregate_metrics"]  # K matters here
    # ... and to a run made at K=5 without full text but for its config hash (store_full_text is in the configuration)
    assert {**without_latency(metrics_of(new)), "config_hash": None} == {
        **without_latency(metrics_of(plain5)),
        "config_hash": None,
    }
    # every record, every field (verdicts, misses, outcome, chunks, each repeat's run), latency excepted
    new_records, records5, records10 = records_of(new), records_of(run5), records_of(run10)
    broken = "eval_sets/r.jsonl::broken"  # carried over as the K=10 run stored it (its per-case config says so)
    assert new_records[broken] == records10[broken] and new_records[broken]["config"]["k"] == 10
    assert without_latency({**new_records, broken: None}) == without_latency({**records5, broken: None})
    deep = "eval_sets/r.jsonl::deep"
    assert (records10[deep]["outcome"], new_records[deep]["outcome"]) == ("passed", "failed")
    for key, record in new_records.items():  # latency carried over from the K=10 run
        assert record.get("latency") == records10[key].get("latency"), key
    again = new_records["eval_sets/r.jsonl::again"]
    assert again["runs"] == 3 and [len(r["trace"]["retrieved_chunks"]) for r in again["repeats"]] == [5, 5, 5]
    if judge == "lexical":  # the judge ran again on the K=5 contexts: the deep fact is no longer in them
        assert new_records[deep]["metrics"]["groundedness"] < records10[deep]["metrics"]["groundedness"]
    config = json.loads((new / "config.json").read_text(encoding="utf-8"))
    assert config["rescored_from"]["run_id"] == run10.name and config["rescored_from"]["new_k"] == 5
    assert config["config"]["k"] == 5 and config["config_hash"] == metrics_of(run5)["config_hash"]
    assert json.loads((run10 / "config.json").read_text(encoding="utf-8"))["config"]["k"] == 10  # the run is left alone


def test_an_llm_judges_verdicts_are_carried_over_and_no_judge_request_is_made(project: pytest.Pytester) -> None:
    with AskServer(rag) as srv, OpenAIServer() as judge:
        args = (
            "--rageval-store-full-text",
            "--rageval-judge=openai",
            "--rageval-judge-model=judge-model",
            f"--rageval-judge-base-url={judge.base_url}",
        )
        run10 = run(project, srv.url, 10, *args)
        run5 = run(project, srv.url, 5, *args)
        asked, judged = len(srv.requests), len(judge.requests)
        done = rescore(run10, "--k", "5")
        assert (len(srv.requests), len(judge.requests)) == (asked, judged)
    assert done.returncode == 0, done.stderr
    assert (
        "judge: openai verdicts carried over unchanged for 8 cases (abstention, conflict_ack, correctness, groundedness), "
        "made on the run's top-10 contexts"
    ) in done.stdout
    new, records10, records5 = records_of(newest(project.path / "results")), records_of(run10), records_of(run5)
    for key, record in new.items():
        assert record.get("judge") == records10[key].get("judge"), key  # unchanged
        # this judge answers the same whatever the contexts: so everything else equals the K=5 run's
        kept = ("outcome", "metrics", "misses", "retrieved_chunks", "abstention", "retrieval_metrics")
        assert without_latency({n: record.get(n) for n in kept}) == without_latency(
            {n: records5[key].get(n) for n in kept}
        ), key
        assert record.get("cost", {}).get("judge_tokens", 0) == 0


def test_thresholds_override_and_outcomes_follow(project: pytest.Pytester) -> None:
    with AskServer(rag) as srv:
        run10 = run(project, srv.url, 10, "--rageval-store-full-text")
        asked = len(srv.requests)
        assert main(["rescore", str(run10), "--threshold", "mrr=0.9", "--threshold", "precision_at_k=0.05"]) == 0
        assert len(srv.requests) == asked
    new = newest(project.path / "results")
    old, records = records_of(run10), records_of(new)
    second = records["eval_sets/r.jsonl::second"]
    assert old["eval_sets/r.jsonl::second"]["outcome"] == "passed"
    assert (
        second["outcome"] == "failed"
        and {"metric": "mrr", "value": 0.5, "threshold": 0.9, "op": ">="} in second["misses"]
    )
    assert second["thresholds"]["precision_at_k"] == 0.05
    metrics = metrics_of(new)
    assert metrics["k"] == 10 and metrics["failed"] > metrics_of(run10)["failed"]
    assert metrics["cases"]["eval_sets/r.jsonl::second"]["outcome"] == "failed"
    config = json.loads((new / "config.json").read_text(encoding="utf-8"))
    assert config["config"]["thresholds"]["cli"] == {"mrr": 0.9, "precision_at_k": 0.05}
    assert config["rescored_from"]["thresholds"] == {"mrr": 0.9, "precision_at_k": 0.05}
    # the rescored run is itself stored with full text: rescoring it again at the same K changes nothing
    assert main(["rescore", str(new), "-o", str(project.path / "again")]) == 0
    assert without_latency(records_of(newest(project.path / "again"))) == without_latency(records)


def refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one line ``rageval`` prints on stderr when it refuses (exit status 2)."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def test_refusals(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    with AskServer(rag) as srv:
        plain = run(project, srv.url, 5)
        full = run(project, srv.url, 5, "--rageval-store-full-text")
    kept = {p.name for p in (project.path / "results").iterdir()}
    # without the flag the records are as before: no trace, no per-run copy
    plain_records = records_of(plain)
    assert not any("trace" in r for r in plain_records.values())
    assert not any("trace" in run for r in plain_records.values() for run in r.get("repeats", []))
    assert refusal(capsys, "rescore", str(plain), "--k", "20") == (
        f"rageval: {plain}: the run was not stored with full text; re-run it with --rageval-store-full-text to rescore it"
    )
    one_without = project.path / "one_without"  # a record without its trace (hand-edited): named with file and line
    shutil.copytree(full, one_without)
    lines = (full / "results.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[1])
    del record["trace"]
    (one_without / "results.jsonl").write_text(
        lines[0] + json.dumps(record) + "\n" + "".join(lines[2:]), encoding="utf-8"
    )
    assert refusal(capsys, "rescore", str(one_without)) == (
        f"rageval: {one_without / 'results.jsonl'}: record 2 ({record['key']}): the run was not stored with full text; "
        "re-run it with --rageval-store-full-text to rescore it"
    )
    assert refusal(capsys, "rescore", str(full), "--k", "6") == (
        "rageval: --k 6: larger than the run's K (5); only the top 5 chunks were stored"
    )
    assert refusal(capsys, "rescore", str(full), "--k", "0") == "rageval: --k 0: K must be at least 1"
    assert refusal(capsys, "rescore", str(full), "--threshold", "recal_at_k=1") == (
        "rageval: --threshold: unknown metric 'recal_at_k' (did you mean 'recall_at_k'?)"
    )
    assert refusal(capsys, "rescore", str(full), "--threshold", "abstained=maybe") == (
        "rageval: --threshold: threshold of 'abstained' must be true or false, got 'maybe'"
    )
    torn = project.path / "torn"
    shutil.copytree(full, torn)
    (torn / "results.jsonl").write_text("".join(lines[:2]) + lines[2][:40], encoding="utf-8")
    assert refusal(capsys, "rescore", str(torn)).startswith(f"rageval: {torn / 'results.jsonl'}:3: ")
    assert (
        refusal(capsys, "rescore", str(project.path / "nowhere"))
        == f"rageval: {project.path / 'nowhere'}: no results.jsonl (not a run folder)"
    )
    assert {p.name for p in (project.path / "results").iterdir()} == kept  # nothing written by a refusal


def test_a_repeated_case_stored_without_its_runs_is_carried_over(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    with AskServer(rag) as srv:
        full = run(project, srv.url, 10, "--rageval-store-full-text")
    records = [json.loads(line) for line in (full / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    old = copy.deepcopy(records)
    for record in records:  # as a run of an older version wrote it: the repeats without their traces
        for entry in record.get("repeats", []):
            entry.pop("trace")
    (full / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    capsys.readouterr()
    assert main(["rescore", str(full), "--k", "5"]) == 0
    assert (
        "carried over unchanged, not rescored: 1 repeated cases whose runs were not each stored"
        in capsys.readouterr().out
    )
    new = records_of(newest(project.path / "results"))
    again = "eval_sets/r.jsonl::again"
    assert new[again]["metrics"] == next(r for r in old if r["key"] == again)["metrics"]


def test_the_demo_rescored_at_k5_equals_its_k5_run(pytester: pytest.Pytester) -> None:
    """The bundled demo (offline, lexical judge): its answers do not change between K=10 and K=5."""
    demo = Path(__file__).resolve().parents[3] / "eval_sets" / "demo.jsonl"
    pytester.makefile(".jsonl", **{"eval_sets/demo": demo.read_text(encoding="utf-8")})
    out = []
    for k in (10, 5):
        result = pytester.runpytest(
            "--rageval",
            "--rageval-target=pytest_rageval.demo:ask",
            f"--rageval-k={k}",
            "--rageval-store-full-text",
            "-p",
            "no:cacheprovider",
        )
        assert result.ret == 0, result.stdout.str()
        out.append(newest(pytester.path / "results"))
    assert main(["rescore", str(out[0]), "--k", "5"]) == 0
    new = newest(pytester.path / "results")
    assert without_latency(metrics_of(new)) == without_latency(metrics_of(out[1]))
    assert without_latency(records_of(new)) == without_latency(records_of(out[1]))


def test_a_matrix_run_with_a_k_axis_is_rescored_at_each_configs_own_k(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    with AskServer(rag) as srv:
        made = run(project, srv.url, 5, "--rageval-store-full-text", "--rageval-matrix=top_k=3,5")
        asked = len(srv.requests)
        assert "config matrix sets k per config" in refusal(capsys, "rescore", str(made), "--k", "2")
        done = rescore(made, "--threshold", "mrr=0.0")
        assert done.returncode == 0, done.stderr
        assert len(srv.requests) == asked
    again = newest(project.path / "results")
    assert again != made
    old, new = metrics_of(made)["by_config"], metrics_of(again)["by_config"]
    assert sorted(old) == sorted(new) == ["top_k=3", "top_k=5"]
    for config in old:  # each config at its own k: the retrieval numbers of the run itself
        assert (
            new[config]["aggregate_metrics"]["recall_at_k_avg"] == old[config]["aggregate_metrics"]["recall_at_k_avg"]
        )
        assert (
            new[config]["aggregate_metrics"]["precision_at_k_avg"]
            == old[config]["aggregate_metrics"]["precision_at_k_avg"]
        )
