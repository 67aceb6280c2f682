"""Sizes capped on everything shown: judge claim lists, a baseline's old answer, and the word diff's time.

A judge that answers with 100,000 unsupported claims, a baseline whose results.jsonl holds a 5 MB answer,
and two repetitive answers that make difflib cubic: each is cut (with a note) before results.jsonl, the
reports and the terminal see it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from openai_server import OpenAIServer, verdicts

from pytest_rageval.report.since import word_diff

RAG = (
    "def ask(question, params):\n"
    "    return {'answer': 'The fee is 5 euros.', 'retrieved_chunks': [{'rel_path': 'a.md', 'text': 'The fee is 5 euros.'}]}\n"
)
LINE = {
    "id": "fee",
    "question": "What is the fee?",
    "reference_answer": "5 euros",
    "gold_supports": [{"rel_path": "a.md"}],
}


def project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(rag=RAG)
    (pytester.path / "eval_sets").mkdir()
    (pytester.path / "eval_sets" / "s.jsonl").write_text(json.dumps(LINE) + "\n")


def latest(root: Path) -> Path:
    return root / "results" / (root / "results" / "latest").read_text().strip()


def records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def test_a_judge_with_100000_unsupported_claims_is_cut_to_20_with_a_note(pytester: pytest.Pytester) -> None:
    project(pytester)
    claims = [f"claim number {i} is not in the text" for i in range(100_000)]
    groundedness = {
        "reasoning": "Nothing is supported.",
        "supported_claims": [],
        "unsupported_claims": claims,
        "score": 0,
    }
    with OpenAIServer(verdicts({"groundedness": groundedness})) as judge:
        result = pytester.runpytest(
            "--rageval",
            "--rageval-target=rag:ask",
            "--rageval-judge=openai",
            "--rageval-judge-model=m",
            f"--rageval-judge-base-url={judge.base_url}",
            "--rageval-no-cache",
            "--rageval-threshold=groundedness=4",
            "-p",
            "no:cacheprovider",
        )
    result.assert_outcomes(failed=1)
    run = latest(pytester.path)
    (record,) = records(run)
    kept = record["judge"]["groundedness"]["unsupported_claims"]
    assert kept == claims[:20]
    assert "groundedness judge unsupported_claims cut from 100,000 to 20 claims" in record["notes"]
    out = result.stdout.str()
    assert "  unsupported: claim number 4 is" in out and "claim number 5 is" not in out  # 5 shown ...
    assert "... and 15 more unsupported claims" in out  # ... of the 20 kept
    assert (run / "results.jsonl").stat().st_size < 100_000
    assert (run / "report.html").stat().st_size < 1_000_000


def test_a_baseline_answer_of_5_mb_is_cut_before_the_report(pytester: pytest.Pytester) -> None:
    project(pytester)
    args = ["--rageval", "--rageval-target=rag:ask", "--rageval-judge=none", "-p", "no:cacheprovider"]
    pytester.runpytest(*args).assert_outcomes(passed=1)
    baseline = latest(pytester.path)
    (record,) = records(baseline)
    record["answer"] = "old words " * 500_000
    (baseline / "results.jsonl").write_text(json.dumps(record) + "\n")
    result = pytester.runpytest(*args, f"--rageval-baseline={baseline}")
    result.assert_outcomes(passed=1)
    report = (latest(pytester.path) / "report.html").read_text(encoding="utf-8")
    assert "old words old words" in report  # the old answer is shown ...
    assert len(report) < 1_000_000  # ... cut to the answer cap


def test_a_repetitive_answer_pair_is_diffed_whole_not_word_by_word() -> None:
    # difflib is cubic on these (153 s unbounded): past the step budget each side is shown whole, marked
    old, new, cut = word_diff("a " * 1500, "b a " * 750)
    assert not cut
    assert str(old) == "<del>" + "a " * 1500 + "</del>"
    assert str(new) == "<ins>" + "b a " * 750 + "</ins>"


def test_an_ordinary_edit_is_still_diffed_word_by_word() -> None:
    rng = random.Random(5)
    words = [f"w{rng.randrange(400)}" for _ in range(1500)]
    edited = list(words)
    edited[700] = "CHANGED"
    old, new, _ = word_diff(" ".join(words), " ".join(edited))
    assert str(old).count("<del>") == 1 and f"<del>{words[700]} </del>" in str(old)
    assert str(new).count("<ins>") == 1 and "<ins>CHANGED </ins>" in str(new)
