"""A callable target cannot hang or kill the run; SIGTERM always ends it (issue 8).

Real subprocesses: each run is ``pytest --rageval`` in a pytester folder with a
target module written there (or the loopback ask server), serially and under
``-n 2`` where workers matter. Bounds on time are generous (a hung target sleeps
600 s; the run must end in well under a minute).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk

CASES = 8
#: What the target does for each question (other questions get an answer): cases run before and after each fault.
FAULTS = {"q1": "systemexit", "q2": "keyboardinterrupt", "q4": "generatorexit", "q5": "exit-code", "q6": "cancelled"}
REASONS = {
    "systemexit": "the target raised SystemExit(2)",  # argparse's exit after printing its usage
    "keyboardinterrupt": "the target raised KeyboardInterrupt()",
    "generatorexit": "the target raised GeneratorExit()",
    "exit-code": "the target raised SystemExit(3)",
    "cancelled": "the target raised CancelledError()",
    "hang": "did not return within 1 s; the call was abandoned",
}

TARGET = """
import argparse, asyncio, sys, time
from pathlib import Path

def fault(kind):
    if kind == "systemexit":
        argparse.ArgumentParser(prog="myrag").parse_args(["--no-such-flag"])
    if kind == "keyboardinterrupt":
        raise KeyboardInterrupt
    if kind == "generatorexit":
        raise GeneratorExit
    if kind == "exit-code":
        sys.exit(3)
    if kind == "cancelled":
        raise asyncio.CancelledError
    if kind == "hang":
        Path("hung.flag").touch()
        time.sleep(600)

def ask(question, params):
    fault(FAULTS.get(question))
    return {"answer": "A.", "retrieved_chunks": [{"rel_path": "docs/a.md", "heading_path": "# A"}]}

async def aask(question, params):
    await asyncio.sleep(0)
    return ask(question, params)
"""


def project(pytester: pytest.Pytester, faults: dict[str, str]) -> None:
    """An eval set of CASES cases (c000: q0, ...) and the target module ``myrag`` doing ``faults``."""
    rows = [
        json.dumps(
            {
                "id": f"c{i:03d}",
                "question": f"q{i}",
                "gold_supports": [{"rel_path": "docs/a.md", "heading_path": "# A"}],
            }
        )
        for i in range(CASES)
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(rows) + "\n"})
    pytester.makepyfile(myrag=f"FAULTS = {faults!r}\n" + TARGET)


def the_run(pytester: pytest.Pytester) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """metrics.json and the records of the one run folder."""
    (run_dir,) = [p for p in (pytester.path / "results").iterdir() if p.is_dir()]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return metrics, records


def assert_errors_rest_ran(pytester: pytest.Pytester, result: pytest.RunResult, faults: dict[str, str]) -> None:
    """Each faulty case is an error with its reason; every other case passed; the run is complete; no traceback."""
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    result.assert_outcomes(passed=CASES - len(faults), errors=len(faults))
    metrics, records = the_run(pytester)
    assert metrics["complete"] is True and metrics["total_tests"] == CASES == len(records)
    assert metrics["passed"] == CASES - len(faults) and metrics["errors"] == len(faults)
    errors = {r["question"]: r["error"] for r in records if r["outcome"] == "error"}
    assert sorted(errors) == sorted(faults)
    for question, kind in faults.items():
        assert errors[question]["kind"] in ("target", "timeout"), errors[question]
        assert REASONS[kind] in errors[question]["message"], errors[question]
        assert REASONS[kind] in output


@pytest.mark.parametrize("fn", ["ask", "aask"], ids=["sync", "async"])
def test_a_base_exception_of_the_target_is_that_cases_error(pytester: pytest.Pytester, fn: str) -> None:
    faults = FAULTS if fn == "aask" else {q: k for q, k in FAULTS.items() if k != "cancelled"}
    project(pytester, faults)
    result = pytester.runpytest_subprocess(
        "--rageval", "--rageval-judge=none", f"--rageval-target=myrag:{fn}", "-p", "no:cacheprovider", timeout=60
    )
    assert_errors_rest_ran(pytester, result, faults)


def test_a_base_exception_under_xdist_is_that_cases_error(pytester: pytest.Pytester) -> None:
    faults = {"q1": "systemexit", "q2": "keyboardinterrupt"}
    project(pytester, faults)
    result = pytester.runpytest_subprocess(
        "--rageval",
        "--rageval-judge=none",
        "--rageval-target=myrag:ask",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        timeout=60,
    )
    assert_errors_rest_ran(pytester, result, faults)


def test_a_sync_target_past_its_timeout_is_abandoned_and_pytest_exits(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    project(pytester, {"q3": "hang"})
    start = time.monotonic()
    result = pytester.runpytest_subprocess(
        "--rageval",
        "--rageval-judge=none",
        "--rageval-target=myrag:ask",
        "-p",
        "no:cacheprovider",
        "-o",
        "rageval_timeout=1",
        *xdist,
        timeout=60,
    )
    took = time.monotonic() - start
    assert (pytester.path / "hung.flag").exists()  # the target did hang, for 600 s
    assert took < 30, f"pytest took {took:.1f} s to exit"
    assert_errors_rest_ran(pytester, result, {"q3": "hang"})


def test_abandoned_calls_are_bounded_by_the_concurrency() -> None:
    """At most ``abandon_limit`` hung calls keep a thread; the next call waits within its timeout, then errors."""
    import asyncio

    from pytest_rageval.targets.callable_client import CallableClient
    from pytest_rageval.targets.protocol import RagCallError

    release = threading.Event()

    def hang(question: str, params: dict[str, Any]) -> dict[str, Any]:
        release.wait(30)
        return {"answer": "late"}

    client = CallableClient(hang, name="myrag:hang", timeout=0.2, abandon_limit=2)
    before = set(threading.enumerate())  # threads of earlier tests may end meanwhile: count only new ones

    async def ask_all() -> list[str]:
        out = []
        for _ in range(4):
            try:
                await client.aask("q", k=1, params={})
            except RagCallError as exc:
                out.append(exc.message)
        return out

    try:
        messages = asyncio.run(ask_all())
        assert len(set(threading.enumerate()) - before) == 2  # two abandoned threads, not four
    finally:
        release.set()
    assert [m.split(" ")[1:3] for m in messages] == [["did", "not"]] * 2 + [["was", "not"]] * 2
    assert "the call was abandoned" in messages[0]
    assert "2 earlier calls are past their timeout and still running (at most 2 are left running)" in messages[2]


# -- SIGTERM ---------------------------------------------------------------------------------------


def run_until(cmd: list[str], cwd: Path, ready: Any) -> tuple[subprocess.Popen[str], float]:
    """Start ``cmd``, send SIGTERM once ``ready()`` holds; return the process and seconds from SIGTERM to its exit."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not ready() and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.05)
    assert ready(), "the run never reached the hung case"
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=40)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running 40 s after SIGTERM:\n{proc.communicate()[0]}")
    return proc, time.monotonic() - sent


def finished_lines(root: Path) -> int:
    files = list((root / "results").glob("*/results.jsonl"))
    return len(files[0].read_text().splitlines()) if files else 0


#: In the SIGTERM tests the last case hangs: every other one finishes first, serially and under xdist.
LAST = CASES - 1


def assert_kept_and_incomplete(root: Path, proc: subprocess.Popen[str], took: float) -> None:
    output = proc.stdout.read() if proc.stdout else ""
    assert took < 20, f"exit {took:.1f} s after SIGTERM"
    assert proc.returncode != 0
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    (run_dir,) = (root / "results").iterdir()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert metrics["complete"] is False
    assert metrics["total_tests"] == len(records) == CASES - 1
    assert sorted(r["test_case_id"] for r in records) == [f"c{i:03d}" for i in range(LAST)]


def test_sigterm_ends_the_run_while_a_sync_target_hangs(pytester: pytest.Pytester) -> None:
    project(pytester, {f"q{LAST}": "hang"})
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--rageval",
        "--rageval-judge=none",
        "--rageval-target=myrag:ask",
        "-p",
        "no:cacheprovider",
        "-o",
        "rageval_timeout=600",
        "--rageval-concurrency=1",
    ]
    root = pytester.path
    proc, took = run_until(cmd, root, lambda: (root / "hung.flag").exists() and finished_lines(root) == CASES - 1)
    assert_kept_and_incomplete(root, proc, took)


def test_sigterm_ends_the_run_while_an_http_request_hangs(pytester: pytest.Pytester, xdist: list[str]) -> None:
    project(pytester, {})
    release = threading.Event()

    def respond(body: dict[str, Any]) -> Any:
        if body["question"] == f"q{LAST}":
            release.wait(60)
        return answer("A.", [chunk("docs/a.md", "# A", 1)])

    root = pytester.path
    with AskServer(respond) as server:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "-p",
            "no:cacheprovider",
            "-o",
            "rageval_timeout=600",
            "--rageval-concurrency=1",
            *xdist,
        ]
        try:
            proc, took = run_until(
                cmd, root, lambda: f"q{LAST}" in server.questions() and finished_lines(root) == CASES - 1
            )
        finally:
            release.set()
    assert_kept_and_incomplete(root, proc, took)
