"""Hand-written tests as first-class as eval-set lines: one client API whatever supplies the target, errors
counted as errors, one case per ``evaluate``, the ``judge`` marker, and the assertion helpers.

Each test is a real pytest session (pytester), serially and under ``-n 2``, against a Python target written in
the pytester folder (``rag.py``); a conftest overrides ``rageval_client`` with a plain function.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_rageval.plugin.handwritten import question_id

RAG = """
CALLS = []


def ask(question, params):
    if question == "exit":
        raise SystemExit(3)
    if question == "nothing":
        return {"answer": "I don't know.", "abstained": True, "retrieved_chunks": []}
    rank = 1 if "good" in question else 3
    chunks = [{"rel_path": "docs/other.md", "text": "other"}] * (rank - 1)
    chunks.append({"rel_path": "docs/a.md", "heading_path": "# A", "text": "The fee is 5 euros."})
    return {"answer": "The fee is 5 euros [docs/a.md].", "retrieved_chunks": chunks}
"""
CONFTEST = """
import pytest
import rag


@pytest.fixture(scope="session")
def rageval_client():
    return rag.ask  # the target; tests still get the session client
"""
GOLD = [{"rel_path": "docs/a.md", "heading_path": "# A"}]


def project(pytester: pytest.Pytester, tests: str) -> None:
    pytester.makepyfile(rag=RAG, test_hand=tests)
    pytester.makeconftest(CONFTEST)
    (pytester.path / "eval_sets").mkdir()
    line = {"id": "line", "question": "good question", "gold_supports": GOLD, "thresholds": {"mrr": 1}}
    (pytester.path / "eval_sets" / "s.jsonl").write_text(json.dumps(line) + "\n")


def run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest("--rageval", "--rageval-judge=none", "-p", "no:cacheprovider", *extra)


def metrics(root: Path) -> dict[str, Any]:
    run_id = (root / "results" / "latest").read_text().strip()
    return cast("dict[str, Any]", json.loads((root / "results" / run_id / "metrics.json").read_text()))


def test_a_conftest_function_is_the_target_of_hand_written_tests_and_eval_set_cases(pytester: pytest.Pytester) -> None:
    project(
        pytester,
        """
from pytest_rageval import SessionClient, assert_metrics

def test_good(rageval_client):
    assert isinstance(rageval_client, SessionClient)
    assert rageval_client.ask("good one").answer.startswith("The fee")
    assert_metrics(rageval_client.evaluate(question="good one", gold_supports=GOLD), mrr=1)

def test_bad(rageval_client):
    assert_metrics(rageval_client.evaluate(question="bad one", gold_supports=GOLD), mrr=1)

GOLD = [{"rel_path": "docs/a.md", "heading_path": "# A"}]
""",
    )
    result = run(pytester, "test_hand.py", "eval_sets")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*mrr = 0.333333 (needs >= 1)*"])
    cases = metrics(pytester.path)["cases"]
    assert cases["eval_sets/s.jsonl::line"]["outcome"] == "passed"
    assert cases[f"test_hand.py::test_good::{question_id('good one')}"]["outcome"] == "passed"
    assert cases[f"test_hand.py::test_bad::{question_id('bad one')}"]["outcome"] == "failed"


def test_a_target_that_raises_makes_the_test_an_error_counted_in_errors(pytester: pytest.Pytester) -> None:
    project(
        pytester,
        """
from pytest_rageval import assert_metrics

def test_exit(rageval_client):
    result = rageval_client.evaluate(question="exit")
    assert_metrics(result)

def test_never_asserted(rageval_client):
    rageval_client.evaluate(id="bad-unasserted", question="bad one", gold_supports=[{"rel_path": "docs/a.md"}],
                            thresholds={"mrr": 1})
""",
    )
    result = run(pytester, "test_hand.py")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*[[]q-*[]] RAG call failed (target): the target raised SystemExit(3)", "ERROR test_hand.py::test_exit*"]
    )
    m = metrics(pytester.path)
    assert m["errors"] == 1 and m["aggregate_metrics"]["operational_metrics"]["error_rate"] == 0.5
    assert m["cases"][f"test_hand.py::test_exit::{question_id('exit')}"]["outcome"] == "error"
    # evaluated and never asserted: its own thresholds decide its record, not the test's pass
    assert m["cases"]["test_hand.py::test_never_asserted::bad-unasserted"]["outcome"] == "failed"


def test_every_evaluate_is_its_own_case_and_a_repeated_id_is_refused(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    project(
        pytester,
        """
from pytest_rageval import assert_metrics

GOLD = [{"rel_path": "docs/a.md", "heading_path": "# A"}]

def test_two(rageval_client):
    assert_metrics(rageval_client.evaluate(question="good one", gold_supports=GOLD), mrr=1)
    rageval_client.evaluate(question="bad one", gold_supports=GOLD)

def test_twice(rageval_client):
    rageval_client.evaluate(question="good one", gold_supports=GOLD)
    rageval_client.evaluate(question="good one", gold_supports=GOLD)
""",
    )
    result = run(pytester, *xdist, "test_hand.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*ValueError: evaluate(): this test already evaluated a case with id "
            f"'{question_id('good one')}' (the same question); give each call its own id=*"
        ]
    )
    cases = metrics(pytester.path)["cases"]
    assert {key for key in cases if key.startswith("test_hand.py::test_two::")} == {
        f"test_hand.py::test_two::{question_id('good one')}",
        f"test_hand.py::test_two::{question_id('bad one')}",
    }
    assert cases[f"test_hand.py::test_two::{question_id('good one')}"]["outcome"] == "passed"
    assert cases[f"test_hand.py::test_two::{question_id('bad one')}"]["outcome"] == "passed"  # no threshold of its own


def test_the_assertion_helpers(pytester: pytest.Pytester) -> None:
    project(
        pytester,
        """
import pytest
from pytest_rageval import assert_abstained, assert_answered, assert_cites

def test_abstains(rageval_client):
    assert_abstained(rageval_client.evaluate(question="nothing", answerable=False))

def test_answers(rageval_client):
    result = rageval_client.evaluate(question="good one")
    assert_answered(result)
    assert_cites(result, rel_path="docs/a.md")
    assert_cites(result, rel_path="docs/a.md", heading_path="# A")

def test_wrong_abstained(rageval_client):
    assert_abstained(rageval_client.evaluate(question="good one"))

def test_wrong_answered(rageval_client):
    assert_answered(rageval_client.evaluate(question="nothing"))

def test_wrong_cites(rageval_client):
    assert_cites(rageval_client.evaluate(question="good one"), rel_path="docs/b.md")
""",
    )
    result = run(pytester, "test_hand.py")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines_random(
        [
            "*expected the system to abstain; it answered: The fee is 5 euros*",
            "*expected an answer; the system abstained: I don't know.*",
            "*expected a retrieved chunk of docs/b.md; retrieved (top 1): docs/a.md",
        ]
    )


def test_hand_written_tests_that_judge_carry_the_judge_marker(pytester: pytest.Pytester) -> None:
    project(
        pytester,
        """
def test_uses_client(rageval_client):
    rageval_client.evaluate(question="good one")

def test_uses_judge(rageval_judge):
    pass

def test_plain():
    pass
""",
    )
    judged = pytester.runpytest(
        "--rageval", "--rageval-judge=lexical", "-p", "no:cacheprovider", "test_hand.py", "-m", "not judge"
    )
    assert judged.ret == 0 and judged.parseoutcomes()["passed"] == 1
    unjudged = run(pytester, "test_hand.py", "-m", "not judge")  # no judge in the run: evaluate judges nothing
    assert unjudged.ret == 0 and unjudged.parseoutcomes()["passed"] == 2
