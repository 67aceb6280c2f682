"""JUnit XML (``--junitxml``) counts what pytest counts: one session mixing eval-set cases and hand-written tests
with every outcome (passed, failed, an error of a RAG call, an error inside ``evaluate()``, skipped, xfailed,
xpassed), serially and under ``-n 2``; the file's testsuite attributes and elements equal pytest's summary."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

RAG = """
def ask(question, params):
    if "boom" in question:
        raise RuntimeError("the index is offline")
    rank = 1 if "good" in question else 3
    chunks = [{"rel_path": "docs/other.md", "text": "other"}] * (rank - 1)
    chunks.append({"rel_path": "docs/a.md", "heading_path": ["A"], "text": "The fee is 5 euros."})
    return {"answer": "The fee is 5 euros.", "retrieved_chunks": chunks}
"""

GOLD = [{"rel_path": "docs/a.md", "heading_path": "# A"}]
LINES = [
    {"id": "pass", "question": "good question"},
    {"id": "fail", "question": "bad question"},
    {"id": "rag-error", "question": "boom question"},
    {"id": "skip", "question": "good question", "skip": "not today"},
    {"id": "xfail", "question": "bad question", "xfail": "known miss"},
    {"id": "xpass", "question": "good question", "xfail": "thought to miss"},
]

TESTS = """
import pytest
from pytest_rageval import assert_metrics

GOLD = [{"rel_path": "docs/a.md", "heading_path": "# A"}]


def test_pass(rageval_client):
    assert_metrics(rageval_client.evaluate(question="good one", gold_supports=GOLD), mrr=1)


def test_fail(rageval_client):
    assert_metrics(rageval_client.evaluate(question="bad one", gold_supports=GOLD), mrr=1)


def test_evaluate_error(rageval_client):
    rageval_client.evaluate(question="boom one", gold_supports=GOLD)


def test_evaluate_error_again(rageval_client):
    rageval_client.evaluate(question="boom two", gold_supports=GOLD)


def test_skip(rageval_client):
    pytest.skip("not today")


@pytest.mark.xfail(reason="known miss")
def test_xfail(rageval_client):
    assert_metrics(rageval_client.evaluate(question="bad two", gold_supports=GOLD), mrr=1)


@pytest.mark.xfail(reason="thought to miss")
def test_xpass(rageval_client):
    assert_metrics(rageval_client.evaluate(question="good two", gold_supports=GOLD), mrr=1)
"""


def test_junit_counts_equal_pytests_own(pytester: pytest.Pytester, xdist: list[str]) -> None:
    pytester.makepyfile(rag=RAG, test_hand=TESTS)
    pytester.syspathinsert()
    lines = [{**line, "gold_supports": GOLD, "thresholds": {"mrr": 1}} for line in LINES]
    pytester.makefile(".jsonl", **{"eval_sets/s": "".join(json.dumps(line) + "\n" for line in lines)})
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nrageval_target = "rag:ask"\n')
    result = pytester.runpytest(
        "--rageval",
        "--rageval-judge=none",
        "-p",
        "no:cacheprovider",
        "--junitxml=junit.xml",
        *xdist,
        "test_hand.py",
        "eval_sets",
    )
    counts = result.parseoutcomes()
    expected = {"passed": 2, "failed": 2, "errors": 3, "skipped": 2, "xfailed": 2, "xpassed": 2}
    assert {name: counts.get(name, 0) for name in expected} == expected, result.stdout.str()

    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    elements = {tag: sum(1 for case in cases if case.find(tag) is not None) for tag in ("failure", "error", "skipped")}
    assert elements == {
        "failure": counts["failed"],
        "error": counts["errors"],
        "skipped": counts["skipped"] + counts["xfailed"],
    }
    attributes = {name: int(suite.get(name, "-1")) for name in ("tests", "failures", "errors", "skipped")}
    assert attributes == {
        "tests": sum(expected.values()),
        "failures": counts["failed"],
        "errors": counts["errors"],
        "skipped": counts["skipped"] + counts["xfailed"],
    }
    evaluate_errors = [case for case in cases if case.get("name", "").startswith("test_evaluate_error")]
    assert len(evaluate_errors) == 2 and all(case.find("error") is not None for case in evaluate_errors)
    assert "the index is offline" in (evaluate_errors[0].find("error").get("message") or "")  # type: ignore[union-attr]
