"""`--rageval-spot-check N` re-judges exactly N judged cases with a second model (issue 7, SPEC section 8)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from ask_server import AskServer, answer, chunk
from openai_server import OpenAIServer, metric_of, ok, user_text, verdicts

ANSWERABLE = [f"question-{name}" for name in ("alpha", "bravo", "charlie", "delta", "echo")]
UNANSWERABLE = ["question-mars", "question-venus", "question-pluto"]  # the system abstains: no judge metric applies
PRIMARY = verdicts()


def rag(body: dict[str, Any]) -> Any:
    gold = chunk("docs/a.md", "# A", 1, text="A fact.")
    if body["question"] in UNANSWERABLE:
        return answer("I cannot answer that.", [gold], abstained=True)
    return answer("A fact.", [gold])


def judges(body: dict[str, Any], headers: dict[str, Any]) -> Any:
    if body["model"] == "judge-model-b" and metric_of(body) == "groundedness" and "question-bravo" in user_text(body):
        return ok(
            json.dumps({"reasoning": "Invented.", "score": 1, "supported_claims": [], "unsupported_claims": ["x"]})
        )
    return PRIMARY(body, headers)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("RAGEVAL_JUDGE_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    cases: list[dict[str, Any]] = [
        {"id": q, "question": q, "gold_supports": [{"rel_path": "docs/a.md"}]} for q in ANSWERABLE
    ]
    cases += [{"id": q, "question": q, "answerable": False} for q in UNANSWERABLE]
    pytester.makefile(".jsonl", **{"eval_sets/j": "\n".join(json.dumps(c) for c in cases) + "\n"})
    return pytester


def run(pytester: pytest.Pytester, n: int, *extra: str) -> tuple[pytest.RunResult, set[str], dict[str, Any]]:
    """Run with ``--rageval-spot-check n``; the questions the second model judged, and judge_reliability."""
    with AskServer(rag) as ragsrv, OpenAIServer(judges) as judge:
        result = pytester.runpytest(
            "--rageval",
            f"--rageval-target={ragsrv.url}",
            "--rageval-judge=openai",
            "--rageval-judge-model=judge-model",
            f"--rageval-judge-base-url={judge.base_url}",
            "--rageval-no-cache",
            f"--rageval-spot-check={n}",
            "--rageval-spot-check-model=judge-model-b",
            *extra,
        )
        second = {
            q
            for b in judge.bodies()
            if b["model"] == "judge-model-b"
            for q in ANSWERABLE + UNANSWERABLE
            if q in user_text(b)
        }
    result.assert_outcomes(passed=len(ANSWERABLE) + len(UNANSWERABLE))
    return result, second, latest_metrics(pytester.path)["aggregate_metrics"]["judge_reliability"]


def latest_metrics(root: Path) -> dict[str, Any]:
    run_dir = root / "results" / (root / "results" / "latest").read_text().strip()
    return cast("dict[str, Any]", json.loads((run_dir / "metrics.json").read_text()))


def test_exactly_n_judged_cases_the_same_sample_serially_and_under_xdist(project: pytest.Pytester) -> None:
    serial, judged, reliability = run(project, 3)
    assert len(judged) == 3 and judged <= set(ANSWERABLE)  # never a case without a verdict
    assert reliability["spot_check_n"] == 3 and reliability["requested"] == 3 and reliability["judged_cases"] == 5
    assert sorted(reliability["cases"]) == sorted(f"eval_sets/j.jsonl::{q}" for q in judged)
    expected_rate = (1 if "question-bravo" in judged else 0) / 3
    assert reliability["disagreement_rate"] == pytest.approx(expected_rate)
    serial.stdout.fnmatch_lines([f"*judge spot check (judge-model-b): 3 cases, disagreement rate {expected_rate:.3f}*"])

    _, judged_xdist, reliability_xdist = run(project, 3, "-n", "2")
    assert judged_xdist == judged and reliability_xdist == reliability


def test_fewer_judged_cases_than_asked_are_all_rejudged_and_the_run_says_so(project: pytest.Pytester) -> None:
    result, judged, reliability = run(project, 8)
    assert judged == set(ANSWERABLE)
    assert reliability["spot_check_n"] == 5 and reliability["disagreement_rate"] == pytest.approx(1 / 5)
    assert reliability["cases"]["eval_sets/j.jsonl::question-bravo"]["scores"]["groundedness"] == [4, 1]
    result.stdout.fnmatch_lines(["*spot check: 8 cases asked for, but only 5 got a judge verdict; re-judged 5*"])
