"""The gate as a session and `rageval` show it: comparable runs only, partial runs, failures that look like failures."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}
ANSI_RED = "\x1b[31m"


class System:
    """The gold chunk at ``rank`` (rank 2 halves mrr); ``down`` answers 500 to everything."""

    def __init__(self) -> None:
        self.rank = 1
        self.down = False

    def __call__(self, body: dict[str, Any]) -> Any:
        if self.down:
            return 500, {"detail": "the index is rebuilding"}
        gold = chunk("docs/a.md", "# A > ## Part", self.rank)
        other = chunk("docs/b.md", "# B", 2 if self.rank == 1 else 1)
        return answer("An answer.", [gold, other], references=[gold])


def eval_set(pytester: pytest.Pytester, name: str, ids: list[str]) -> None:
    cases = [{"id": i, "question": f"q-{i}", "gold_supports": [GOLD], "tags": [i.rstrip("0123456789")]} for i in ids]
    pytester.makefile(".jsonl", **{name: "\n".join(json.dumps(c) for c in cases) + "\n"})


def rageval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_rageval.cli", *args], capture_output=True, text=True, cwd=cwd)


def runs(root: Path) -> list[Path]:
    """Run folders, oldest first (run ids made in the same second do not sort by time)."""
    return sorted(
        (p.parent for p in (root / "results").glob("*/metrics.json")),
        key=lambda d: (d / "metrics.json").stat().st_mtime_ns,
    )


def latest(root: Path) -> str:
    return (root / "results" / "latest").read_text().strip()


def base_args(url: str, *extra: str) -> list[str]:
    return ["--rageval", "--rageval-judge=none", f"--rageval-target={url}", "-p", "no:cacheprovider", *extra]


def test_a_k_subset_is_gated_on_its_shared_cases_and_leaves_latest(pytester: pytest.Pytester, xdist: list[str]) -> None:
    eval_set(pytester, "eval_sets/s", [f"stip{i}" for i in range(3)] + [f"other{i}" for i in range(5)])
    system = System()
    with AskServer(system) as server:
        args = base_args(server.url, "--rageval-baseline=base.json", *xdist)
        assert pytester.runpytest(*args, "--rageval-update-baseline").ret == 0
        full = latest(pytester.path)
        subset = pytester.runpytest(*args, "-k", "stip")
        system.rank = 2
        worse = pytester.runpytest(*args, "-k", "stip")
    assert subset.ret == 0, subset.stdout.str()
    subset.stdout.fnmatch_lines(
        [
            "run PARTIAL: 3 of the 8 cases of the eval set were selected",
            "baseline: no regression",
            "  compared on 3 shared cases of 8 in the baseline and 3 in this run",
            "*results/latest not moved: a partial run (3 of 8 cases selected)",
        ]
    )
    assert latest(pytester.path) == full  # the subset runs wrote their folders but did not move `latest`
    first_subset, worse_subset = runs(pytester.path)[-2:]
    metrics = json.loads((first_subset / "metrics.json").read_text())
    assert (metrics["partial"], metrics["cases_in_eval_set"], metrics["cases_selected"], metrics["shard"]) == (
        True,
        8,
        3,
        None,
    )
    assert metrics["all_error"] is False
    block = metrics["comparison"]
    assert (block["status"], block["shared_cases"], block["baseline_cases"], block["current_cases"]) == (
        "no regression",
        3,
        8,
        3,
    )
    assert block["baseline"] == str(pytester.path / "base.json")
    assert "Not charted: this run (partial)" in (first_subset / "report.html").read_text()

    assert worse.ret == 1
    worse.stdout.fnmatch_lines(
        [
            "  compared on 3 shared cases of 8 in the baseline and 3 in this run",
            "  mrr_avg: 1.000 → 0.500 (-0.500; 95% CI -0.500..-0.500; tolerance 0.050) REGRESSED",
        ]
    )
    compared = rageval("compare", "base.json", str(worse_subset), cwd=pytester.path)
    assert compared.returncode == 1
    assert compared.stdout.splitlines()[0] == "compared on 3 shared cases of 8 in the baseline and 3 in this run"
    same = rageval("compare", str(first_subset), str(first_subset), cwd=pytester.path)
    assert same.returncode == 0 and "compared on 3 shared cases of 3 in the baseline and 3 in this run" in same.stdout


def test_another_file_selection_is_compared_on_the_cases_both_runs_share(pytester: pytest.Pytester) -> None:
    eval_set(pytester, "eval_sets/a", ["a1", "a2"])
    eval_set(pytester, "eval_sets/b", ["b1", "b2", "b3"])
    with AskServer(System()) as server:
        args = base_args(server.url, "--rageval-baseline=base.json")
        pytester.runpytest(*args, "--rageval-update-baseline")
        only_a = pytester.runpytest(*args, "eval_sets/a.jsonl")
        (pytester.path / "eval_sets" / "a.jsonl").write_text(json.dumps({"id": "a1", "question": "changed"}) + "\n")
        changed = pytester.runpytest(*args, "eval_sets/a.jsonl")
    assert only_a.ret == 0, only_a.stdout.str()
    only_a.stdout.fnmatch_lines(["  compared on 2 shared cases of 5 in the baseline and 2 in this run"])
    assert changed.ret == 1  # the file both runs ran lost a2 and changed a1: nothing unchanged is left to compare
    changed.stdout.fnmatch_lines(
        ["baseline refused*", "  only 0 unchanged cases shared with the baseline, fewer than 1*"]
    )


def test_an_all_error_run_is_not_compared_and_leaves_latest(pytester: pytest.Pytester) -> None:
    eval_set(pytester, "eval_sets/s", ["c1", "c2"])
    system = System()
    with AskServer(system) as server:
        args = base_args(server.url, "--rageval-baseline=base.json")
        pytester.runpytest(*args, "--rageval-update-baseline")
        good = latest(pytester.path)
        system.down = True
        down = pytester.runpytest(*args)
    down.assert_outcomes(errors=2)
    down.stdout.fnmatch_lines(
        [
            "every case ERRORED: no metric was scored",
            "baseline: NOT COMPARED",
            "  compared on 2 shared cases of 2 in the baseline and 2 in this run",
            "  not compared: every case of this run errored (2 of 2); no metric to compare",
            "*results/latest not moved: every case errored",
        ]
    )
    assert "no regression" not in down.stdout.str() and "REGRESSION" not in down.stdout.str()
    assert down.stdout.lines[-1].startswith(
        "= rageval FAILED (exit 1): 0 new failures, 2 errors, gate FAILED: not compared with the baseline: every case of this run errored"
    )
    assert latest(pytester.path) == good
    metrics = json.loads((runs(pytester.path)[-1] / "metrics.json").read_text())
    assert metrics["all_error"] is True and metrics["partial"] is False
    assert metrics["comparison"]["status"] == "not compared"
    compared = rageval("compare", "base.json", str(runs(pytester.path)[-1]), cwd=pytester.path)
    assert compared.returncode == 2 and compared.stdout.rstrip().endswith("not compared")


def test_a_gate_failure_is_the_last_line_and_red(pytester: pytest.Pytester) -> None:
    eval_set(pytester, "eval_sets/s", ["c1", "c2"])
    system = System()
    with AskServer(system) as server:
        args = base_args(server.url, "--rageval-baseline=base.json", "--color=yes")
        pytester.runpytest(*args, "--rageval-update-baseline")
        system.rank = 2
        result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2)  # every case passed, and yet the session failed
    assert result.ret == 1
    lines = [line for line in result.stdout.lines if line.strip()]
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines]
    assert re.fullmatch(r"=+ 2 passed in .* =+", plain[-2])  # pytest's own summary line comes first
    assert plain[-1].startswith(
        "= rageval FAILED (exit 1): 0 new failures, gate FAILED: regression: mrr_avg 1.000 → 0.500 (-0.500, tolerance 0.050) ="
    )
    assert lines[-1].startswith(ANSI_RED)
    regressed = [line for line in lines if "REGRESSED" in line]
    assert regressed and all(ANSI_RED in line for line in regressed)
    assert any(ANSI_RED in line and "baseline: REGRESSION" in line for line in lines)


def test_shard_runs_move_latest_and_history_groups_runs_by_eval_set(pytester: pytest.Pytester) -> None:
    eval_set(pytester, "eval_sets/s", [f"c{i}" for i in range(6)])
    eval_set(pytester, "other/t", ["t1"])
    system = System()
    with AskServer(system) as server:
        assert pytester.runpytest(*base_args(server.url, "eval_sets")).ret == 0
        assert pytester.runpytest(*base_args(server.url, "eval_sets", "-k", "c1")).ret == 0
        assert pytester.runpytest(*base_args(server.url, "eval_sets", "--rageval-shard=1/2")).ret == 0
        shard = latest(pytester.path)
        assert pytester.runpytest(*base_args(server.url, "other")).ret == 0
        system.down = True
        pytester.runpytest(*base_args(server.url, "eval_sets"))
    shard_metrics = json.loads((pytester.path / "results" / shard / "metrics.json").read_text())
    assert shard_metrics["shard"] == "1/2" and shard_metrics["partial"] is True  # it moved `latest` all the same
    history = rageval("history", "results", cwd=pytester.path)
    assert history.returncode == 0
    blocks = history.stdout.strip().split("\n\n")
    assert len(blocks) == 2
    first, second = (block.splitlines() for block in blocks)
    assert re.fullmatch(r"eval set [0-9a-f]{12} \(eval_sets/s\.jsonl\): 4 runs", first[0])
    assert first[1].endswith("passed/total  target, matrix, tree; note")
    target = "http://127.0.0.1:"
    assert re.search(rf"6/6\s+{target}\d+/api/v1/ask$", first[2])  # the whole run: its target, no note
    assert re.search(rf"1/1\s+{target}\d+/api/v1/ask, partial 1/6$", first[3])
    assert re.search(r"ask, shard 1/2, partial \d/6$", first[4])
    assert first[5].endswith("ask, all errors")
    assert re.fullmatch(r"eval set [0-9a-f]{12} \(other/t\.jsonl\): 1 run", second[0])
