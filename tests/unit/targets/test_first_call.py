"""A target's first call goes out alone; what a target returns is each case's own; calls in flight capped."""

from __future__ import annotations

import json
from typing import Any

import pytest

TARGET = """
import json, threading, time

lock = threading.Lock()
state = {"index": None, "in_flight": 0, "most": 0}

def _log(what):
    with open("log.jsonl", "a") as fh:
        fh.write(json.dumps(what) + "\\n")

def lazy(question, params):
    if state["index"] is None:  # a lazily built index, as frameworks build them
        time.sleep(0.3)
        _log("built")
        state["index"] = {}
    return {"answer": "a", "debug": {"retrieved_chunks": []}}

def one_at_a_time(question, params):
    with lock:
        state["in_flight"] += 1
        state["most"] = max(state["most"], state["in_flight"])
        _log(state["most"])
    time.sleep(0.05)
    with lock:
        state["in_flight"] -= 1
    return {"answer": "a", "debug": {"retrieved_chunks": []}}

def shape(question, params):
    _log("called")
    return ["not", "a", "dict"]
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(rag=TARGET)
    lines = [json.dumps({"id": f"c{i}", "question": f"q{i}"}) for i in range(8)]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(lines) + "\n"})
    return pytester


def log(pytester: pytest.Pytester) -> list[Any]:
    path = pytester.path / "log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run(pytester: pytest.Pytester, target: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--rageval", "--rageval-judge=none", f"--rageval-target=rag:{target}", "-p", "no:cacheprovider", *extra
    )


def test_a_lazy_index_is_built_once_though_eight_cases_start_together(project: pytest.Pytester) -> None:
    result = run(project, "lazy")
    assert result.ret == 0, result.stdout.str()
    assert log(project) == ["built"]
    result.stdout.re_match_lines(
        [r"first call of rag:lazy: [\d,]+ ms \(it went out alone, the other cases waited for it\)"]
    )


def test_target_concurrency_caps_the_calls_in_flight(project: pytest.Pytester) -> None:
    capped = run(project, "one_at_a_time", "-o", "rageval_target_concurrency=1")
    assert capped.ret == 0, capped.stdout.str()
    assert max(log(project)) == 1
    (project.path / "log.jsonl").unlink()
    free = run(project, "one_at_a_time")
    assert free.ret == 0 and max(log(project)) > 1  # the run's concurrency (8) otherwise


def test_a_target_answering_in_another_shape_is_each_cases_error(project: pytest.Pytester, xdist: list[str]) -> None:
    """What a target returns is that case's error, the first case's too (only a call it cannot take stops the run)."""
    result = run(project, "shape", *xdist)
    result.assert_outcomes(errors=8)
    assert result.stdout.str().count("rag:shape returned array, expected a dict or RagResponse") >= 8
    assert len(log(project)) == 8
