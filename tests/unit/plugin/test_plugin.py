"""The pytest surface as users meet it, end to end with pytester and loopback servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from ask_server import AskServer, answer, chunk, seed_001_ini

from pytest_rageval.plugin.handwritten import question_id

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}


def latest_metrics(root: Path, output: str = "results") -> dict[str, Any]:
    run = (root / output / "latest").read_text().strip()
    return cast("dict[str, Any]", json.loads((root / output / run / "metrics.json").read_text()))


def write_set(pytester: pytest.Pytester, name: str, cases: list[Any]) -> None:
    lines = [c if isinstance(c, str) else json.dumps(c) for c in cases]
    pytester.makefile(".jsonl", **{name: "\n".join(lines) + "\n"})


class Ranked:
    """A server whose gold chunk sits at ``rank`` (1 = top): rank 2 halves mrr, recall stays 1."""

    def __init__(self) -> None:
        self.rank = 1

    def __call__(self, body: dict[str, Any]) -> Any:
        gold = chunk("docs/a.md", "# A > ## Part", self.rank)
        other = chunk("docs/b.md", "# B", 2 if self.rank == 1 else 1)
        return answer("A answer.", [gold, other], references=[gold])


def test_installed_but_not_enabled_changes_nothing(pytester: pytest.Pytester) -> None:
    write_set(pytester, "eval_sets/x", [{"id": "a", "question": "q"}])
    pytester.makepyfile(test_plain="def test_ok():\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "results").exists()
    assert "rageval:" not in result.stdout.str() and "rageval summary" not in result.stdout.str()


def test_a_second_session_in_one_process_gives_no_rewrite_warning(pytester: pytest.Pytester) -> None:
    """pytest marks the plugin's package for assertion rewriting in every session; under the editable install the
    suite runs from, the package was imported by setuptools' finder, so each in-process session warned and a test's
    last line read "2 passed, 2 warnings" depending on what ran before it."""
    pytester.makepyfile(test_plain="def test_ok():\n    pass\n")
    for _ in range(2):
        result = pytester.runpytest("-W", "error::pytest.PytestAssertRewriteWarning")
        result.assert_outcomes(passed=1)
        assert "cannot be rewritten" not in result.stdout.str()


def test_bad_lines_are_error_items_naming_file_line_and_field(pytester: pytest.Pytester) -> None:
    write_set(
        pytester,
        "eval_sets/bad",
        [
            {"id": "ok1", "question": "q1", "gold_supports": [GOLD]},
            '{"id": "broken", "question": ',
            {"id": "noq"},
            {"id": "typo", "question": "q", "gold_suports": [GOLD]},
            {"id": "ok1", "question": "dup"},
            {"id": "ok2", "question": "q2", "gold_supports": [GOLD]},
        ],
    )
    write_set(pytester, "eval_sets/good", [{"id": "fine", "question": "q3", "gold_supports": [GOLD]}])
    with AskServer(Ranked()) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}")
    result.assert_outcomes(passed=3, errors=4)
    assert result.ret != 0
    result.stdout.fnmatch_lines_random(
        [
            "*eval_sets/bad.jsonl:2: invalid JSON*",
            "*eval_sets/bad.jsonl:3: field 'question': required field is missing*",
            "*eval_sets/bad.jsonl:4: unknown key 'gold_suports' (did you mean 'gold_supports'?)*",
            "*eval_sets/bad.jsonl:5: field 'id': duplicate id 'ok1' (first used on line 1)*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    metrics = latest_metrics(pytester.path)
    assert metrics["invalid_lines"] == 4 and metrics["total_tests"] == 3 and metrics["errors"] == 0


def test_gate_fails_on_mrr_drop_even_when_every_case_passes(pytester: pytest.Pytester, xdist: list[str]) -> None:
    write_set(
        pytester, "eval_sets/s", [{"id": f"c{i}", "question": f"q{i}", "gold_supports": [GOLD]} for i in range(4)]
    )
    system = Ranked()
    with AskServer(system) as server:
        base = [
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "--rageval-baseline=baseline.json",
            *xdist,
        ]
        made = pytester.runpytest(*base, "--rageval-update-baseline")
        assert made.ret == 0 and (pytester.path / "baseline.json").exists()
        made.stdout.fnmatch_lines(["*baseline updated*"])

        same = pytester.runpytest(*base)
        assert same.ret == 0, same.stdout.str()

        system.rank = 2
        worse = pytester.runpytest(*base)
        worse.assert_outcomes(passed=4)
        assert worse.ret == 1
        worse.stdout.fnmatch_lines(["*REGRESSION*", "*mrr_avg: 1.000 → 0.500*REGRESSED*"])
        run_dir = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
        assert "REGRESSED" in (run_dir / "report.html").read_text()  # the standalone page shows the deltas too

        allowed = pytester.runpytest(*base, "--rageval-allow-regressions")
        assert allowed.ret == 0
        allowed.stdout.fnmatch_lines(["*mrr_avg*REGRESSED*", "*regressions allowed*"])


def test_gate_names_cases_that_flipped(pytester: pytest.Pytester) -> None:
    write_set(
        pytester, "eval_sets/s", [{"id": "c1", "question": "q1", "gold_supports": [GOLD], "thresholds": {"mrr": 1}}]
    )
    system = Ranked()
    with AskServer(system) as server:
        base = ["--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "--rageval-baseline=base.json"]
        pytester.runpytest(*base, "--rageval-update-baseline")
        system.rank = 2
        result = pytester.runpytest(*base)
    result.stdout.fnmatch_lines(["*flipped from pass to fail*", "*eval_sets/s.jsonl::c1*"])


def test_baseline_of_another_eval_set_is_refused_unless_ignored(pytester: pytest.Pytester) -> None:
    write_set(pytester, "eval_sets/s", [{"id": "c1", "question": "q1", "gold_supports": [GOLD]}])
    with AskServer(Ranked()) as server:
        base = ["--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "--rageval-baseline=base.json"]
        pytester.runpytest(*base, "--rageval-update-baseline")
        write_set(pytester, "eval_sets/s", [{"id": "c1", "question": "q1 changed", "gold_supports": [GOLD]}])
        refused = pytester.runpytest(*base)
        assert refused.ret == 1
        # the one case changed: nothing unchanged is left to compare (with older baselines: the eval-set hash)
        refused.stdout.fnmatch_lines(
            ["*baseline refused*", "*only 0 unchanged cases shared with the baseline, fewer than 1*"]
        )
        assert pytester.runpytest(*base, "--rageval-ignore-invariants").ret == 0


def test_missing_baseline_is_a_warning(pytester: pytest.Pytester) -> None:
    write_set(pytester, "eval_sets/s", [{"id": "c1", "question": "q1", "gold_supports": [GOLD]}])
    with AskServer(Ranked()) as server:
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "--rageval-baseline=nope.json"
        )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*baseline*nope.json not found*"])


def test_k_selects_by_id_tag_and_category_and_markers_are_registered(pytester: pytest.Pytester) -> None:
    write_set(
        pytester,
        "eval_sets/s",
        [
            {"id": "alpha", "question": "q1", "tags": ["billing"], "gold_supports": [GOLD]},
            {"id": "beta", "question": "q2", "category": "multi_hop", "gold_supports": [GOLD]},
            {"id": "gamma", "question": "q3", "gold_supports": [GOLD]},
        ],
    )
    with AskServer(Ranked()) as server:
        target = f"--rageval-target={server.url}"
        pytester.runpytest("--rageval", "--rageval-judge=none", target, "-k", "billing").assert_outcomes(passed=1)
        pytester.runpytest("--rageval", "--rageval-judge=none", target, "-k", "multi_hop").assert_outcomes(passed=1)
        pytester.runpytest("--rageval", "--rageval-judge=none", target, "-k", "gamma or alpha").assert_outcomes(
            passed=2
        )
        pytester.runpytest(
            "--rageval", "--rageval-judge=none", target, "--strict-markers", "-m", "rageval and not judge"
        ).assert_outcomes(passed=3)
        assert len(server.requests) == 7


def test_marks_on_the_line_and_by_tag_select_with_strict_markers(pytester: pytest.Pytester) -> None:
    write_set(
        pytester,
        "eval_sets/s",
        [
            {"id": "judged", "question": "q1", "gold_supports": [GOLD]},
            {"id": "retrieval", "question": "q2", "gold_supports": [GOLD], "judge": False},
            {"id": "slow", "question": "q3", "gold_supports": [GOLD], "marks": ["slow"], "judge": False},
            {"id": "hop", "question": "q4", "category": "multi_hop", "gold_supports": [GOLD], "judge": False},
            {"id": "bad", "question": "q5", "marks": ["skip"]},
        ],
    )
    pytester.makepyprojecttoml('[tool.rageval.marks]\nnightly = ["multi_hop", "billing"]\n')
    with AskServer(Ranked()) as server:
        run = ["--rageval", "--rageval-judge=lexical", f"--rageval-target={server.url}", "--strict-markers"]
        not_judge = pytester.runpytest(*run, "-m", "not judge", "-rA")
        asked = len(server.requests)
        slow = pytester.runpytest(*run, "-m", "slow", "-rA")
        nightly = pytester.runpytest(*run, "-m", "nightly", "-rA")
        judged = pytester.runpytest(*run, "-m", "judge", "-rA")
    # the lexical judge is on: only the lines that say "judge": false run without the judge marker
    not_judge.assert_outcomes(passed=3, errors=1, deselected=1)
    not_judge.stdout.fnmatch_lines(
        ["PASSED eval_sets/s.jsonl::retrieval", "PASSED eval_sets/s.jsonl::slow", "PASSED eval_sets/s.jsonl::hop"]
    )
    not_judge.stdout.fnmatch_lines(["*s.jsonl:5: field 'marks': *'skip' is reserved*"])
    assert asked == 3
    runs = [json.loads((p / "metrics.json").read_text()) for p in (pytester.path / "results").iterdir() if p.is_dir()]
    first = min(runs, key=lambda m: m["timestamp"])
    assert first["judge_coverage"] == {}  # "judge": false leaves the judge out of the case
    slow.assert_outcomes(passed=1, deselected=4)
    slow.stdout.fnmatch_lines(["PASSED eval_sets/s.jsonl::slow"])
    nightly.assert_outcomes(passed=1, deselected=4)
    nightly.stdout.fnmatch_lines(["PASSED eval_sets/s.jsonl::hop"])
    assert "eval_sets/s.jsonl::judged" in judged.stdout.str() and judged.parseoutcomes()["deselected"] == 4


def test_explicit_file_and_folder_paths_and_artifacts_are_not_collected(pytester: pytest.Pytester) -> None:
    write_set(pytester, "sets/one", [{"id": "a", "question": "q1", "gold_supports": [GOLD]}])
    write_set(pytester, "sets/two", [{"id": "b", "question": "q2", "gold_supports": [GOLD]}])
    with AskServer(Ranked()) as server:
        target = f"--rageval-target={server.url}"
        pytester.runpytest("--rageval", "--rageval-judge=none", target, "sets/one.jsonl").assert_outcomes(passed=1)
        pytester.runpytest("--rageval", "--rageval-judge=none", target, "sets").assert_outcomes(passed=2)
        # The run folders now hold results.jsonl files; a run over "." must not collect them.
        pytester.runpytest("--rageval", "--rageval-judge=none", target, ".").assert_outcomes(passed=2)


def test_no_eval_sets_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--rageval", "--rageval-judge=none")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no eval sets match eval_sets/**/*.jsonl*"])


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[tool.rageval.thresholds]\nrecal_at_k = 1\n", "*unknown metric 'recal_at_k' (did you mean 'recall_at_k'?)*"),
        (
            "[tool.rageval.gate]\nmrr_avgg = 0.5\n",
            "*[[]tool.rageval.gate[]].mrr_avgg: unknown metric 'mrr_avgg' (did you mean 'mrr_avg'?)*",
        ),
    ],
    ids=["threshold", "gate"],
)
def test_unknown_metric_in_pyproject_is_a_usage_error(pytester: pytest.Pytester, table: str, message: str) -> None:
    write_set(pytester, "eval_sets/s", [{"id": "a", "question": "q"}])
    pytester.makepyprojecttoml(table)
    result = pytester.runpytest("--rageval", "--rageval-judge=none")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_missing_target_is_one_clear_error_per_case(pytester: pytest.Pytester) -> None:
    write_set(pytester, "eval_sets/s", [{"id": "a", "question": "q"}])
    result = pytester.runpytest("--rageval", "--rageval-judge=none")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no system under test: set --rageval-target*"])
    assert "Traceback" not in result.stdout.str()


def test_a_malformed_target_or_timeout_is_a_usage_error(pytester: pytest.Pytester) -> None:
    # An unimportable target is a usage error too now (issue 7): tests/unit/plugin/test_config_errors.py.
    write_set(pytester, "eval_sets/s", [{"id": "a", "question": "q"}])
    for bad in ("ftp://example.com/ask", "myrag: ask"):
        usage = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={bad}")
        assert usage.ret == pytest.ExitCode.USAGE_ERROR
        usage.stderr.fnmatch_lines(
            [f"*rageval_target {bad!r}: expected an http(s):// URL or 'package.module:callable'"]
        )
    pytester.makeini("[pytest]\nrageval_timeout = 0\n")
    zero = pytester.runpytest("--rageval", "--rageval-judge=none", "--rageval-target=nomod:ask")
    assert zero.ret == pytest.ExitCode.USAGE_ERROR
    zero.stderr.fnmatch_lines(["*rageval_timeout: must be more than 0 seconds, got '0'"])


def test_cli_threshold_overrides_everything(pytester: pytest.Pytester) -> None:
    write_set(
        pytester, "eval_sets/s", [{"id": "a", "question": "q", "gold_supports": [GOLD], "thresholds": {"mrr": 0.1}}]
    )
    system = Ranked()
    system.rank = 2
    with AskServer(system) as server:
        target = f"--rageval-target={server.url}"
        pytester.runpytest("--rageval", "--rageval-judge=none", target).assert_outcomes(passed=1)
        failed = pytester.runpytest("--rageval", "--rageval-judge=none", target, "--rageval-threshold", "mrr=0.9")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*mrr = 0.5 (needs >= 0.9)*"])


def test_callable_targets_sync_and_async_and_k(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        myrag="""
        import asyncio
        def ask(question, params):
            chunks = [{"rel_path": "docs/b.md", "heading_path": "# B", "rank": i} for i in range(1, 4)]
            chunks.append({"rel_path": "docs/a.md", "heading_path": "# A", "rank": 4})
            return {"answer": "x", "references": chunks[-1:], "abstained": False,
                    "debug": {"retrieved_chunks": chunks[: params["k"]]}}
        async def aask(question, params):
            await asyncio.sleep(0)
            return ask(question, params)
        """
    )
    write_set(pytester, "eval_sets/s", [{"id": "a", "question": "q", "gold_supports": [GOLD]}])
    pytester.runpytest("--rageval", "--rageval-judge=none", "--rageval-target=myrag:ask").assert_outcomes(passed=1)
    pytester.runpytest(
        "--rageval", "--rageval-judge=none", "--rageval-target=myrag:aask", "--rageval-k=3"
    ).assert_outcomes(failed=1)
    assert latest_metrics(pytester.path)["aggregate_metrics"]["recall_at_k_avg"] == 0
    # Run from a subfolder: the ini target `myrag:ask` is still found in rootdir.
    pytester.makeini("[pytest]\nrageval_target = myrag:ask\nrageval_eval_sets = eval_sets/*.jsonl\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-m", "pytest", "--rageval", "--rageval-judge=none", "-p", "no:cacheprovider"]
    from_sub = subprocess.run(cmd, cwd=pytester.mkdir("sub"), env=env, capture_output=True, text=True)
    assert from_sub.returncode == 0 and "1 passed" in from_sub.stdout, from_sub.stdout


def test_conftest_override_of_rageval_client(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest
        @pytest.fixture(scope="session")
        def rageval_client():
            def ask(question, params):
                return {"answer": "mine", "references": [],
                        "debug": {"retrieved_chunks": [{"rel_path": "docs/a.md", "heading_path": "# A"}]}}
            return ask
        """
    )
    write_set(pytester, "eval_sets/s", [{"id": "a", "question": "q", "gold_supports": [GOLD]}])
    pytester.runpytest("--rageval", "--rageval-judge=none").assert_outcomes(passed=1)


def test_seed_001_response_shape_read_by_configuration(pytester: pytest.Pytester) -> None:
    def seed001(body: dict[str, Any]) -> Any:
        assert "query" in body and "topK" in body
        return {
            "answer": "It was executed.",
            "citations": [
                {"proposal_id": "abc-123", "stage": "tally", "url": "u", "snippet": "Status: executed"},
                {"proposal_id": "def-456", "stage": "forum", "url": "u", "snippet": "..."},
            ],
        }

    pytester.makeini(seed_001_ini())
    write_set(pytester, "eval_sets/s", [{"id": "q4", "query": "Status of STIP?", "expectedProposalIds": ["abc-123"]}])
    with AskServer(seed001) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}")
    result.assert_outcomes(passed=1)
    case = next(iter(latest_metrics(pytester.path)["cases"].values()))
    assert case["metrics"]["mrr"] == 1 and case["metrics"]["attribution_hit"] == 1


def test_header_secret_reaches_server_but_no_artifact(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-token-value-123"
    monkeypatch.setenv("MY_RAG_TOKEN", secret)
    pytester.makeini("[pytest]\nrageval_headers =\n    Authorization: Bearer ${MY_RAG_TOKEN}\n")
    write_set(
        pytester,
        "eval_sets/s",
        [{"id": "a", "question": "q", "gold_supports": [GOLD]}, {"id": "b", "question": "boom"}],
    )

    def respond(body: dict[str, Any]) -> Any:
        if body["question"] == "boom":
            return (401, {"error": "bad token"})
        return Ranked()(body)

    with AskServer(respond) as server:
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "--junitxml=junit.xml"
        )
        assert server.requests[0]["headers"]["Authorization"] == f"Bearer {secret}"
    result.assert_outcomes(passed=1, errors=1)
    assert secret not in result.stdout.str()
    for path in pytester.path.rglob("*"):
        if path.is_file() and path.suffix in {".json", ".jsonl", ".html", ".xml", ""}:
            assert secret not in path.read_text(errors="replace"), path


def test_handwritten_test_with_assert_metrics_is_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_hand="""
        import pytest
        from pytest_rageval import assert_metrics

        def test_good(rageval_client):
            result = rageval_client.evaluate(question="q-good", gold_supports=[{"rel_path": "docs/a.md", "heading_path": "# A"}])
            assert_metrics(result, recall_at_k=1, mrr=1)

        def test_bad(rageval_client):
            result = rageval_client.evaluate(id="strict", question="q-bad", gold_supports=[{"rel_path": "docs/a.md"}])
            assert_metrics(result, mrr=1, precision_at_k=0.9)
        """
    )
    system = Ranked()
    with AskServer(system) as server:
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "test_hand.py"
        )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*precision_at_k = 0.2 (needs >= 0.9)*"])
    metrics = latest_metrics(pytester.path)
    assert metrics["cases"][f"test_hand.py::test_good::{question_id('q-good')}"]["outcome"] == "passed"
    assert metrics["cases"]["test_hand.py::test_bad::strict"]["outcome"] == "failed"


def test_conftest_judge_counts_in_handwritten_tests_as_in_eval_set_cases(pytester: pytest.Pytester) -> None:
    """A conftest override of ``rageval_judge`` judges hand-written ``evaluate`` calls too (the run has no judge)."""
    pytester.makeconftest(
        """
        import pytest
        from pytest_rageval.judges.lexical import LexicalJudge

        @pytest.fixture(scope="session")
        def rageval_judge():
            return LexicalJudge()
        """
    )
    pytester.makepyfile(
        test_hand="""
        def test_judged(rageval_client):
            result = rageval_client.evaluate(question="q-good", gold_supports=[{"rel_path": "docs/a.md"}])
            assert result.metrics["groundedness"] is not None
        """
    )
    write_set(pytester, "eval_sets/s", [{"id": "a", "question": "q-good", "gold_supports": [GOLD]}])
    with AskServer(Ranked()) as server:
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "test_hand.py", "eval_sets"
        )
    result.assert_outcomes(passed=2)
    cases = latest_metrics(pytester.path)["cases"]
    assert cases["eval_sets/s.jsonl::a"]["metrics"]["groundedness"] is not None
    assert cases[f"test_hand.py::test_judged::{question_id('q-good')}"]["metrics"]["groundedness"] is not None


def test_handwritten_fixture_without_rageval_skips(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hand="def test_x(rageval_client):\n    pass\n")
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*run pytest with --rageval*"])


def test_flaky_case_passes_on_majority_and_is_reported(pytester: pytest.Pytester) -> None:
    calls = {"n": 0}

    def respond(body: dict[str, Any]) -> Any:
        calls["n"] += 1
        system = Ranked()
        system.rank = 1 if calls["n"] != 2 else 3  # second of three runs misses mrr >= 1
        return system(body)

    write_set(
        pytester,
        "eval_sets/s",
        [{"id": "f", "question": "q", "gold_supports": [GOLD], "flaky": True, "thresholds": {"mrr": 1}}],
    )
    with AskServer(respond) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}")
    result.assert_outcomes(passed=1)
    assert calls["n"] == 3
    metrics = latest_metrics(pytester.path)
    assert metrics["flaky"] == 1


def test_a_failing_repeated_case_says_how_many_runs_passed_and_shows_one_run(pytester: pytest.Pytester) -> None:
    """The misses, answer and retrieval in the message all come from the same run (issue 7)."""
    calls = {"n": 0}

    def respond(body: dict[str, Any]) -> Any:
        calls["n"] += 1
        gold_rank = {1: 1, 2: 3, 3: 2}[calls["n"]]  # run 1 passes mrr >= 1; runs 2 and 3 miss it
        others = [chunk(f"docs/other{i}.md", "# O", r) for i, r in enumerate(r for r in (1, 2, 3) if r != gold_rank)]
        return answer(f"answer of run {calls['n']}", [chunk("docs/a.md", "# A", gold_rank), *others])

    write_set(
        pytester,
        "eval_sets/s",
        [{"id": "f", "question": "q", "gold_supports": [GOLD], "repeat": 3, "thresholds": {"mrr": 1}}],
    )
    with AskServer(respond) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*1 of 3 runs passed (a repeated case passes when more than half pass); the misses, answer and retrieval below are those of run 2",
            "missed:",
            "*mrr = 0.333333 (needs >= 1)",
            "answer: answer of run 2",
            "top retrieved (* = gold):",
            "   1   docs/other0.md  O",
            "   2   docs/other1.md  O",
            "   3 * docs/a.md  A",
        ]
    )
    record = json.loads(next((pytester.path / "results").glob("*/results.jsonl")).read_text())
    assert record["shown_run"] == 2 and record["answer"] == "answer of run 2"
    assert [r["passed"] for r in record["repeats"]] == [True, False, False]


def test_xfail_and_full_text_and_pytest_html(pytester: pytest.Pytester) -> None:
    long_text = "x" * 500

    def respond(body: dict[str, Any]) -> Any:
        gold = chunk("docs/a.md", "# A", 1, text=long_text)
        return answer("A.", [gold])

    write_set(
        pytester,
        "eval_sets/s",
        [
            {"id": "a", "question": "q", "gold_supports": [GOLD]},
            {"id": "x", "question": "q", "gold_supports": [{"rel_path": "nope.md"}], "xfail": "known gap"},
        ],
    )
    with AskServer(respond) as server:
        target = f"--rageval-target={server.url}"
        short = pytester.runpytest(
            "--rageval", "--rageval-judge=none", target, "--html=report.html", "--self-contained-html"
        )
        short.assert_outcomes(passed=1, xfailed=1)
        assert (pytester.path / "report.html").exists()
        run = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
        record = json.loads((run / "results.jsonl").read_text().splitlines()[0])
        assert len(record["retrieved_chunks"][0]["text"]) == 200
        assert (run / "report.html").exists() and (run / "config.json").exists()
        full = pytester.runpytest(
            "--rageval", "--rageval-judge=none", target, "--rageval-store-full-text", "-p", "no:html"
        )
        full.assert_outcomes(passed=1, xfailed=1)
        run = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
        record = json.loads((run / "results.jsonl").read_text().splitlines()[0])
        assert len(record["retrieved_chunks"][0]["text"]) == 500


def test_xfailed_cases_are_their_own_count_in_every_artifact(pytester: pytest.Pytester) -> None:
    def respond(body: dict[str, Any]) -> Any:
        return answer("A.", [chunk("docs/a.md", "# A", 1)])

    known_gap = {"rel_path": "nope.md"}
    write_set(
        pytester,
        "eval_sets/s",
        [{"id": "a", "question": "q", "gold_supports": [GOLD]}]
        + [{"id": f"x{i}", "question": f"q{i}", "gold_supports": [known_gap], "xfail": "known gap"} for i in range(4)],
    )
    with AskServer(respond) as server:
        result = pytester.runpytest(
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "--rageval-baseline=base",
            "--rageval-update-baseline",
            "--rageval-summary-md=summary.md",
        )
    result.assert_outcomes(passed=1, xfailed=4)
    out = result.stdout.str()
    assert "cases: 1 passed, 0 failed, 0 errors, 0 skipped, 4 xfailed, 0 invalid lines" in out
    assert "the new baseline has" not in out  # xfailed cases are no failures to warn of
    metrics = latest_metrics(pytester.path)
    assert (metrics["total_tests"], metrics["passed"], metrics["failed"], metrics["xfailed"], metrics["xpassed"]) == (
        1,
        1,
        0,
        4,
        0,
    )
    assert metrics["aggregate_metrics"]["operational_metrics"]["error_rate"] == 0.0
    assert "1 passed, 0 failed, 0 errors, 4 xfailed" in (pytester.path / "summary.md").read_text()
    run = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    page = (run / "report.html").read_text()
    counts = page[page.index('class="counts"') :]
    counts = counts[: counts.index("</table>")]
    assert ">xfailed<" in counts and ">4<" in counts


def test_rageval_command_schema_and_compare(pytester: pytest.Pytester, tmp_path: Path) -> None:
    schema = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "schema"], capture_output=True, text=True, check=True
    )
    assert "gold_supports" in json.loads(schema.stdout)["properties"]
    write_set(
        pytester, "eval_sets/s", [{"id": f"c{i}", "question": f"q{i}", "gold_supports": [GOLD]} for i in range(3)]
    )
    system = Ranked()
    with AskServer(system) as server:
        pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "--rageval-output=a")
        system.rank = 2
        pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "--rageval-output=b")
    run_a = pytester.path / "a" / (pytester.path / "a" / "latest").read_text().strip()
    run_b = pytester.path / "b" / (pytester.path / "b" / "latest").read_text().strip()
    cmd = [sys.executable, "-m", "pytest_rageval.cli", "compare", str(run_a), str(run_b)]
    compared = subprocess.run(cmd, capture_output=True, text=True)
    assert compared.returncode == 1 and "mrr_avg" in compared.stdout
    same = subprocess.run([*cmd[:-1], str(run_a)], capture_output=True, text=True)
    assert same.returncode == 0

    # The tolerances of [tool.rageval.gate] in the nearest pyproject.toml apply, as they do in the pytest run.
    pytester.makepyprojecttoml("[tool.rageval.gate]\nmrr_avg = 0.6\n")
    tolerant = subprocess.run(cmd, capture_output=True, text=True, cwd=pytester.path)
    assert tolerant.returncode == 0 and "no regression" in tolerant.stdout
    # Not comparable is 2, not 1: a missing run is no regression.
    missing = subprocess.run([*cmd[:-1], str(pytester.path / "nothere")], capture_output=True, text=True)
    assert missing.returncode == 2 and "no metrics.json at" in missing.stderr


def test_collect_only_and_runs_without_cases_write_nothing(pytester: pytest.Pytester) -> None:
    write_set(pytester, "eval_sets/s", [{"id": "c1", "question": "q1", "gold_supports": [GOLD]}])
    with AskServer(Ranked()) as server:
        base = ["--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "--rageval-baseline=base.json"]
        pytester.runpytest(*base, "--rageval-update-baseline")
        kept = (pytester.path / "base.json").read_text()
        runs = sorted((pytester.path / "results").iterdir())

        collected = pytester.runpytest(*base, "--rageval-update-baseline", "--collect-only")
        deselected = pytester.runpytest(*base, "-k", "nothing_matches")
        assert len(server.requests) == 1
    assert collected.ret == 0 and deselected.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    deselected.stdout.fnmatch_lines(["*no case ran: no run folder written, no baseline compared*"])
    assert (pytester.path / "base.json").read_text() == kept  # the baseline is not replaced by an empty run
    assert sorted((pytester.path / "results").iterdir()) == runs  # no new run folder, `latest` unchanged


def test_update_baseline_into_a_new_folder(pytester: pytest.Pytester) -> None:
    write_set(pytester, "eval_sets/s", [{"id": "c1", "question": "q1", "gold_supports": [GOLD]}])
    with AskServer(Ranked()) as server:
        base = [
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "--rageval-baseline=baselines/main",
        ]
        made = pytester.runpytest(*base, "--rageval-update-baseline")
        gated = pytester.runpytest(*base)
    assert made.ret == 0 and (pytester.path / "baselines" / "main" / "metrics.json").is_file()
    assert gated.ret == 0 and "not found" not in gated.stdout.str()


def test_a_failed_rag_call_under_xfail_counts_as_an_error(pytester: pytest.Pytester) -> None:
    write_set(
        pytester,
        "eval_sets/s",
        [
            {"id": "ok", "question": "q1", "gold_supports": [GOLD]},
            {"id": "down", "question": "q-down", "gold_supports": [GOLD], "xfail": "the server fails on it"},
        ],
    )

    def respond(body: dict[str, Any]) -> Any:
        return (500, {"detail": "boom"}) if body["question"] == "q-down" else Ranked()(body)

    with AskServer(respond) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}")
    result.assert_outcomes(passed=1, xfailed=1)  # pytest's view of an xfail item whose setup raised
    metrics = latest_metrics(pytester.path)
    assert (metrics["passed"], metrics["errors"], metrics["skipped"], metrics["total_tests"]) == (1, 1, 0, 2)
    assert metrics["cases"]["eval_sets/s.jsonl::down"]["outcome"] == "error"
    assert metrics["aggregate_metrics"]["operational_metrics"]["error_rate"] == 0.5


def test_results_jsonl_carries_seed_003_case_keys(pytester: pytest.Pytester) -> None:
    write_set(
        pytester,
        "eval_sets/s",
        [
            {"id": "hit", "question": "q1", "gold_supports": [GOLD]},
            {"id": "mars", "question": "q-mars", "answerable": False},
        ],
    )
    with AskServer(Ranked()) as server:  # answers everything, so the unanswerable case hallucinates
        pytester.runpytest("--rageval", "--rageval-judge=lexical", f"--rageval-target={server.url}", "--rageval-k=3")
    run = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    records = {r["test_case_id"]: r for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())}
    hit, mars = records["hit"], records["mars"]
    assert hit["retrieval_metrics"]["recall_at_k"] == 1 and hit["retrieval_metrics"]["mrr"] == 1.0
    assert hit["retrieval_metrics"]["attribution_hit"] == 1 and "abstained" not in hit["retrieval_metrics"]
    assert set(hit["groundedness"]) == {"score", "reasoning", "unsupported_claims", "supported_claims"}
    assert hit["groundedness"]["score"] == hit["metrics"]["groundedness"]
    assert set(hit["correctness"]) == {"score", "reasoning"} and "correctness" not in mars  # unanswerable: not judged
    assert hit["abstention"] == {"abstained": False, "hallucinated": False}
    assert mars["abstention"] == {"abstained": False, "hallucinated": True}
    assert hit["config"]["k"] == 3 and hit["config"]["judge"] == "lexical"
    assert hit["config"]["config_hash"] == json.loads((run / "metrics.json").read_text())["config_hash"]


def test_the_record_names_the_client_that_served_the_cases(pytester: pytest.Pytester) -> None:
    write_set(pytester, "eval_sets/s", [{"id": "a", "question": "q", "gold_supports": [GOLD]}])
    pytester.makeconftest("""
        import pytest

        def ask(question, params):
            chunk = {"rel_path": "docs/a.md", "heading_path": "# A", "text": "A.", "rank": 1}
            return {"answer": "A.", "references": [chunk], "debug": {"retrieved_chunks": [chunk]}}

        @pytest.fixture(scope="session")
        def rageval_client():
            return ask
    """)
    with AskServer(Ranked()) as server:
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "--rageval-matrix=top_k=3,5"
        )
        asked = len(server.requests)
    assert result.ret == 0, result.stdout.str()
    assert asked == 0  # the fixture served the cases, not the target
    result.stdout.fnmatch_lines(
        [f"rageval: target the rageval_client fixture of conftest.py (rageval_target {server.url} is not used)*"]
    )
    run = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    config = json.loads((run / "config.json").read_text())
    assert config["client"] == {
        "kind": "fixture",
        "fixture": "rageval_client",
        "served_by": "the rageval_client fixture of conftest.py",
    }
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["target"] == {"kind": "fixture", "name": "the rageval_client fixture of conftest.py"}
    assert metrics["matrix"] == {"top_k": [3, 5]} and metrics["git_dirty"] is None  # no repository here
    history = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "history", "results"],
        capture_output=True,
        text=True,
        cwd=pytester.path,
    )
    assert "the rageval_client fixture of conftest.py, matrix top_k=3,5" in history.stdout
