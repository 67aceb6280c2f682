"""A whole run against a streaming target and its non-streaming twin: the same answers and metrics, the time to first
token recorded per case and in metrics.json, a ``ttft_ms`` threshold failing the slow stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk
from stream_server import StreamServer

SLOW = "How slow is the first token?"


def _system(body: dict[str, Any]) -> dict[str, Any]:
    return answer(
        f"About {body['question']}: see the setup.", [chunk("docs/a.md", "# A", 1), chunk("docs/b.md", "# B", 2)]
    )


def _first_delay(body: dict[str, Any]) -> float:
    return 0.3 if body["question"] == SLOW else 0.0


def _run(pytester: pytest.Pytester, url: str, *extra: str) -> tuple[pytest.RunResult, dict[str, Any], Path]:
    result = pytester.runpytest_inprocess(
        "--rageval", "--rageval-judge=none", f"--rageval-target={url}", "-p", "no:cacheprovider", *extra
    )
    folder = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    records = {r["test_case_id"]: r for r in map(json.loads, (folder / "results.jsonl").read_text().splitlines())}
    return result, records, folder


def test_a_streaming_target_scores_as_its_twin_and_a_slow_first_token_fails(pytester: pytest.Pytester) -> None:
    lines = [
        {"id": "fast", "question": "Where is the setup?", "gold_supports": [{"rel_path": "docs/a.md"}]},
        {"id": "slow", "question": SLOW, "gold_supports": [{"rel_path": "docs/b.md"}], "thresholds": {"ttft_ms": 100}},
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(line) for line in lines) + "\n"})
    pytester.makeini("[pytest]\nrageval_stream_format = openai\n")
    pytester.makepyfile(
        test_hand=f"""
        import pytest
        from pytest_rageval import assert_metrics

        def test_a_hand_written_ttft_threshold(rageval_client):
            result = rageval_client.evaluate(question={SLOW!r})
            with pytest.raises(AssertionError, match=r"ttft_ms = 3[0-9][0-9].* [(]needs <= 100[)]"):
                assert_metrics(result, ttft_ms=100)
            assert_metrics(result, ttft_ms=5000, latency_ms=5000)
        """
    )
    with AskServer(_system) as plain:
        twin, twin_records, twin_folder = _run(pytester, plain.url, "eval_sets")
    with StreamServer(_system, first_delay=_first_delay) as streaming:
        streamed, records, folder = _run(pytester, streaming.url, "eval_sets", "test_hand.py")
        server_ttft = dict(streaming.ttft_ms)
    twin.assert_outcomes(passed=2)
    streamed.assert_outcomes(passed=2, failed=1)
    out = streamed.stdout.str()
    assert "ttft_ms = 3" in out and "(needs <= 100)" in out, out
    assert "  first token p50 " in out and "first token" not in twin.stdout.str()
    for cid in ("fast", "slow"):
        timed = {name: records[cid]["metrics"].pop(name) for name in ("latency_ms", "ttft_ms")}
        twin_records[cid]["metrics"].pop("latency_ms")
        assert records[cid]["metrics"] == twin_records[cid]["metrics"]
        assert records[cid]["answer"] == twin_records[cid]["answer"]
        assert timed["ttft_ms"] <= timed["latency_ms"]
    assert "ttft_ms" not in twin_records["slow"]["metrics"]
    assert server_ttft[SLOW] >= 300.0
    latency = json.loads((folder / "metrics.json").read_text())["aggregate_metrics"]["latency"]
    assert latency["ttft_p95_ms"] >= latency["ttft_p50_ms"] > 0
    assert "ttft_p50_ms" not in json.loads((twin_folder / "metrics.json").read_text())["aggregate_metrics"]["latency"]


def test_an_unknown_stream_format_stops_the_run_before_any_case(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", **{"eval_sets/s": json.dumps({"id": "c", "question": "q"}) + "\n"})
    pytester.makeini("[pytest]\nrageval_stream_format = json\n")
    result = pytester.runpytest_inprocess("--rageval", "--rageval-judge=none", "--rageval-target=http://127.0.0.1:9/x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "rageval_stream_format: unknown value 'json'; expected one of openai, text, json:<dotted.path>" in (
        result.stdout.str() + result.stderr.str()
    )
