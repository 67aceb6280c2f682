"""The public extension surface: Metric, Judge and Verdict from the package's top level, built by keyword."""

from __future__ import annotations

import asyncio

import pytest

import pytest_rageval
from pytest_rageval import Judge, JudgeInput, Metric, Verdict


def test_the_extension_names_are_public() -> None:
    for name in ("Metric", "Judge", "Verdict", "JudgeInput", "JudgeError", "ScoreContext"):
        assert name in pytest_rageval.__all__
        assert getattr(pytest_rageval, name).__name__ == name


def test_metric_takes_keywords_only() -> None:
    metric = Metric(
        name="one",
        kind="deterministic",
        scale=(0.0, 1.0),
        direction="higher",
        applies_to="all",
        aggregate_kind="avg",
        score=lambda c, r, x: 1,
    )
    assert metric.aggregate == "one_avg"
    with pytest.raises(TypeError):
        Metric("one", "deterministic", (0.0, 1.0), "higher", "all", "avg", score=lambda c, r, x: 1)  # type: ignore[call-arg]


def test_verdict_takes_keywords_only() -> None:
    assert Verdict(metric="groundedness", score=4.0).score == 4.0
    with pytest.raises(TypeError):
        Verdict("groundedness", 4.0)  # type: ignore[call-arg]


class Exact(Judge):
    """Correctness 5 when the answer is the reference answer, else 1."""

    def __init__(self) -> None:
        super().__init__(name="exact", heuristic=True)

    async def judge(self, metric: str, inp: JudgeInput, *, repeat_index: int = 0) -> Verdict:
        return Verdict(metric=metric, score=5.0 if inp.answer == inp.reference_answer else 1.0)


def test_a_judge_subclass_needs_only_a_name_and_judge() -> None:
    judge = Exact()
    assert (judge.name, judge.heuristic) == ("exact", True)
    assert judge.describe() == {"name": "exact", "model": None, "heuristic": True}
    assert judge.supports("correctness")
    verdict = asyncio.run(judge.judge("correctness", JudgeInput("q", "Paris", reference_answer="Paris")))
    assert verdict.score == 5.0
    asyncio.run(judge.aclose())
    with pytest.raises(TypeError):
        Judge("exact")  # type: ignore[abstract,call-arg]


def test_a_judge_is_named_by_keyword() -> None:
    class Bare(Judge):
        async def judge(self, metric: str, inp: JudgeInput, *, repeat_index: int = 0) -> Verdict:
            return Verdict(metric=metric)

    with pytest.raises(TypeError):
        Bare("bare")  # type: ignore[call-arg]
    assert Bare(name="bare").name == "bare"
