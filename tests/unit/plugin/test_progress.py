"""The terminal while one slow case is awaited and the cases after it finish (progress.py): ``-v`` says each
finished case at once; captured, non-verbose output stays as it was. Ordered by events, not sleeps: the slow
case's answer waits until the last case's request arrived (or, with ``-v``, until the run said the case before
it finished), which is sent only once the cases between finished."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}
# "warm" first: a target's first call goes out alone (first_call), then "slow" and the others run together
IDS = ["warm", "slow", "q2", "q3", "q4", "q5"]


def _server() -> AskServer:
    last_asked = threading.Event()

    def respond(body: dict[str, Any]) -> Any:
        if body["question"] == "slow":
            # concurrency 2: one slot holds this case, the other runs q2, q3, q4 and then q5 one after another
            last_asked.wait(timeout=60)
        if body["question"] == "q5":
            last_asked.set()
        return answer("A.", [chunk("docs/a.md", "# A", 1)])

    return AskServer(respond)


def _eval_set(pytester: pytest.Pytester) -> None:
    rows = [json.dumps({"id": i, "question": i, "gold_supports": [GOLD]}) for i in IDS]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(rows) + "\n"})


def _args(url: str, *more: str) -> list[str]:
    return [
        "--rageval",
        "--rageval-judge=none",
        f"--rageval-target={url}",
        "--rageval-concurrency=2",
        "-p",
        "no:cacheprovider",
        *more,
    ]


def _command(url: str, *more: str) -> list[str]:
    """The run as a subprocess (its output is read as it is written)."""
    import sys

    return [sys.executable, "-m", "pytest", *_args(url, *more)]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    _eval_set(pytester)
    with _server() as server:
        return pytester.runpytest(*_args(server.url, *args))


def test_verbose_says_each_case_that_finished_while_a_slow_one_is_awaited(pytester: pytest.Pytester) -> None:
    """The slow case's answer waits until the run has said q4 finished (read from its output as it is written),
    so q2, q3 and q4 are said while "slow" is still in flight, however late the main thread is scheduled."""
    import subprocess

    _eval_set(pytester)
    q4_said = threading.Event()

    def respond(body: dict[str, Any]) -> Any:
        if body["question"] == "slow":
            q4_said.wait(timeout=60)
        return answer("A.", [chunk("docs/a.md", "# A", 1)])

    with AskServer(respond) as server:
        proc = subprocess.Popen(
            _command(server.url, "-v"),
            cwd=pytester.path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("finished: eval_sets/s.jsonl::q4 "):
                q4_said.set()
        q4_said.set()
        assert proc.wait(timeout=60) == 0, "\n".join(lines)
    output = "\n".join(lines)
    assert re.search(r"^=+ 6 passed", output, re.M), output
    start = next(i for i, line in enumerate(lines) if line.startswith("eval_sets/s.jsonl::slow"))
    slow_reported = next(i for i in range(start, len(lines)) if "PASSED" in lines[i])
    said = {
        m.group(1): (i, m)
        for i, line in enumerate(lines)
        if (m := re.fullmatch(r"finished: eval_sets/s\.jsonl::(\w+) \((\d) of 6, (\d) in flight\)", line))
    }
    # q2, q3 and q4 finished while "slow" was awaited: each said so before "slow" reported
    for case in ("q2", "q3", "q4"):
        assert case in said and said[case][0] < slow_reported, output
    counts = [int(said[c][1].group(2)) for c in ("q2", "q3", "q4")]
    assert counts == sorted(counts) and counts[0] >= 1
    assert all(1 <= int(said[c][1].group(3)) <= 5 for c in ("q2", "q3", "q4"))  # "slow" at least is in flight
    # pytest's own lines stay: each case's line once, in collection order, with its outcome
    located = [line.split("::")[1].split()[0] for line in lines if line.startswith("eval_sets/s.jsonl::")]
    assert located == IDS
    assert lines[slow_reported].lstrip().startswith("PASSED")  # after our lines, as after pytest's live logs
    assert "rageval: " not in " ".join(line for line in lines if "in flight" in line)


def test_captured_output_without_v_is_unchanged(pytester: pytest.Pytester) -> None:
    result = _run(pytester)
    result.assert_outcomes(passed=6)
    out = result.stdout.str()
    assert "finished:" not in out and "in flight" not in out
    assert re.search(r"^eval_sets/s\.jsonl \.{6}\s+\[100%\]$", out, re.M), out


def test_on_a_terminal_without_v_an_in_flight_line_says_how_far_the_run_is(pytester: pytest.Pytester) -> None:
    """A real terminal (a pseudo-terminal): one line when cases finish ahead of the awaited one, not one per case."""
    import os
    import subprocess

    _eval_set(pytester)
    main, secondary = os.openpty()
    with _server() as server:
        proc = subprocess.Popen(
            _command(server.url), cwd=pytester.path, stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary
        )
        os.close(secondary)
        out = b""
        while True:
            try:
                chunk_ = os.read(main, 65536)
            except OSError:  # the terminal closed: the run ended
                break
            if not chunk_:
                break
            out += chunk_
        assert proc.wait(timeout=120) == 0
    os.close(main)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.decode(errors="replace")).replace("\r\n", "\n")
    said = re.findall(
        r"^rageval: (\d) of 6 cases finished, (\d) in flight, waiting on eval_sets/s\.jsonl::(\w+)$", text, re.M
    )
    # one line (the next may come only 5 s later): about "slow", or about "warm" when a loaded machine let a case
    # finish before pytest's main thread reported "warm"
    assert 1 <= len(said) <= 5 and {case for *_, case in said} <= {"warm", "slow"}, text
    assert "finished: " not in text
    assert re.search(r"^\.+\s+\[100%\]$", text, re.M), text
