"""Repeats with flakiness classes (issue 10 item 2): ``--rageval-repeat N``, stability classes, metrics.json ``repeats``.

End to end with a loopback RAG and a loopback OpenAI-compatible judge driven through the real openai SDK: the
judge's verdict on one question alternates pass, fail, pass ... (per request for that question), so that case is
flaky; two others are stable. Runs count the judge's requests: repeats are separate requests, an identical re-run
sends none.
"""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk
from openai_server import OpenAIServer, metric_of, ok, user_text

from pytest_rageval.cli import main as rageval
from pytest_rageval.evaluation.schema import MAX_REPEAT, EvalCase
from pytest_rageval.evaluation.stability import classify, judge_dependent, runs_for, stability_of
from pytest_rageval.gate.aggregate import aggregate

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}
CASES: list[dict[str, Any]] = [
    {"id": "alt", "question": "q-alt", "gold_supports": [GOLD]},  # judge: pass, fail, pass -> flaky (passes)
    {"id": "good", "question": "q-good", "gold_supports": [GOLD]},  # always passes -> stable_pass
    {"id": "bad", "question": "q-bad", "gold_supports": [GOLD]},  # always fails -> stable_fail
    {"id": "own", "question": "q-own", "gold_supports": [GOLD], "repeat": 2},  # its own repeat wins
    {
        "id": "mars",
        "question": "q-mars",
        "answerable": False,
    },  # abstains: judge-dependent (groundedness had it answered), no judge request
]
QUESTIONS = {c["question"] for c in CASES}


class AlternatingJudge:
    """groundedness 4 (pass) or 1 (fail): q-alt alternates per request (4, 1, 4, ...), q-bad always 1, the rest 4."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], headers: dict[str, Any]) -> Any:
        assert metric_of(body) == "groundedness", body
        text = user_text(body)
        question = next(q for q in QUESTIONS if q in text)
        with self._lock:
            index = self.seen[question]
            self.seen[question] += 1
        score = 1 if question == "q-bad" or (question == "q-alt" and index % 2) else 4
        return ok(
            json.dumps(
                {"reasoning": f"score {score}", "supported_claims": [], "unsupported_claims": [], "score": score}
            )
        )


def rag(body: dict[str, Any]) -> Any:
    if body["question"] == "q-mars":
        return answer("I cannot answer that.", [chunk("docs/b.md", "# B", 1)], abstained=True)
    return answer("The answer.", [chunk("docs/a.md", "# A", 1, text="The answer.")])


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("RAGEVAL_JUDGE_API_KEY", raising=False)
    pytester.makefile(".jsonl", **{"eval_sets/r": "\n".join(json.dumps(c) for c in CASES) + "\n"})
    pytester.makepyprojecttoml('[tool.rageval.judge]\nmetrics = ["groundedness"]\n')
    return pytester


def judged_run(project: pytest.Pytester, rag_url: str, judge_url: str, *extra: str, subprocess_: bool = False) -> Any:
    args = (
        "--rageval",
        f"--rageval-target={rag_url}",
        "--rageval-judge-model=judge-model",
        f"--rageval-judge-base-url={judge_url}",
        "--rageval-repeat",
        "3",
        "-p",
        "no:cacheprovider",
        *extra,
    )
    return project.runpytest_subprocess(*args) if subprocess_ else project.runpytest(*args)


def pytest_html_extras(path: Path) -> str:
    """Every case's HTML extras in a pytest-html 4 report (its test data is JSON in ``data-jsonblob``)."""
    match = re.search(r'data-jsonblob="([^"]*)"', path.read_text(encoding="utf-8"))
    assert match, "no data-jsonblob in the pytest-html report"
    tests = json.loads(html_lib.unescape(match.group(1)))["tests"]
    return "".join(
        e["content"] for runs in tests.values() for run in runs for e in run["extras"] if e["format_type"] == "html"
    )


def run_dirs(root: Path) -> list[Path]:
    """Run folders, oldest first by their metrics' timestamp (run ids made within one second do not sort by time)."""
    return sorted(
        (p.parent for p in (root / "results").glob("*/metrics.json")),
        key=lambda d: json.loads((d / "metrics.json").read_text())["timestamp"],
    )


def read_run(run_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    return metrics, {r["test_case_id"]: r for r in records}


EXPECTED_REPEATS = {
    "repeated_cases": 5,
    "stable_pass": 3,
    "flaky": 1,
    "stable_fail": 1,
    "flake_rate": 0.2,
    "flaky_cases": [{"key": "eval_sets/r.jsonl::alt", "passed_runs": 2, "runs": 3}],
    "spread_measure": "mean_range",
    # groundedness: alt ranges 3 (4-1), good/bad/own 0 -> 3/4 (mars abstained: never scored); the rest never move
    "spread": {
        "abstained": 0.0,
        "attribution_hit": 0.0,
        "false_abstention": 0.0,
        "groundedness": 0.75,
        "mrr": 0.0,
        "ndcg_at_k": 0.0,
        "precision_at_k": 0.0,
        "recall_all_at_k": 0.0,
        "recall_at_k": 0.0,
    },
}


def test_repeat_classes_cache_and_reports(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """--rageval-repeat 3: three separate judge requests per repeated case, classes, counts; an identical re-run
    (another hash seed) sends no judge request and gives the same classes; -n 2 gives the same numbers."""
    judge = AlternatingJudge()
    html = project.path / "ph.html"
    with AskServer(rag) as ragsrv, OpenAIServer(judge) as judgesrv:
        monkeypatch.setenv("PYTHONHASHSEED", "1")
        first = judged_run(project, ragsrv.url, judgesrv.base_url, "-v", f"--html={html}", subprocess_=True)
        first_judge, first_rag = dict(judge.seen), Counter(r["body"]["question"] for r in ragsrv.requests)
        monkeypatch.setenv("PYTHONHASHSEED", "2")
        second = judged_run(project, ragsrv.url, judgesrv.base_url, subprocess_=True)
        second_requests = sum(judge.seen.values()) - sum(first_judge.values())
    first.assert_outcomes(passed=4, failed=1)  # alt passes on majority; bad fails
    # each repeat is a separate judge request (the repeat index is in the cache key) and a new RAG call
    assert first_judge == {"q-alt": 3, "q-good": 3, "q-bad": 3, "q-own": 2}
    assert first_rag == {"q-alt": 3, "q-good": 3, "q-bad": 3, "q-own": 2, "q-mars": 3}
    assert second_requests == 0, "an identical re-run must be served from the judge cache"
    second.assert_outcomes(passed=4, failed=1)

    (one, two) = run_dirs(project.path)
    for run_dir in (one, two):
        metrics, records = read_run(run_dir)
        assert metrics["repeats"] == EXPECTED_REPEATS
        assert metrics["flaky"] == 1
        assert {k: (r.get("stability"), r["runs"], r["flaky"]) for k, r in records.items()} == {
            "alt": ("flaky", 3, True),
            "good": ("stable_pass", 3, False),
            "bad": ("stable_fail", 3, False),
            "own": ("stable_pass", 2, False),
            "mars": ("stable_pass", 3, False),
        }
        assert [r["passed"] for r in records["alt"]["repeats"]] == [True, False, True]
        assert records["alt"]["metrics"]["groundedness"] == 3.0  # the mean of 4, 1, 4
    assert read_run(two)[0]["aggregate_metrics"]["judge_cache"] == {"hits": 11, "misses": 0}

    # the terminal lists the flaky case with "k of n runs passed"; the failure says how many runs passed
    first.stdout.fnmatch_lines(
        [
            "*repeats: 5 repeated cases: 3 stable_pass, 1 flaky, 1 stable_fail; flake rate 0.200",
            "*spread across runs (mean of max-min per case): abstained 0.000, *groundedness 0.750*",
            "*flaky: eval_sets/r.jsonl::alt  2 of 3 runs passed",
        ]
    )
    first.stdout.fnmatch_lines(["rageval: target *, 3 runs of each judge-dependent case"])
    first.stdout.fnmatch_lines(["*0 of 3 runs passed (a repeated case passes when more than half pass)*"])
    # report.html and pytest-html: the card says runs passed, the class, which run is shown, that metrics are means
    page = (one / "report.html").read_text()
    assert '<h2 id="repeats">Repeated cases</h2>' in page
    assert "<li><code>eval_sets/r.jsonl::alt</code>: 2 of 3 runs passed</li>" in page
    for text in (page, pytest_html_extras(html)):
        assert "Repeated case: flaky: 2 of 3 runs passed" in text
        assert "Repeated case: stable_fail: 0 of 3 runs passed" in text
        assert (
            "missed thresholds are those of run 1 (the first run that agrees with the majority verdict); "
            "the metric table shows each metric&#x27;s mean over the runs"
        ) in text
        assert '<tr><td>2</td><td>failed</td><td class="num">1.000</td></tr>' in text  # alt's run 2: groundedness 1
        assert "<h4>Missed metrics in run 1</h4>" in text  # bad's misses are its shown run's
        assert "<h4>Metrics: means over the 3 runs (status: the misses of run 1)</h4>" in text

    # under -n 2 (a fresh cache: the requests are sent again) the same classes and numbers
    judge2 = AlternatingJudge()
    with AskServer(rag) as ragsrv, OpenAIServer(judge2) as judgesrv:
        third = judged_run(project, ragsrv.url, judgesrv.base_url, "-n", "2", "--rageval-cache-dir=cache2")
    third.assert_outcomes(passed=4, failed=1)
    assert dict(judge2.seen) == first_judge
    newest = [d for d in run_dirs(project.path) if d not in (one, two)]
    metrics, records = read_run(newest[0])
    assert metrics["repeats"] == EXPECTED_REPEATS
    assert {k: r.get("stability") for k, r in records.items()} == {
        k: r.get("stability") for k, r in read_run(one)[1].items()
    }


def test_without_a_judge_every_case_is_repeated_and_own_settings_win(project: pytest.Pytester) -> None:
    """--rageval-judge none: no case depends on a judge, so --rageval-repeat repeats every case; a case's own
    ``repeat`` wins and ``flaky: true`` keeps its 3. The ini key does the same as the option."""
    project.makefile(
        ".jsonl",
        **{
            "eval_sets/r": "\n".join(
                json.dumps(c)
                for c in [*CASES, {"id": "fl", "question": "q-fl", "gold_supports": [GOLD], "flaky": True}]
            )
            + "\n"
        },
    )
    project.makeini("[pytest]\nrageval_repeat = 2\n")
    with AskServer(rag) as ragsrv:
        dry = project.runpytest(
            "--rageval", f"--rageval-target={ragsrv.url}", "--rageval-judge=none", "--rageval-dry-run"
        )
        # the header says what is repeated; the plan counts the repeats
        dry.stdout.fnmatch_lines(
            ["rageval: target *, 2 runs of each case (no judge)", "*dry run: 13 RAG requests, 0 judge requests*"]
        )
        assert not ragsrv.requests
        result = project.runpytest(
            "--rageval", f"--rageval-target={ragsrv.url}", "--rageval-judge=none", "-p", "no:cacheprovider"
        )
        asked = Counter(r["body"]["question"] for r in ragsrv.requests)
    result.assert_outcomes(passed=6)
    assert asked == {"q-alt": 2, "q-good": 2, "q-bad": 2, "q-own": 2, "q-mars": 2, "q-fl": 3}
    metrics, _records = read_run(run_dirs(project.path)[0])
    assert metrics["repeats"]["repeated_cases"] == 6 and metrics["repeats"]["stable_pass"] == 6
    assert metrics["repeats"]["flake_rate"] == 0.0
    assert json.loads((run_dirs(project.path)[0] / "config.json").read_text())["config"]["repeat"] == 2


@pytest.mark.parametrize(
    "value, message",
    [
        ("0", f"--rageval-repeat: must be from 1 to {MAX_REPEAT} runs, got 0"),
        (str(MAX_REPEAT + 1), f"--rageval-repeat: must be from 1 to {MAX_REPEAT} runs, got {MAX_REPEAT + 1}"),
        ("three", f"--rageval-repeat: must be a whole number of runs from 1 to {MAX_REPEAT}, got 'three'"),
        ("ini:1.5", f"rageval_repeat: must be a whole number of runs from 1 to {MAX_REPEAT}, got '1.5'"),
    ],
)
def test_bad_repeat_values_are_a_usage_error(project: pytest.Pytester, value: str, message: str) -> None:
    if value.startswith("ini:"):
        project.makeini(f"[pytest]\nrageval_repeat = {value[4:]}\n")
        args: tuple[str, ...] = ()
    else:
        args = ("--rageval-repeat", value)
    result = project.runpytest("--rageval", "--rageval-target=http://127.0.0.1:9/", "--rageval-judge=none", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str() + result.stdout.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_rejudge_and_merge_of_a_repeated_run(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rageval merge`` keeps the classes (it re-aggregates the records); ``rageval judge`` judges each repeated
    case once, on the answer its record shows, so its per-run results and class go and ``repeats`` says so."""
    with AskServer(rag) as ragsrv, OpenAIServer(AlternatingJudge()) as judgesrv:
        judged_run(project, ragsrv.url, judgesrv.base_url).assert_outcomes(passed=4, failed=1)
        (run_dir,) = run_dirs(project.path)
        assert rageval(["merge", str(run_dir), "-o", str(project.path / "merged")]) == 0
        merged = next((project.path / "merged").glob("*/metrics.json"))
        assert json.loads(merged.read_text())["repeats"] == EXPECTED_REPEATS
        monkeypatch.chdir(project.path)
        code = rageval(
            [
                "judge",
                str(run_dir),
                "--judge",
                "openai",
                "--model",
                "judge-model",
                "--base-url",
                judgesrv.base_url,
                "--no-cache",
            ]
        )
    out = capsys.readouterr().out
    assert code in (0, 1), out
    assert "repeated cases were judged once, on the answer of the run their record shows" in out
    metrics, records = read_run(run_dir)
    assert metrics["repeats"]["repeated_cases"] == 0 and metrics["repeats"]["flake_rate"] is None
    assert metrics["flaky"] == 0
    assert all("repeats" not in r and "stability" not in r and r["flaky"] is False for r in records.values())


# --------------------------------------------------------------------------- the pure parts


def test_runs_for_precedence() -> None:
    plain, own, flaky = (
        EvalCase(id="a", question="q"),
        EvalCase(id="b", question="q", repeat=2),
        EvalCase(id="c", question="q", flaky=True),
    )
    assert [runs_for(c, 5, dependent=True) for c in (plain, own, flaky)] == [5, 2, 3]
    assert [runs_for(c, 5, dependent=False) for c in (plain, own, flaky)] == [1, 2, 3]
    assert [runs_for(c, None, dependent=True) for c in (plain, own, flaky)] == [1, 2, 3]


def test_judge_dependent() -> None:
    judged = ("groundedness", "correctness")
    assert judge_dependent({"recall_at_k": 1, "groundedness": 3}, judged, judge_in_use=True)
    assert not judge_dependent({"recall_at_k": 1}, judged, judge_in_use=True)
    assert judge_dependent({"recall_at_k": 1}, judged, judge_in_use=False)  # no judge: every case


def test_classes_and_older_records() -> None:
    assert [classify(v) for v in ([True], [True, True], [True, False, True], [False, False])] == [
        None,
        "stable_pass",
        "flaky",
        "stable_fail",
    ]
    # a record of an older version: no "stability", only "repeats" (and "flaky")
    old = {
        "key": "s::x",
        "outcome": "failed",
        "flaky": True,
        "runs": 3,
        "repeats": [
            {"passed": False, "metrics": {"mrr": 0.5}},
            {"passed": True, "metrics": {"mrr": 1.0}},
            {"passed": False, "metrics": {"mrr": 0.5}},
        ],
    }
    assert stability_of(old) == "flaky"
    result = aggregate([old])["repeats"]
    assert result["flaky"] == 1 and result["flake_rate"] == 1.0 and result["spread"] == {"mrr": 0.5}
    assert result["flaky_cases"] == [{"key": "s::x", "passed_runs": 1, "runs": 3}]


def test_repeats_do_not_depend_on_record_order_or_hash_seed(tmp_path: Path) -> None:
    """The same ``repeats`` whatever order the records arrive in, and under other hash seeds (a subprocess each)."""
    records = [
        {
            "key": f"s::{i}",
            "outcome": "passed",
            "runs": 3,
            "repeats": [
                {"passed": j != i % 3, "metrics": {"groundedness": (i * 7 + j) % 5 / 3, "mrr": 0.1 * j}}
                for j in range(3)
            ],
        }
        for i in range(12)
    ]
    expected = aggregate(records)["repeats"]
    assert aggregate(list(reversed(records)))["repeats"] == expected
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    code = (
        "import json,sys; from pytest_rageval.gate.aggregate import aggregate; "
        "print(json.dumps(aggregate(json.load(open(sys.argv[1])))['repeats'], sort_keys=True))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code, str(path)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "1", "12345")
    }
    assert outputs == {json.dumps(expected, sort_keys=True) + "\n"}


def test_resume_of_an_interrupted_repeated_run(project: pytest.Pytester) -> None:
    """-x stops after the stable_fail case; --rageval-resume runs the rest with the same repeats, and the finished
    run's ``repeats`` equal an uninterrupted run's. Resuming with another --rageval-repeat is refused."""
    judge = AlternatingJudge()
    with AskServer(rag) as ragsrv, OpenAIServer(judge) as judgesrv:
        stopped = judged_run(project, ragsrv.url, judgesrv.base_url, "-x", "--rageval-concurrency=1")
        stopped.assert_outcomes(passed=2, failed=1)
        (run_dir,) = run_dirs(project.path)
        assert json.loads((run_dir / "metrics.json").read_text())["complete"] is False
        other = project.runpytest(
            "--rageval",
            f"--rageval-target={ragsrv.url}",
            "--rageval-judge-model=judge-model",
            f"--rageval-judge-base-url={judgesrv.base_url}",
            "--rageval-repeat",
            "2",
            f"--rageval-resume={run_dir}",
            "-p",
            "no:cacheprovider",
        )
        assert other.ret == pytest.ExitCode.USAGE_ERROR and "another configuration" in other.stderr.str()
        resumed = judged_run(project, ragsrv.url, judgesrv.base_url, f"--rageval-resume={run_dir}")
    resumed.assert_outcomes(passed=2)  # own and mars
    metrics, _records = read_run(run_dir)
    assert metrics["complete"] is True and metrics["repeats"] == EXPECTED_REPEATS
    assert dict(judge.seen) == {"q-alt": 3, "q-good": 3, "q-bad": 3, "q-own": 2}


def test_repeat_in_the_run_identity(tmp_path: Path) -> None:
    """config.json (and the config hash) holds repeat only when it repeats: runs made before it existed keep their hash."""
    from pytest_rageval.config.settings import Settings

    assert Settings(tmp_path, repeat=1).snapshot() == Settings(tmp_path).snapshot()
    assert Settings(tmp_path, repeat=3).snapshot() == {**Settings(tmp_path).snapshot(), "repeat": 3}
