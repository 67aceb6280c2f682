"""The judge canary (ini `rageval_judge_canary`): labelled answers re-judged in every judged run without the
cache. A real OpenAI-compatible loopback judge whose answers change between two runs (the cases' own verdicts
served unchanged by the cache) fails the gate naming the canary; an unchanged judge, and the offline judge on an
unchanged tree, never do, serially or under two xdist workers, where the canary is judged once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from openai_server import DEFAULT_VERDICTS, OpenAIServer, metric_of, ok, user_text

from pytest_rageval.judges.calibration_measure import SHIPPED_SET, LabelledAnswer, load_set
from pytest_rageval.judges.canary import canary_items, compare_canary, wilson

KEY = "sk-canary-test-0123456789"
RAG = "def ask(question, params):\n    return {'answer': 'The budget was 5 ARB.', 'retrieved_chunks': [{'text': 'The budget was 5 ARB.'}]}\n"
CASE = {"id": "c", "question": "What budget?", "reference_answer": "5 ARB."}


def scoring(score: int) -> Any:
    """A judge giving every groundedness and correctness verdict ``score`` (but the project's own case: 5); the
    other metrics their usual verdicts."""

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> tuple[int, dict[str, Any], Any]:
        metric = metric_of(body)
        if metric not in ("groundedness", "correctness"):
            return ok(json.dumps(DEFAULT_VERDICTS[str(metric)]))
        given = 5 if "What budget?" in user_text(body) else score
        verdict: dict[str, Any] = {"reasoning": "Stand-in.", "score": given}
        if metric == "groundedness":
            verdict.update(supported_claims=[], unsupported_claims=[])
        return ok(json.dumps(verdict))

    return respond


def project(pytester: pytest.Pytester, canary: int, judge: str = "lexical", extra: str = "") -> None:
    pytester.makepyfile(rag=RAG)
    pytester.makefile(".jsonl", **{"eval_sets/s": json.dumps(CASE) + "\n"})
    pytester.makepyprojecttoml(
        f'[tool.pytest.ini_options]\nrageval_target = "rag:ask"\nrageval_judge = "{judge}"\nrageval_judge_canary = "{canary}"\n{extra}'
    )


def metrics_of(run_output: str) -> dict[str, Any]:
    folder = next(
        line.split("run: ", 1)[1].split(" (", 1)[0] for line in run_output.splitlines() if line.startswith("run: ")
    )
    return cast("dict[str, Any]", json.loads((Path(folder) / "metrics.json").read_text()))


def canary_requests(server: OpenAIServer) -> int:
    return sum("What budget?" not in user_text(r["body"]) for r in server.requests)


@pytest.mark.slow
def test_a_judge_that_changed_behind_its_model_name_fails_the_gate_naming_the_canary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: list[str]
) -> None:
    monkeypatch.setenv("RAGEVAL_JUDGE_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with OpenAIServer(scoring(5)) as server:
        judge = f'rageval_judge_model = "stand-in"\nrageval_judge_base_url = "{server.base_url}"\n'
        project(pytester, 6, "openai", judge)
        args = ["--rageval", "-p", "no:cacheprovider", "--rageval-baseline", "base", *xdist]
        first = pytester.runpytest_subprocess(*args, "--rageval-update-baseline")
        first.assert_outcomes(passed=1)
        asked = canary_requests(server)
        same = pytester.runpytest_subprocess(*args)  # the same judge: the gate passes
        same.assert_outcomes(passed=1)
        assert same.ret == 0, same.stdout.str()
        assert canary_requests(server) == 2 * asked  # no cache for the canary, and judged once under xdist too
        server.responder = scoring(1)  # the judge behind "stand-in" changed
        changed = pytester.runpytest_subprocess(*args)
    changed.assert_outcomes(passed=1)  # the case's verdict came from the cache: unchanged
    assert changed.ret == 1
    out = changed.stdout.str()
    assert "judge canary: the openai judge stand-in" in out and "verdicts changed since the baseline" in out, out
    canary = metrics_of(out)["judge_canary"]
    assert canary["n"] == 6 and canary["flips_since_baseline"] > 0 and canary["agreement"] < 1.0
    assert metrics_of(same.stdout.str())["judge_canary"]["flips_since_baseline"] == 0
    labelled = [
        m
        for item in canary_items(load_set(SHIPPED_SET), 6)
        for m in item.labels
        if m in ("groundedness", "correctness")
    ]
    assert asked == len(labelled)  # each verdict the 6 items are labelled for, asked once (not once per xdist worker)
    assert KEY not in out + json.dumps(canary)


def test_the_offline_judge_canary_never_fires_on_an_unchanged_tree(pytester: pytest.Pytester, xdist: list[str]) -> None:
    project(pytester, 20)
    args = ["--rageval", "-p", "no:cacheprovider", "--rageval-baseline", "base", *xdist]
    pytester.runpytest_subprocess(*args, "--rageval-update-baseline").assert_outcomes(passed=1)
    again = pytester.runpytest_subprocess(*args)
    again.assert_outcomes(passed=1)
    assert again.ret == 0
    assert (
        "judge canary: 20 items re-judged, agreement" in again.stdout.str()
        and "no verdict changed since the baseline" in again.stdout.str()
    )
    canary = metrics_of(again.stdout.str())["judge_canary"]
    shipped = {item.id: item for item in load_set(SHIPPED_SET)}
    assert sorted(canary["verdicts"]) == sorted(item.id for item in canary_items(list(shipped.values()), 20))
    assert canary["flips_since_baseline"] == 0 and canary["judge"]["prompt_version"].startswith("lexical/")


def test_a_bad_calibration_set_is_named_before_any_case(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".jsonl",
        labels='{"id": "a", "question": "q", "contexts": ["c"], "answer": "a", "labels": {"correctness": "yes"}}\n',
    )
    project(pytester, 3, extra='rageval_calibration_set = "labels.jsonl"\n')
    result = pytester.runpytest_subprocess("--rageval", "-p", "no:cacheprovider")
    assert result.ret == 4
    assert "labels.jsonl:1: field 'labels.correctness' must be true or false" in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def item(item_id: str) -> LabelledAnswer:
    return LabelledAnswer(item_id, "q", ("c",), "a", "r", (), {"correctness": True})


def test_the_canary_is_the_first_n_by_hash_of_ids_whatever_the_file_order() -> None:
    items = [item(f"i{n}") for n in range(10)]
    assert canary_items(items, 4) == canary_items(list(reversed(items)), 4)
    assert len(canary_items(items, 4)) == 4 and canary_items(items, 0) == []


def test_flips_and_an_agreement_below_the_baselines_interval_fail_and_another_judge_is_not_compared() -> None:
    judge = {"kind": "openai", "model": "m", "base_url": None, "prompt_version": "p1"}
    base = {
        "judge": judge,
        "set_hash": "h",
        "agreement": 1.0,
        "agreement_ci": list(wilson(10, 10) or ()),
        "verdicts": {"a": {"correctness": True}},
    }
    same = {"judge": judge, "set_hash": "h", "agreement": 1.0, "n": 10, "verdicts": {"a": {"correctness": True}}}
    assert compare_canary(base, same)[0] is None and same["flips_since_baseline"] == 0
    flipped = {"judge": judge, "set_hash": "h", "agreement": 0.5, "n": 10, "verdicts": {"a": {"correctness": False}}}
    reason, _ = compare_canary(base, flipped)
    assert (
        reason is not None
        and "1 verdicts changed since the baseline (a correctness)" in reason
        and "fell to 0.500" in reason
    )
    other: dict[str, Any] = {
        "judge": {**judge, "prompt_version": "p2"},
        "set_hash": "h",
        "agreement": 0.5,
        "verdicts": {"a": {"correctness": False}},
    }
    reason, note = compare_canary(base, other)
    assert (
        reason is None
        and note is not None
        and "not compared, the baseline's judge was openai judge m (prompt p1)" in note
    )
    assert "flips_since_baseline" not in other
    assert compare_canary(None, dict(same)) == (None, "judge canary: the baseline has none to compare with")
