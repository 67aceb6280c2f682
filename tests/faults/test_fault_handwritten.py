"""Hand-written ``evaluate()`` holds the eval lines' rules: a threshold that names no metric or is not a finite
number is a clear error, not a check silently switched off; calls with one id from several threads at once make
one record, and the others a clear error (not copies that the terminal and metrics.json count differently)."""

from __future__ import annotations

import json

import pytest

RAG = """
import time


def ask(question, params):
    if question == "slow":
        time.sleep(0.3)  # the calls of the threads overlap
    return {"answer": "The fee is 5 euros.", "retrieved_chunks": [{"rel_path": "docs/a.md", "text": "The fee is 5 euros."}]}
"""
CONFTEST = """
import pytest
import rag


@pytest.fixture(scope="session")
def rageval_client():
    return rag.ask
"""
TESTS = """
import threading

GOLD = [{"rel_path": "docs/a.md"}]

def test_nan(rageval_client):
    rageval_client.evaluate(question="q", gold_supports=GOLD, thresholds={"mrr": float("nan")})

def test_infinite(rageval_client):
    rageval_client.evaluate(question="q", gold_supports=GOLD, thresholds={"recall_at_k": float("inf")})

def test_unknown(rageval_client):
    rageval_client.evaluate(question="q", gold_supports=GOLD, thresholds={"nosuch": 1})

def test_dup_from_threads(rageval_client):
    outcomes = []

    def call():
        try:
            rageval_client.evaluate(id="dup", question="slow", gold_supports=GOLD)
            outcomes.append("ok")
        except ValueError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 1, outcomes
    assert all("evaluating a case with id 'dup' in another thread right now" in o for o in outcomes if o != "ok"), outcomes
"""


def test_evaluate_refuses_bad_thresholds_and_makes_one_record_per_id(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    pytester.makepyfile(rag=RAG, test_hand=TESTS)
    pytester.makeconftest(CONFTEST)
    (pytester.path / "eval_sets").mkdir()
    result = pytester.runpytest_subprocess(
        "--rageval", "--rageval-judge=none", "-p", "no:cacheprovider", *xdist, "test_hand.py"
    )
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines_random(
        [
            "*ValueError: evaluate(): field 'thresholds.mrr': threshold of 'mrr' must be a finite number, got nan*",
            "*ValueError: evaluate(): field 'thresholds.recall_at_k': threshold of 'recall_at_k' must be a finite number, got inf*",
            "*ValueError: evaluate(): field 'thresholds': unknown metric 'nosuch'*",
        ]
    )
    run_id = (pytester.path / "results" / "latest").read_text().strip()
    records = [
        json.loads(line) for line in (pytester.path / "results" / run_id / "results.jsonl").read_text().splitlines()
    ]
    assert [r["key"] for r in records] == ["test_hand.py::test_dup_from_threads::dup"]
    metrics = json.loads((pytester.path / "results" / run_id / "metrics.json").read_text())
    assert list(metrics["cases"]) == ["test_hand.py::test_dup_from_threads::dup"] and metrics["passed"] == 1
