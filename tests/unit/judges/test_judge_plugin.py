"""LLM judges through the plugin: a loopback OpenAI-compatible server driven by the real SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk
from openai_server import OpenAIServer, error, fail_times, metric_named, metric_of, ok, reject_json_schema, user_text

from pytest_rageval.judges.prompts import PROMPT_VERSIONS

KEY = "sk-test-judge-key-7f3a9c"
GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}

#: Per question: the judge's groundedness and correctness verdicts (or raw text).
VERDICTS: dict[str, dict[str, Any]] = {
    "q-good": {
        "groundedness": {
            "reasoning": "All supported.",
            "score": 4,
            "supported_claims": ["a"],
            "unsupported_claims": [],
        },
        "correctness": {"reasoning": "Right.", "score": 5},
    },
    "q-low": {
        "groundedness": {
            "reasoning": "The budget figure is invented.",
            "score": 1,
            "supported_claims": [],
            "unsupported_claims": ["The budget was 900M ARB."],
        },
        "correctness": {"reasoning": "Wrong amount.", "score": 2},
    },
    "q-broken": {"groundedness": "NO. Although the context says yes", "correctness": {"reasoning": "ok", "score": 4}},
    "q-mars": {"abstention": {"abstained": True, "confidence": 0.9}},
}


def judge_responder(body: dict[str, Any], headers: dict[str, Any]) -> Any:
    text = user_text(body)
    question = next(q for q in VERDICTS if f"{q}<" in text or f"{q}\n" in text or f"{q} " in text)
    verdict = VERDICTS[question][metric_named(body)]
    return ok(verdict if isinstance(verdict, str) else json.dumps(verdict))


def rag(body: dict[str, Any]) -> Any:
    chunks = [chunk("docs/a.md", "# A", 1, text="A fact.")] + [
        chunk(f"o{i}.md", "# O", i, text=f"other {i}") for i in range(2, 21)
    ]
    if body["question"] == "q-mars":
        return {"answer": "I could not find this.", "references": [], "debug": {"retrieved_chunks": chunks[:2]}}
    return answer("An answer.", chunks[: body["k"]])


CASES = [
    {"id": "good", "question": "q-good", "gold_supports": [GOLD], "reference_answer": "An answer."},
    {"id": "low", "question": "q-low", "gold_supports": [GOLD]},
    {"id": "broken", "question": "q-broken", "gold_supports": [GOLD]},
    {"id": "mars", "question": "q-mars", "answerable": False},
]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("RAGEVAL_JUDGE_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    pytester.makefile(".jsonl", **{"eval_sets/j": "\n".join(json.dumps(c) for c in CASES) + "\n"})
    return pytester


def run(pytester: pytest.Pytester, rag_url: str, judge_url: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--rageval",
        f"--rageval-target={rag_url}",
        "--rageval-judge=openai",
        "--rageval-judge-model=judge-model",
        f"--rageval-judge-base-url={judge_url}",
        "-p",
        "no:cacheprovider",
        *extra,
    )


def latest(root: Path) -> tuple[Path, dict[str, Any]]:
    """The newest run folder (a ``-k`` run writes one but does not move ``results/latest``)."""
    run_dir = max((root / "results").glob("*/metrics.json"), key=lambda p: p.stat().st_mtime_ns).parent
    return run_dir, json.loads((run_dir / "metrics.json").read_text())


def test_verdicts_become_metrics_failures_errors_and_coverage(project: pytest.Pytester) -> None:
    with AskServer(rag) as ragsrv, OpenAIServer(judge_responder) as judge:
        result = run(project, ragsrv.url, judge.base_url)
    result.assert_outcomes(passed=2, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*rageval: *judge openai (judge-model)*",
            "*groundedness = 1 (needs >= 3)*",
            "*correctness = 2 (needs >= 3)*",
            "*groundedness judge: The budget figure is invented.*",
            "*unsupported: The budget was 900M ARB.*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*[[]broken[]] judge failed: groundedness: unusable judge answer after 3 attempts*",
            "*ERROR eval_sets/j.jsonl::broken*",
        ]
    )
    # "NO. Although the context says yes" is asked three times (two re-asks), then the case errors.
    broken = [b for b in judge.bodies() if "q-broken" in user_text(b) and metric_of(b) == "groundedness"]
    assert len(broken) == 3
    _, metrics = latest(project.path)
    agg = metrics["aggregate_metrics"]
    assert agg["groundedness_avg"] == pytest.approx((4 + 1) / 2)
    assert agg["correctness_avg"] == pytest.approx((5 + 2) / 2)
    assert agg["judge_coverage"]["groundedness"] == {"scored": 2, "attempted": 3, "coverage": pytest.approx(2 / 3)}
    assert metrics["judge"] == {
        "name": "openai",
        "model": "judge-model",
        "prompt_version": metrics["judge"]["prompt_version"],
        "temperature": 0.0,
        "heuristic": False,
    }
    assert PROMPT_VERSIONS["groundedness"] in metrics["judge"]["prompt_version"]
    # Every request was paid for (100 + 20 tokens each), the three unusable answers to q-broken included.
    assert agg["cost"]["judge_total_tokens"] == 120 * len(judge.requests)
    assert agg["judge_cache"]["misses"] == len(judge.requests) - 2  # the two re-asks belong to one call
    run_dir, _ = latest(project.path)
    records = {r["test_case_id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert records["broken"]["outcome"] == "error" and records["broken"]["metrics"]["recall_at_k"] == 1
    # The unanswerable case had no `abstained` field: one abstention request classified it.
    assert metrics["cases"]["eval_sets/j.jsonl::mars"]["metrics"]["abstained"] is True
    assert [metric_of(b) for b in judge.bodies() if "q-mars" in user_text(b)] == ["abstention"]


@pytest.mark.parametrize("k", [5, 15])
def test_one_request_per_metric_per_case_whatever_k(project: pytest.Pytester, k: int) -> None:
    with AskServer(rag) as ragsrv, OpenAIServer(judge_responder) as judge:
        run(project, ragsrv.url, judge.base_url, f"--rageval-k={k}", "--rageval-no-cache", "-k", "good or low")
    assert sorted(metric_named(b) for b in judge.bodies()) == [
        "correctness",
        "correctness",
        "groundedness",
        "groundedness",
    ]
    for request in judge.requests:
        body = request["body"]
        assert body["temperature"] == 0 and body["model"] == "judge-model" and "seed" in body
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == metric_of(body)
        assert request["headers"]["authorization"] == f"Bearer {KEY}"
    contexts = user_text(judge.bodies()[0]).count("</context>")
    assert contexts == k


@pytest.mark.parametrize("workers", [[], ["-n", "3"]], ids=["serial", "xdist"])
def test_identical_rerun_makes_no_judge_request(project: pytest.Pytester, workers: list[str]) -> None:
    select = ["-k", "not broken"]  # a judge error is never cached, so that case would be asked again
    with AskServer(rag) as ragsrv, OpenAIServer(judge_responder) as judge:
        first = run(project, ragsrv.url, judge.base_url, *select, *workers)
        sent = len(judge.requests)
        second = run(project, ragsrv.url, judge.base_url, *select, *workers)
        assert sent == 5 and len(judge.requests) == sent, "the re-run asked the judge again"
    first.assert_outcomes(passed=2, failed=1)
    second.assert_outcomes(passed=2, failed=1)
    _, metrics = latest(project.path)
    assert metrics["aggregate_metrics"]["judge_cache"] == {"hits": 5, "misses": 0}
    assert metrics["aggregate_metrics"]["cost"]["judge_total_tokens"] == 0
    second.stdout.fnmatch_lines(["*judge: openai (judge-model); cache hits 5, misses 0; 0 tokens*"])


def test_changing_model_or_base_url_misses_the_cache(project: pytest.Pytester) -> None:
    with AskServer(rag) as ragsrv, OpenAIServer(judge_responder) as judge, OpenAIServer(judge_responder) as other:
        run(project, ragsrv.url, judge.base_url, "-k", "good")
        assert len(judge.requests) == 2
        run(project, ragsrv.url, judge.base_url, "-k", "good")
        assert len(judge.requests) == 2
        project.runpytest(
            "--rageval",
            f"--rageval-target={ragsrv.url}",
            "--rageval-judge-model=judge-model-2",
            f"--rageval-judge-base-url={judge.base_url}",
            "-k",
            "good",
        )
        assert len(judge.requests) == 4
        run(project, ragsrv.url, other.base_url, "-k", "good")
        assert len(other.requests) == 2


def test_five_429s_in_a_row_are_absorbed(project: pytest.Pytester) -> None:
    with AskServer(rag) as ragsrv, OpenAIServer(fail_times(5, 429, retry_after="0", then=judge_responder)) as judge:
        result = run(project, ragsrv.url, judge.base_url, "-k", "good")
    result.assert_outcomes(passed=1)
    assert len(judge.requests) == 7


def test_api_key_reaches_no_file(project: pytest.Pytester) -> None:
    with AskServer(rag) as ragsrv, OpenAIServer(judge_responder) as judge:
        result = run(project, ragsrv.url, judge.base_url, "--junitxml=junit.xml")
    assert KEY not in result.stdout.str()
    checked = 0
    for path in (
        list((project.path / "results").rglob("*"))
        + list((project.path / ".rageval_cache").rglob("*"))
        + [project.path / "junit.xml"]
    ):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
            checked += 1
    assert checked >= 6


def test_server_rejecting_json_schema_falls_back_and_completes(project: pytest.Pytester) -> None:
    with AskServer(rag) as ragsrv, OpenAIServer(reject_json_schema(judge_responder)) as judge:
        result = run(project, ragsrv.url, judge.base_url, "-k", "good or low", "--rageval-concurrency=1")
    result.assert_outcomes(passed=1, failed=1)
    modes = [(b.get("response_format") or {}).get("type") for b in judge.bodies()]
    # The first case's two metrics go out together and may both meet the rejection; after that the run remembers.
    first_case = modes[:2]
    assert set(first_case) <= {"json_schema", "json_object"} and modes[2:] == ["json_object"] * (len(modes) - 2)
    assert modes.count("json_object") == 4


def test_refused_key_stops_the_session_with_one_message(project: pytest.Pytester, xdist: list[str]) -> None:
    refuse = lambda body, headers: error(401, "Incorrect API key provided", type_="invalid_request_error")  # noqa: E731
    with AskServer(rag) as ragsrv, OpenAIServer(refuse) as judge:
        result = run(project, ragsrv.url, judge.base_url, *xdist)
    assert "INTERNALERROR" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*no case ran: no run folder written*"])  # every judge call was refused
    assert not (project.path / "results").exists()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*judge endpoint refused the API key (HTTP 401)*"])
    # Only what was already in flight was sent (4 cases x 2 metrics at most); one message, no per-case failures.
    assert len(judge.requests) <= 8
    assert result.stdout.str().count("refused the API key") == 1
    assert KEY not in result.stdout.str()


def test_judge_marker_and_retrieval_only(project: pytest.Pytester) -> None:
    with AskServer(rag) as ragsrv, OpenAIServer(judge_responder) as judge:
        deterministic = run(project, ragsrv.url, judge.base_url, "-m", "not judge")
        deterministic.assert_outcomes()  # every case has a judge threshold by default
        retrieval = run(project, ragsrv.url, judge.base_url, "--rageval-retrieval-only")
        assert len(judge.requests) == 0
    retrieval.assert_outcomes(passed=3, failed=1)  # mars: no abstained field and no judge -> abstention unknown
    _, metrics = latest(project.path)
    assert metrics["judge"]["name"] == "none" and metrics["aggregate_metrics"]["groundedness_avg"] is None


def test_spot_check_reports_disagreement(project: pytest.Pytester) -> None:
    def second_opinion(body: dict[str, Any], headers: dict[str, Any]) -> Any:
        if body["model"] == "judge-model":
            return judge_responder(body, headers)
        # The second model agrees on correctness and on q-good, but sees q-low's groundedness as 4 (primary said 1).
        metric = metric_of(body)
        if metric == "groundedness":
            return ok(json.dumps({"reasoning": "fine", "score": 4, "supported_claims": [], "unsupported_claims": []}))
        return judge_responder(body, headers)

    with AskServer(rag) as ragsrv, OpenAIServer(second_opinion) as judge:
        result = run(
            project,
            ragsrv.url,
            judge.base_url,
            "-k",
            "good or low",
            "--rageval-spot-check=5",
            "--rageval-spot-check-model=judge-model-b",
        )
        models = sorted({b["model"] for b in judge.bodies()})
    assert models == ["judge-model", "judge-model-b"]
    _, metrics = latest(project.path)
    reliability = metrics["aggregate_metrics"]["judge_reliability"]
    assert reliability["spot_check_n"] == 2 and reliability["disagreement_rate"] == pytest.approx(0.5)
    result.stdout.fnmatch_lines(["*judge spot check (judge-model-b): 2 cases, disagreement rate 0.500*"])


def test_max_judge_cost_stops_judging(project: pytest.Pytester) -> None:
    project.makepyprojecttoml('[tool.rageval.judge.prices]\n"judge-model" = [1000000.0, 1000000.0]\n')
    with AskServer(rag) as ragsrv, OpenAIServer(judge_responder) as judge:
        result = run(
            project,
            ragsrv.url,
            judge.base_url,
            "-k",
            "good or low",
            "--rageval-max-judge-cost=1",
            "--rageval-no-cache",
            "--rageval-concurrency=1",
        )
    # The first case's two verdicts cost far more than $1; the second case is not judged and errors saying why.
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*judge budget of $1 is spent (--rageval-max-judge-cost)*"])
    assert len(judge.requests) == 2


def test_lexical_is_the_offline_default(project: pytest.Pytester) -> None:
    with AskServer(rag) as ragsrv:
        result = project.runpytest("--rageval", f"--rageval-target={ragsrv.url}")
    result.stdout.fnmatch_lines(["*rageval: *judge lexical (lexical-heuristic, heuristic)*"])
    _, metrics = latest(project.path)
    assert metrics["judge"]["name"] == "lexical" and metrics["judge"]["heuristic"] is True
    assert metrics["cases"]["eval_sets/j.jsonl::mars"]["metrics"]["abstained"] is True  # refusal pattern


def test_dry_run_sends_nothing_and_prints_the_plan(project: pytest.Pytester) -> None:
    with AskServer(rag) as ragsrv, OpenAIServer(judge_responder) as judge:
        result = run(project, ragsrv.url, judge.base_url, "--rageval-dry-run", "-n", "2")
        assert len(ragsrv.requests) == 0 and len(judge.requests) == 0
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["*dry run: 4 RAG requests, * judge requests (groundedness *, correctness *)*nothing was sent*"]
    )
    assert not (project.path / "results").exists()


def test_judge_check_stops_a_judge_that_cannot_tell_answers_apart(project: pytest.Pytester) -> None:
    def always_four(body: Any, headers: Any) -> Any:
        return ok(json.dumps({"reasoning": "fine", "score": 4, "supported_claims": [], "unsupported_claims": []}))

    with AskServer(rag) as ragsrv, OpenAIServer(always_four) as judge:
        result = run(project, ragsrv.url, judge.base_url, "--rageval-judge-check", "--rageval-no-cache")
        assert len(ragsrv.requests) == 0
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*faithful 4.0 vs hallucinated 4.0 on groundedness*", "*judge check failed*"])
    with AskServer(rag) as ragsrv:
        ok_run = project.runpytest("--rageval", f"--rageval-target={ragsrv.url}", "--rageval-judge-check", "-k", "good")
    ok_run.stdout.fnmatch_lines(["*judge check passed*"])


def test_rageval_judge_rejudges_a_stored_run_through_the_cache(project: pytest.Pytester) -> None:
    import subprocess
    import sys

    with AskServer(rag) as ragsrv:
        run(
            project,
            ragsrv.url,
            "http://unused",
            "--rageval-retrieval-only",
            "--rageval-store-full-text",
            "-k",
            "good or low",
        )
    run_dir, before = latest(project.path)
    assert before["aggregate_metrics"]["groundedness_avg"] is None
    with OpenAIServer(judge_responder) as judge:
        cmd = [
            sys.executable,
            "-m",
            "pytest_rageval.cli",
            "judge",
            str(run_dir),
            "--judge",
            "openai",
            "--model",
            "judge-model",
            "--base-url",
            judge.base_url,
        ]
        first = subprocess.run(cmd, cwd=project.path, capture_output=True, text=True)
        sent = len(judge.requests)
        again = subprocess.run(cmd, cwd=project.path, capture_output=True, text=True)
        # Without --judge: the run's own judge again (model and endpoint from config.json), so all cache hits.
        default = subprocess.run(cmd[:5], cwd=project.path, capture_output=True, text=True)
        assert len(judge.requests) == sent == 4, (first.stdout, first.stderr)
    assert default.returncode == 0 and "openai (judge-model)" in default.stdout and "4 hits" in default.stdout, (
        default.stdout
    )
    assert first.returncode == 0 and again.returncode == 0, first.stderr
    after = json.loads((run_dir / "metrics.json").read_text())
    assert after["aggregate_metrics"]["groundedness_avg"] == pytest.approx((4 + 1) / 2)
    assert after["judge"]["name"] == "openai" and after["run_id"] == before["run_id"]
