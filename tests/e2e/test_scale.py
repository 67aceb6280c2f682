"""Concurrency, shards, merge, interrupted and resumed runs (SPEC section 8)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}


def fails(i: int) -> bool:
    """Case i needs mrr >= 1 when i % 4 == 0; its gold sits at rank 1 + i % 3."""
    return i % 4 == 0 and i % 3 != 0


def cases(n: int) -> str:
    rows = []
    for i in range(n):
        case: dict[str, Any] = {"id": f"c{i:03d}", "question": f"q{i}", "gold_supports": [GOLD], "tags": [f"t{i % 3}"]}
        if i % 4 == 0:
            case["thresholds"] = {"mrr": 1}
        rows.append(json.dumps(case))
    return "\n".join(rows) + "\n"


def ranked(body: dict[str, Any]) -> Any:
    i = int(body["question"][1:])
    gold = chunk("docs/a.md", "# A", 1 + i % 3)
    others = [chunk(f"o{j}.md", "# O", j) for j in range(1, 5) if j != 1 + i % 3]
    return answer("A.", [gold, *others], references=[gold] if i % 2 else [])


def slow(delay: float) -> Callable[[dict[str, Any]], Any]:
    def respond(body: dict[str, Any]) -> Any:
        time.sleep(delay)
        return ranked(body)

    return respond


def metrics_of(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "metrics.json").read_text())
    for volatile in ("run_id", "timestamp"):
        data.pop(volatile)
    data.pop("session", None)  # the pytest session's exit status and parts: `rageval merge` ran none
    data["aggregate_metrics"].pop("latency")
    for case in data["cases"].values():
        case["metrics"].pop("latency_ms", None)
    return data


def latest(root: Path) -> Path:
    return root / (root / "latest").read_text().strip()


def test_cases_report_in_collection_order_with_random_latencies(pytester: pytest.Pytester) -> None:
    rng = random.Random(1)
    delays = {f"q{i}": rng.uniform(0.0, 0.15) for i in range(24)}

    def respond(body: dict[str, Any]) -> Any:
        time.sleep(delays[body["question"]])
        return ranked(body)

    pytester.makefile(".jsonl", **{"eval_sets/s": cases(24)})
    with AskServer(respond) as server:
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-v", "--rageval-concurrency=8"
        )
    reported = [
        line.split("::")[1].split()[0] for line in result.stdout.lines if line.startswith("eval_sets/s.jsonl::c")
    ]
    assert reported == [f"c{i:03d}" for i in range(24)]
    failing = sum(fails(i) for i in range(24))
    result.assert_outcomes(passed=24 - failing, failed=failing)


def test_two_shards_merged_equal_the_unsharded_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", **{"eval_sets/s": cases(30)})
    with AskServer(ranked) as server:
        base = ["--rageval", f"--rageval-target={server.url}", "-p", "no:cacheprovider"]
        whole = pytester.runpytest(*base, "--rageval-output=whole")
        one = pytester.runpytest(*base, "--rageval-output=s1", "--rageval-shard=1/2")
        two = pytester.runpytest(*base, "--rageval-output=s2", "--rageval-shard=2/2", "-n", "2")
    counts = [r.parseoutcomes().get("passed", 0) + r.parseoutcomes().get("failed", 0) for r in (one, two)]
    assert counts[0] > 0 and counts[1] > 0 and sum(counts) == 30
    merged = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_rageval.cli",
            "merge",
            str(latest(pytester.path / "s1")),
            str(latest(pytester.path / "s2")),
            "-o",
            "merged",
        ],
        cwd=pytester.path,
        capture_output=True,
        text=True,
    )
    assert merged.returncode == 0, merged.stderr
    assert "30 cases" in merged.stdout
    assert metrics_of(latest(pytester.path / "merged")) == metrics_of(latest(pytester.path / "whole"))
    assert whole.ret == 1  # every fourth case misses mrr >= 1


def _run_and_interrupt(project: Path, url: str, sig: int, ready: Any) -> tuple[subprocess.Popen[str], Path]:
    """Start a run (concurrency 2), send ``sig`` once ``ready(lines of results.jsonl)`` holds, wait for the exit."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--rageval",
        "--rageval-judge=none",
        f"--rageval-target={url}",
        "-p",
        "no:cacheprovider",
        "--rageval-concurrency=2",
        "-q",
    ]
    proc = subprocess.Popen(cmd, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    results: list[Path] = []
    while time.time() < deadline:
        results = list((project / "results").glob("*/results.jsonl"))
        if results and ready(len(results[0].read_text().splitlines())):
            break
        time.sleep(0.05)
    assert results, "the run never wrote results"
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    return proc, results[0].parent


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupted_run_keeps_finished_cases_cancels_the_rest_and_resumes(pytester: pytest.Pytester, sig: int) -> None:
    pytester.makefile(".jsonl", **{"eval_sets/s": cases(20)})
    interrupted = threading.Event()

    def respond(body: dict[str, Any]) -> Any:
        if int(body["question"][1:]) >= 8:
            interrupted.wait(timeout=30)  # q8 and q9 hold both slots until the run is interrupted
        return slow(0.05)(body)

    with AskServer(respond) as server:

        def ready(lines: int) -> bool:  # q0-q7 reported, q8 and q9 in flight, the next cases queued for a slot
            return lines >= 8 and {"q8", "q9"} <= set(server.questions())

        proc, run_dir = _run_and_interrupt(pytester.path, server.url, sig, ready)
        interrupted.set()
        assert proc.returncode != 0
        # The interrupt cancelled everything started ahead: no queued case took a slot that the interrupt freed.
        assert sorted(server.questions(), key=lambda q: int(q[1:])) == [f"q{i}" for i in range(10)]
        metrics = json.loads((run_dir / "metrics.json").read_text())
        finished = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
        assert metrics["complete"] is False
        assert len(finished) == 8 and metrics["total_tests"] == 8
        asked_before = len(server.requests)

        resumed = pytester.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", f"--rageval-resume={run_dir}"
        )
        assert len(server.requests) - asked_before == 20 - len(finished)
    failing = sum(fails(i) for i in range(20))
    resumed.assert_outcomes(
        passed=20 - failing - sum(1 for r in finished if r["outcome"] == "passed"),
        failed=failing - sum(1 for r in finished if r["outcome"] == "failed"),
    )
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["complete"] is True and metrics["total_tests"] == 20
    keys = [json.loads(line)["key"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(keys) == sorted(f"eval_sets/s.jsonl::c{i:03d}" for i in range(20))


def test_exitfirst_stops_marks_incomplete_and_cancels_the_rest(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", **{"eval_sets/s": cases(40)})
    with AskServer(slow(0.05)) as server:
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-x", "--rageval-concurrency=4"
        )
        time.sleep(0.3)
        asked = len(server.requests)
    result.assert_outcomes(passed=4, failed=1)  # c000-c003 pass, c004 is the first failure
    assert not (pytester.path / "results" / "latest").exists()  # an incomplete run does not move `latest`
    (run_dir,) = (pytester.path / "results").iterdir()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["complete"] is False
    # c000-c004, plus at most the look-ahead window (2 x concurrency) started while c004 ran; never the whole set
    assert asked <= 5 + 2 * 4


def test_cases_that_conftest_code_skips_at_setup_send_nothing(pytester: pytest.Pytester, xdist: list[str]) -> None:
    pytester.makefile(".jsonl", **{"eval_sets/s": cases(12)})
    pytester.makeconftest(
        """
        import pytest

        def pytest_runtest_setup(item):
            if item.name in ("c004", "c005"):
                pytest.skip("skipped by a hook")

        @pytest.fixture(autouse=True)
        def gate(request):
            if request.node.name == "c009":
                pytest.skip("skipped by a fixture")
        """
    )
    with AskServer(ranked) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", *xdist)
        asked = sorted(server.questions(), key=lambda q: int(q[1:]))
    result.assert_outcomes(
        passed=12 - 3 - sum(fails(i) for i in range(12) if i not in (4, 5, 9)),
        failed=sum(fails(i) for i in range(12) if i not in (4, 5, 9)),
        skipped=3,
    )
    assert asked == [f"q{i}" for i in range(12) if i not in (4, 5, 9)]
    result.stdout.fnmatch_lines(["*12 cases ran one at a time: conftest code*"])


def test_exitfirst_on_the_last_case_leaves_a_complete_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".jsonl", **{"eval_sets/s": "".join(cases(5).splitlines(keepends=True)[1:])}
    )  # c001-c004: c004 fails
    with AskServer(ranked) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-x")
    result.assert_outcomes(passed=3, failed=1)
    assert json.loads((latest(pytester.path / "results") / "metrics.json").read_text())["complete"] is True
