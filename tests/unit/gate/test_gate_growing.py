"""A gate that lives with a growing eval set: cases compared while their definition holds, the others named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from ask_server import AskServer, answer, chunk

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}


class System:
    """The gold chunk at rank 1, or at the rank ``ranks`` gives a question (rank 2 halves its mrr)."""

    def __init__(self) -> None:
        self.ranks: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> Any:
        rank = self.ranks.get(body["question"], 1)
        gold = chunk("docs/a.md", "# A > ## Part", rank)
        other = chunk("docs/b.md", "# B", 2 if rank == 1 else 1)
        return answer("An answer.", [gold, other], references=[gold])


def case(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"c{i}", "question": f"q-{i}", "reference_answer": "An answer.", "gold_supports": [GOLD], **extra}


def write(pytester: pytest.Pytester, cases: list[dict[str, Any]]) -> None:
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in cases) + "\n"})


def args(url: str, *extra: str) -> list[str]:
    return [
        "--rageval",
        "--rageval-judge=none",
        f"--rageval-target={url}",
        "-p",
        "no:cacheprovider",
        "--rageval-baseline=base",
        *extra,
    ]


def latest_metrics(root: Path) -> dict[str, Any]:
    run = (root / "results" / "latest").read_text().strip()
    return cast("dict[str, Any]", json.loads((root / "results" / run / "metrics.json").read_text()))


def grown(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Three cases added, c5's reference answer edited, c7 deleted."""
    edited = [dict(c, reference_answer="Another answer.") if c["id"] == "c5" else c for c in cases if c["id"] != "c7"]
    return edited + [case(i) for i in range(20, 23)]


def test_an_edited_eval_set_is_gated_on_its_unchanged_cases(pytester: pytest.Pytester) -> None:
    cases = [case(i) for i in range(20)]
    write(pytester, cases)
    system = System()
    with AskServer(system) as server:
        assert pytester.runpytest(*args(server.url, "--rageval-update-baseline")).ret == 0
        write(pytester, grown(cases))
        unchanged = pytester.runpytest(*args(server.url))
        compared = latest_metrics(pytester.path)["comparison"]
        system.ranks = {"q-5": 2, "q-20": 2}  # only the changed and an added case get worse: nothing gated moved
        only_new = pytester.runpytest(*args(server.url))
        system.ranks = {f"q-{i}": 2 for i in range(4)}  # four of the 18 compared cases halve their mrr
        regressed = pytester.runpytest(*args(server.url))
    assert unchanged.ret == 0, unchanged.stdout.str()
    unchanged.stdout.fnmatch_lines(
        [
            "*compared on 18 shared cases of 20 in the baseline and 22 in this run (3 added, 1 changed, 1 removed)*",
            "*cases added since the baseline (not compared):",
            "*eval_sets/s.jsonl::c20*",
        ]
    )
    unchanged.stdout.fnmatch_lines(["*cases changed since the baseline*", "*eval_sets/s.jsonl::c5*"])
    unchanged.stdout.fnmatch_lines(["*cases removed since the baseline:", "*eval_sets/s.jsonl::c7*"])
    assert compared["status"] == "no regression" and compared["shared_cases"] == 18
    assert compared["added_cases"] == [f"eval_sets/s.jsonl::c{i}" for i in (20, 21, 22)]
    assert compared["changed_cases"] == ["eval_sets/s.jsonl::c5"] and compared["removed_cases"] == [
        "eval_sets/s.jsonl::c7"
    ]
    assert only_new.ret == 0, only_new.stdout.str()
    assert regressed.ret == 1
    regressed.stdout.fnmatch_lines(["*rageval FAILED (exit 1): 0 new failures, gate FAILED: regression: mrr_avg*"])


def test_the_ci_summary_and_report_name_the_cases_not_compared(pytester: pytest.Pytester) -> None:
    cases = [case(i) for i in range(12)]
    write(pytester, cases)
    with AskServer(System()) as server:
        assert pytester.runpytest(*args(server.url, "--rageval-update-baseline")).ret == 0
        write(pytester, grown(cases))
        result = pytester.runpytest(*args(server.url, "--rageval-summary-md=summary.md"))
    assert result.ret == 0, result.stdout.str()
    summary = (pytester.path / "summary.md").read_text()
    assert "**Added since the baseline (not compared) (3)**" in summary and "c21" in summary
    assert (
        "**Changed since the baseline (not compared) (1)**" in summary
        and "**Removed since the baseline (1)**" in summary
    )
    run = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    page = (run / "report.html").read_text()
    assert "3 added since the baseline" in page and "1 changed since the baseline" in page
    assert "1 removed since the baseline" in page and "<code>eval_sets/s.jsonl::c7</code>" in page


def test_too_few_unchanged_cases_or_another_k_refuse_the_baseline(pytester: pytest.Pytester) -> None:
    cases = [case(i) for i in range(12)]
    write(pytester, cases)
    with AskServer(System()) as server:
        assert pytester.runpytest(*args(server.url, "--rageval-update-baseline")).ret == 0
        write(pytester, [dict(c, reference_answer="edited") if int(c["id"][1:]) < 3 else c for c in cases])
        few = pytester.runpytest(*args(server.url, "-o", "rageval_min_shared_cases=10"))  # 9 unchanged
        enough = pytester.runpytest(*args(server.url, "-o", "rageval_min_shared_cases=9"))
        other_k = pytester.runpytest(*args(server.url, "--rageval-k=3"))
        ignored = pytester.runpytest(*args(server.url, "--rageval-k=3", "--rageval-ignore-invariants"))
    assert few.ret == 1
    few.stdout.fnmatch_lines(
        [
            "*baseline refused: only 9 unchanged cases shared with the baseline, fewer than 10 (rageval_min_shared_cases)*"
        ]
    )
    assert enough.ret == 0, enough.stdout.str()
    assert other_k.ret == 1
    other_k.stdout.fnmatch_lines(["*baseline refused: k differs: baseline 5 vs this run 3*"])
    assert ignored.ret == 0, ignored.stdout.str()


def test_a_resume_after_an_edit_is_refused_naming_the_changed_cases(pytester: pytest.Pytester) -> None:
    cases = [case(i) for i in range(4)]
    write(pytester, cases)
    with AskServer(System()) as server:
        base = ["--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-p", "no:cacheprovider"]
        assert pytester.runpytest(*base).ret == 0
        run = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
        results = run / "results.jsonl"
        lines = results.read_text().splitlines(keepends=True)
        results.write_text("".join(lines[:2]))  # the run "stopped" after c0 and c1
        write(pytester, [dict(c, question="reworded") if c["id"] == "c1" else c for c in cases])
        resumed = pytester.runpytest(*base, f"--rageval-resume={run}")
        asked = len(server.requests)
    assert resumed.ret == 4
    resumed.stderr.fnmatch_lines(
        ["*cannot resume*1 case changed in the eval set since the run recorded it (eval_sets/s.jsonl::c1)*"]
    )
    assert asked == 4  # the refused resume sent nothing
    assert results.read_text() == "".join(lines[:2])
