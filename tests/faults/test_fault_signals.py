"""SIGTERM at the end of a session, and the temp folder of a session killed with SIGKILL.

A SIGTERM that arrives after the last case (here: sent by a conftest's ``pytest_sessionfinish``, which runs
after the plugin's) used to get the default action: no summary, and under pytest-xdist the run's temp folder
(the stop file, the retrieval cache) left behind. The temp folder of a session killed with SIGKILL is removed
by the next xdist session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_rageval.engine.signals import held

RAG = "def ask(question, params):\n    return {'answer': 'The fee is 5.', 'retrieved_chunks': [{'rel_path': 'a.md', 'text': 'The fee is 5.'}]}\n"
SIGTERM_AT_THE_END = (
    "import os, signal\n\n\n"
    "def pytest_sessionfinish(session):\n"
    "    if not hasattr(session.config, 'workerinput'):\n"
    "        os.kill(os.getpid(), signal.SIGTERM)\n"
)


def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makepyfile(rag=RAG)
    (pytester.path / "eval_sets").mkdir()
    lines = [
        {"id": f"c{i}", "question": f"What is fee {i}?", "gold_supports": [{"rel_path": "a.md"}]} for i in range(4)
    ]
    (pytester.path / "eval_sets" / "s.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    tmp = pytester.path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--rageval", "--rageval-judge=none", "--rageval-target=rag:ask", "-p", "no:cacheprovider", *extra, timeout=300
    )


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_sigterm_after_the_last_case_ends_with_the_summary_and_no_temp_folder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    tmp = project(pytester, monkeypatch)
    pytester.makeconftest(SIGTERM_AT_THE_END)
    result = run(pytester, *workers)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(
        [
            "*rageval summary*",
            "cases: 4 passed*",
            "run: *(metrics.json, results.jsonl, report.html)",
            "rageval: SIGTERM arrived after the last case*",
        ]
    )
    assert not list(tmp.glob("rageval-*"))


def test_the_temp_folder_of_a_session_killed_with_sigkill_is_removed_by_the_next(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = project(pytester, monkeypatch)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is free now
    orphan = tmp / "rageval-stop-orphan"
    (orphan / "retrieval").mkdir(parents=True)
    (orphan / "owner").write_text(str(dead.pid))
    alive = tmp / "rageval-stop-alive"
    alive.mkdir()
    (alive / "owner").write_text(str(os.getpid()))  # a session still running: kept
    result = run(pytester, "-n", "2")
    assert result.ret == 0
    assert not orphan.exists() and alive.exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_inside_held_arrives_when_the_block_ends(signum: int) -> None:
    """The record is written and counted (the whole block runs), then the signal reaches the handler of before."""
    steps: list[str] = []

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signum)

    previous = signal.signal(signum, interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            with held():
                steps.append("written")
                os.kill(os.getpid(), signum)
                time.sleep(0.05)  # a signal is handled between bytecodes: it would have landed here
                steps.append("counted")
            steps.append("after")
        assert steps == ["written", "counted"] and signal.getsignal(signum) is interrupted
    finally:
        signal.signal(signum, previous)
