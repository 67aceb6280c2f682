"""The first-call rule does not depend on case order: only a call the target cannot take at all (its signature
cannot bind ``(question, params)``) stops the session; what a target returns (None) or raises inside its own code
(a TypeError of its own) on the first case is that case's error, as on any other case."""

from __future__ import annotations

import json

import pytest

TARGET = """
import json


def _log(question):
    with open("log.jsonl", "a") as fh:
        fh.write(json.dumps(question) + "\\n")


def picky(question, params):
    if question == "none":
        return None
    if question == "inner":
        return "a" + params["k"]  # a TypeError of the target's own
    return {"answer": "A.", "retrieved_chunks": [{"rel_path": "a.md", "text": "A."}]}


class OneArgument:
    \"\"\"A callable whose signature cannot be read, and which takes the question alone.\"\"\"

    __signature__ = "unreadable"

    def __call__(self, question):
        _log(question)
        return {"answer": "A.", "retrieved_chunks": []}


one_argument = OneArgument()
"""
ORDERS = {"faults-first": ["none", "inner", "good1", "good2"], "faults-last": ["good1", "good2", "none", "inner"]}


def project(pytester: pytest.Pytester, questions: list[str]) -> None:
    pytester.makepyfile(rag=TARGET)
    lines = [json.dumps({"id": f"c-{q}", "question": q, "gold_supports": [{"rel_path": "a.md"}]}) for q in questions]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(lines) + "\n"})


def run(pytester: pytest.Pytester, target: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--rageval", "--rageval-judge=none", f"--rageval-target=rag:{target}", "-p", "no:cacheprovider", *extra
    )


@pytest.mark.parametrize("order", list(ORDERS))
def test_none_or_an_inner_type_error_is_that_cases_error_whichever_case_goes_first(
    pytester: pytest.Pytester, order: str, xdist: list[str]
) -> None:
    project(pytester, ORDERS[order])
    result = run(pytester, "picky", *xdist)
    result.assert_outcomes(passed=2, errors=2)
    out = result.stdout.str()
    assert "rag:picky returned null, expected a dict or RagResponse" in out
    assert 'TypeError: can only concatenate str (not "int") to str' in out
    assert "could not be made" not in out + result.stderr.str()


@pytest.mark.parametrize("order", list(ORDERS))
def test_a_call_the_target_cannot_take_stops_the_session_once(pytester: pytest.Pytester, order: str) -> None:
    project(pytester, ORDERS[order])
    result = run(pytester, "one_argument")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "the first call of rag:one_argument (question '" in output and "could not be made: TypeError:" in output
    assert "a target is called fn(question, params)" in output
    assert not (pytester.path / "log.jsonl").exists()  # never entered
