"""A judge server that dies mid-run: one line says so, the cases after it are errors naming it, no retry storm.

The judge is a real process (``tests/helpers/openai_server.py --die-after 2``) that answers two chat completions and then
kills itself with SIGKILL, as a local LLM server that crashes does: its port refuses connections from then on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk

SERVER = Path(__file__).resolve().parents[1] / "helpers" / "openai_server.py"
CASES = 12
#: A case whose judge requests all go out and all wait out every retry (6 attempts, backoff up to 30 s) takes about
#: a minute once the server is gone; the run must end long before twelve of them would.
STORM_FREE_SECONDS = 45


@pytest.fixture
def dying_judge() -> Iterator[str]:
    """The base URL of a judge server that dies after answering two chat completions."""
    proc = subprocess.Popen([sys.executable, str(SERVER), "--die-after", "2"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _rag(body: dict[str, Any]) -> dict[str, Any]:
    gold = chunk("docs/a.md", "# A", 1, text="The Foundation proposed STIP.")
    return answer("The Foundation proposed STIP [1].", [gold])


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_judge_that_dies_after_two_verdicts_is_named_once_and_the_rest_are_errors(
    pytester: pytest.Pytester, dying_judge: str, workers: list[str]
) -> None:
    cases = [
        {"id": f"c{i}", "question": f"Who proposed STIP {i}?", "gold_supports": [{"rel_path": "docs/a.md"}]}
        for i in range(CASES)
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in cases) + "\n"})
    pytester.makefile(".toml", pyproject='[tool.rageval.judge]\nmetrics = ["groundedness"]\n')  # one request a case
    with AskServer(_rag) as rag:
        started = time.monotonic()
        result = pytester.runpytest_subprocess(
            "--rageval",
            f"--rageval-target={rag.url}",
            "--rageval-judge=openai",
            "--rageval-judge-model=m",
            f"--rageval-judge-base-url={dying_judge}",
            "--rageval-no-cache",
            "-p",
            "no:cacheprovider",
            *workers,
        )
        took = time.monotonic() - started
    out = result.stdout.str()
    summary = out[out.index("rageval summary") :].partition("short test summary info")[0]  # the section alone
    line = f"the judge at {dying_judge} stopped answering after 2 verdicts: the cases judged after that are errors"
    assert summary.count("stopped answering") == 1 and line in summary, summary
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 2 and outcomes.get("errors", 0) == CASES - 2, out[-3000:]
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run_dir = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    errors = [
        json.loads(line)["error"]
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if json.loads(line).get("error")
    ]
    assert len(errors) == CASES - 2
    for error in errors:
        assert (
            error["kind"] == "judge"
            and f"the judge at {dying_judge} stopped answering (connection refused)" in error["message"]
        ), error
        assert "failed after 6 attempts" not in error["message"]
    assert took < STORM_FREE_SECONDS, f"{took:.1f} s: a retry storm ({out[-2000:]})"
