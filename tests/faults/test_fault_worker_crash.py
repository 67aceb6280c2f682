"""An xdist worker that dies while running a case (a target that SIGKILLs its own process, as an out-of-memory kill
or a crash in native code would): that case is an error naming the crash, metrics.json says the run is incomplete,
and ``--rageval-update-baseline`` leaves the baseline as it was."""

from __future__ import annotations

import json

import pytest

TARGET = """
import os
import signal


def ask(question, params):
    if question == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"answer": "A.", "retrieved_chunks": [{"rel_path": "a.md", "text": "A."}]}
"""
BASELINE = b'{"hand": "kept as it was"}\n'


def test_a_case_whose_worker_dies_is_an_error_and_the_baseline_is_not_updated(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(rag=TARGET)
    lines = [{"id": f"c-{q}", "question": q, "gold_supports": [{"rel_path": "a.md"}]} for q in ("one", "die", "two")]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(line) for line in lines) + "\n"})
    (pytester.path / "baseline").mkdir()
    (pytester.path / "baseline" / "metrics.json").write_bytes(BASELINE)
    result = pytester.runpytest_subprocess(
        "--rageval",
        "--rageval-judge=none",
        "--rageval-target=rag:ask",
        "--rageval-baseline=baseline",
        "--rageval-update-baseline",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        timeout=120,
    )
    out = result.stdout.str()
    result.assert_outcomes(passed=2, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert "baseline not updated: the run is incomplete" in out
    assert (pytester.path / "baseline" / "metrics.json").read_bytes() == BASELINE
    run_dir = next(p.parent for p in (pytester.path / "results").glob("*/metrics.json"))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["complete"] is False and metrics["errors"] == 1, metrics
    records = {r["key"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    lost = records["eval_sets/s.jsonl::c-die"]
    assert lost["test_case_id"] == "c-die" and len(records) == 3
    assert lost["outcome"] == "error" and "died while running eval_sets/s.jsonl::c-die" in lost["error"]["message"]
    assert lost["error"]["message"] in out
