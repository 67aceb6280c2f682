"""A run whose target returns heading paths as lists (as every framework adapter writes them) is whole, and every
``rageval`` command that reads run folders reads it: report, rescore, compare, history, merge and judge.

The run folders come from real ``pytest --rageval`` runs against a callable target, not from hand-written files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from run_checks import assert_run_whole, newest

from pytest_rageval.cli import main

RAG = """
def ask(question, params):
    keys = {"rel_path": "it/security.md", "heading_path": ["Security", "Keys { #keys }"], "doc_id": "sec",
            "text": "Keys rotate every 90 days.", "score_final": 0.9}
    welcome = {"rel_path": "handbook.md", "heading_path": ["Handbook", "Welcome"], "doc_id": "hb",
               "text": "Welcome to the company.", "score_final": 0.5}
    chunks = [keys, welcome] if "keys" in question else [welcome, keys]
    chunks = [{**chunk, "rank": rank} for rank, chunk in enumerate(chunks, start=1)]
    return {"answer": chunks[0]["text"], "retrieved_chunks": chunks, "references": [chunks[0]]}
"""

KEYS = {"rel_path": "it/security.md", "heading_path": "# Security > ## Keys"}
CASES: list[dict[str, Any]] = [
    {"id": "keys", "question": "How often do keys rotate?", "gold_supports": [KEYS]},
    {
        "id": "welcome",
        "question": "What does the handbook say first?",
        "gold_supports": [{"rel_path": "handbook.md", "heading_path": ["Handbook"]}],
    },
    {"id": "ids", "question": "Which document covers the rotation?", "gold_doc_ids": ["sec"]},
    # more cases, so that each of two shards gets some
    *({"id": f"more-{n}", "question": f"Are keys rotated ({n})?", "gold_supports": [KEYS]} for n in range(5)),
]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(rag=RAG)
    pytester.syspathinsert()
    pytester.makefile(".jsonl", **{"eval_sets/s": "".join(json.dumps(case) + "\n" for case in CASES)})
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nrageval_target = "rag:ask"\n')
    return pytester


def _run(project: pytest.Pytester, *extra: str, output: str = "results") -> Path:
    result = project.runpytest(
        "--rageval", "--rageval-judge=none", "--rageval-store-full-text", f"--rageval-output={output}", *extra
    )
    run_dir = assert_run_whole(project.path / output, result.ret, expected_status=0, out=result.stdout.str())
    return run_dir


def _records(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {
        r["test_case_id"]: r
        for r in map(json.loads, (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines())
    }


def test_the_run_stores_the_lists_and_writes_every_artifact(project: pytest.Pytester) -> None:
    run_dir = _run(project)
    records = _records(run_dir)
    assert records["keys"]["retrieved_chunks"][0]["heading_path"] == [
        "Security",
        "Keys { #keys }",
    ]  # as the target sent it
    assert {r["metrics"]["recall_at_k"] for r in records.values()} == {1}
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Security &gt; Keys" in html and "#keys" not in html  # shown as matching sees it


def test_report_rebuilds_the_page(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run(project)
    (run_dir / "report.html").unlink()
    assert main(["report", str(run_dir)]) == 0, capsys.readouterr().err
    assert "Handbook &gt; Welcome" in (run_dir / "report.html").read_text(encoding="utf-8")


def test_rescore_reads_the_lists_as_the_run_did(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run(project)
    assert main(["rescore", str(run_dir), "--k", "1", "-o", str(project.path / "rescored")]) == 0, (
        capsys.readouterr().err
    )
    rescored = newest(project.path / "rescored")
    # at K=1 the questions on keys and on the handbook still find their gold first; the id's chunk is second
    recall = {key: r["metrics"]["recall_at_k"] for key, r in _records(rescored).items()}
    assert (recall["keys"], recall["welcome"], recall["ids"]) == (1, 1, 0)
    assert (rescored / "report.html").is_file()


def test_compare_and_history_read_the_runs(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    first = _run(project)
    second = _run(project)
    capsys.readouterr()
    assert main(["compare", str(first), str(second)]) == 0, capsys.readouterr().err
    assert main(["history", str(project.path / "results")]) == 0
    out = capsys.readouterr().out
    assert first.name in out and second.name in out


def test_merge_reads_the_shards(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    one = _run(project, "--rageval-shard=1/2", output="s1")
    two = _run(project, "--rageval-shard=2/2", output="s2")
    assert main(["merge", str(one), str(two), "-o", str(project.path / "merged")]) == 0, capsys.readouterr().err
    merged = newest(project.path / "merged")
    assert sorted(_records(merged)) == sorted(case["id"] for case in CASES)
    assert (merged / "report.html").is_file()


def test_judge_rejudges_the_run(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run(project)
    (run_dir / "report.html").unlink()
    assert main(["judge", str(run_dir), "--judge", "lexical", "--no-cache"]) == 0, capsys.readouterr().err
    records = _records(run_dir)
    assert all(isinstance(r["metrics"].get("groundedness"), (int, float)) for r in records.values()), records
    assert records["keys"]["retrieved_chunks"][0]["heading_path"] == ["Security", "Keys { #keys }"]
    assert (run_dir / "report.html").is_file()
