"""The demo RAG's ``alpha`` param: a hybrid of BM25 and a title match (issue 10 item 5).

``alpha`` = 0 (or absent) is plain BM25, byte for byte; ``alpha`` > 0 re-ranks by
``(1 - alpha) * BM25 / best BM25 + alpha * title match``; bad values are refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from pytest_rageval.demo import ask
from pytest_rageval.demo.__main__ import main as demo_main

ROOT = Path(__file__).resolve().parents[3]
COUNCIL = "How many members does the Security Council have, and how many signatures does an emergency action require?"
POWERS = ("council/overview.md", "# Security Council > ## Powers")


def questions() -> list[str]:
    lines = (ROOT / "eval_sets" / "demo.jsonl").read_text(encoding="utf-8").splitlines()
    cases = [json.loads(line) for line in lines if line.strip() and not line.startswith("//")]
    return [turn["question"] for case in cases for turn in case.get("turns") or [case] if "question" in turn] + [
        case["query"] for case in cases if "query" in case
    ]


def without_timings(response: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in response.items() if key != "timings"}


def chunks(response: dict[str, Any]) -> list[dict[str, Any]]:
    return cast("list[dict[str, Any]]", response["debug"]["retrieved_chunks"])


def placed(response: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["rel_path"], c["heading_path"]) for c in chunks(response)]


@pytest.mark.parametrize("k", [3, 5, 10])
def test_alpha_zero_is_plain_bm25(k: int) -> None:
    for question in questions():
        plain = without_timings(ask(question, {"k": k}))
        for alpha in (0, 0.0):
            assert without_timings(ask(question, {"k": k, "alpha": alpha})) == plain, (question, alpha)
        assert all(c["score_vector"] is None and c["score_lexical"] == c["score_final"] for c in chunks(plain))


def test_alpha_reranks_by_the_title_match() -> None:
    bm25 = ask(COUNCIL, {"k": 5})
    assert placed(bm25)[0] == POWERS
    heavy = ask(COUNCIL, {"k": 5, "alpha": 0.7})
    # the emergency-actions note names "emergency action" in its file name and headings: it outranks Powers
    assert [path for path, _ in placed(heavy)[:3]] == ["council/emergency-actions.md"] * 3
    assert placed(heavy)[3] == POWERS
    assert sorted(placed(heavy)) == sorted(placed(bm25))  # same candidates, another order
    light = ask(COUNCIL, {"k": 5, "alpha": 0.3})
    assert placed(light)[0] == POWERS

    lexical = {c["chunk_id"]: c["score_lexical"] for c in chunks(bm25)}
    best = max(lexical.values())
    finals = [c["score_final"] for c in chunks(heavy)]
    assert finals == sorted(finals, reverse=True) and [c["rank"] for c in chunks(heavy)] == [1, 2, 3, 4, 5]
    for chunk in chunks(heavy):
        assert chunk["score_lexical"] == lexical[chunk["chunk_id"]]  # BM25, as without alpha
        assert 0.0 <= chunk["score_vector"] <= 1.0
        expected = 0.3 * chunk["score_lexical"] / best + 0.7 * chunk["score_vector"]
        assert chunk["score_final"] == pytest.approx(expected, abs=2e-6)


def test_alpha_one_is_the_title_match_alone() -> None:
    response = ask("What was the result of the STIP Tally vote?", {"k": 3, "alpha": 1})
    vectors = [c["score_vector"] for c in chunks(response)]
    assert [c["score_final"] for c in chunks(response)] == vectors == sorted(vectors, reverse=True)
    assert vectors[0] > 0.5


@pytest.mark.parametrize("alpha", ["0.5", -0.1, 1.5, True, float("nan"), float("inf"), [0.5]])
def test_bad_alpha_is_refused(alpha: Any) -> None:
    with pytest.raises(ValueError, match=r"^alpha must be a number from 0 to 1, got "):
        ask(COUNCIL, {"alpha": alpha})


def test_bad_alpha_over_http_and_cli(demo_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    reply = httpx.post(f"{demo_url}/api/v1/ask", json={"question": COUNCIL, "alpha": 2}, timeout=10)
    assert reply.status_code == 400 and reply.json() == {"error": "alpha must be a number from 0 to 1, got 2"}
    good = httpx.post(f"{demo_url}/api/v1/ask?debug=true", json={"question": COUNCIL, "alpha": 0.7}, timeout=10)
    assert placed(good.json())[:4] == placed(ask(COUNCIL, {"alpha": 0.7}))[:4]

    assert demo_main(["ask", COUNCIL, "--alpha", "1.5"]) == 2
    assert "alpha must be a number from 0 to 1, got 1.5" in capsys.readouterr().err
    assert demo_main(["ask", COUNCIL, "--alpha", "0.7", "--k", "4"]) == 0
    assert placed(json.loads(capsys.readouterr().out))[3] == POWERS


def test_hybrid_is_deterministic_across_hash_seeds() -> None:
    script = (
        "import json, sys\n"
        "from pytest_rageval.demo import ask\n"
        "qs = json.loads(sys.argv[1])\n"
        "out = [[ask(q, {'k': 10, 'alpha': a})[key] for key in ('answer', 'references', 'debug')]"
        " for q in qs for a in (0.3, 0.7, 1.0)]\n"
        "print(json.dumps(out))\n"
    )
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", script, json.dumps(questions())],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            cwd=ROOT,
        )
        runs.append(done.stdout)
    assert runs[0] == runs[1]
    here = [
        [ask(q, {"k": 10, "alpha": a})[key] for key in ("answer", "references", "debug")]
        for q in questions()
        for a in (0.3, 0.7, 1.0)
    ]
    assert json.loads(runs[0]) == here


def test_matrix_alpha_reaches_the_demo(pytester: pytest.Pytester) -> None:
    case = {"id": "council", "question": COUNCIL, "gold_supports": [{"rel_path": POWERS[0], "heading_path": POWERS[1]}]}
    pytester.makefile(".jsonl", **{"eval_sets/s": json.dumps(case) + "\n"})
    result = pytester.runpytest(
        "--rageval",
        "--rageval-judge=none",
        "--rageval-target=pytest_rageval.demo:ask",
        "-p",
        "no:cacheprovider",
        "--rageval-matrix",
        "top_k=5;alpha=0.0,0.7",
        "-o",
        "rageval_slice_k=false",
        "--rageval-rank-by",
        "mrr",
    )
    latest = (pytester.path / "results" / "latest").read_text().strip()
    metrics = json.loads((pytester.path / "results" / latest / "metrics.json").read_text())
    mrr = {cid: config["aggregate_metrics"]["mrr_avg"] for cid, config in metrics["by_config"].items()}
    assert mrr == {"alpha=0.0-top_k=5": 1.0, "alpha=0.7-top_k=5": 0.25}, result.stdout.str()
    assert metrics["config_ranking"]["best"] == "alpha=0.0-top_k=5"
