"""The one backoff policy (retry.backoff_delay) of the RAG client, the judge and the judge cache: exponential with
full jitter, capped, a server's Retry-After first; and end to end through loopback servers that answer 429."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk
from openai_server import OpenAIServer, fail_times, verdicts

from pytest_rageval.judges.base import JudgeInput
from pytest_rageval.judges.openai_judge import OpenAIJudge
from pytest_rageval.retry import backoff_delay
from pytest_rageval.targets.http_client import HttpClient


def constant(value: float) -> Any:
    """A random source that always draws ``value``."""
    return lambda: value


@pytest.mark.parametrize("attempt", [0, 1, 2, 5])
def test_jitter_spans_zero_to_the_exponential_ceiling(attempt: int) -> None:
    ceiling = 0.5 * 2**attempt
    assert backoff_delay(attempt, base=0.5, cap=100.0, rand=constant(0.0)) == 0.0
    assert backoff_delay(attempt, base=0.5, cap=100.0, rand=constant(1.0)) == ceiling
    assert backoff_delay(attempt, base=0.5, cap=100.0, rand=constant(0.25)) == ceiling / 4


def test_the_cap_bounds_every_draw_and_a_huge_attempt() -> None:
    assert backoff_delay(4, base=0.5, cap=3.0, rand=constant(1.0)) == 3.0  # 0.5 * 16 = 8, capped
    assert backoff_delay(4, base=0.5, cap=3.0, rand=constant(0.5)) == 1.5  # jitter inside the capped range
    assert backoff_delay(10_000, base=0.5, cap=30.0, rand=constant(1.0)) == 30.0  # no float overflow
    assert backoff_delay(3, base=0.5, cap=0.0, rand=constant(1.0)) == 0.0
    assert backoff_delay(2, base=1.0, cap=30.0, rand=constant(7.0)) == 4.0  # a source out of [0, 1] is clamped
    assert backoff_delay(2, base=1.0, cap=30.0, rand=constant(-1.0)) == 0.0


def test_retry_after_wins_over_the_exponential_and_is_capped() -> None:
    never = constant(float("nan"))  # the random source is not consulted when the server said how long
    assert backoff_delay(0, base=5.0, cap=30.0, headers={"retry-after": "2"}, rand=never) == 2.0
    assert backoff_delay(6, base=5.0, cap=30.0, headers={"retry-after": "0"}, rand=never) == 0.0
    assert backoff_delay(0, base=0.1, cap=30.0, headers={"retry-after-ms": "250"}, rand=never) == 0.25
    assert backoff_delay(0, base=0.1, cap=3.0, headers={"retry-after": "120"}, rand=never) == 3.0
    # a header that is no delay falls back to the jittered exponential
    assert backoff_delay(1, base=0.5, cap=30.0, headers={"retry-after": "soon"}, rand=constant(1.0)) == 1.0
    assert backoff_delay(1, base=0.5, cap=30.0, headers={}, rand=constant(1.0)) == 1.0


def test_the_default_source_stays_within_bounds_and_leaves_the_global_random_alone() -> None:
    import random

    random.seed(1234)
    expected = random.random()
    random.seed(1234)
    draws = [(attempt, backoff_delay(attempt, base=0.01, cap=0.05)) for attempt in range(8) for _ in range(50)]
    assert random.random() == expected  # the jitter draws from its own generator
    assert all(0.0 <= delay <= min(0.05, 0.01 * 2**attempt) for attempt, delay in draws)
    assert len({delay for _, delay in draws}) > 1  # it is jitter, not a constant


# --------------------------------------------------------------------------- end to end: 429 + Retry-After, then 200


class Timed:
    """A responder that notes when each request arrived, then passes it on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.arrivals: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, *args: Any) -> Any:
        with self.lock:
            self.arrivals.append(time.monotonic())
        return self.inner(*args)

    def gap(self) -> float:
        return self.arrivals[1] - self.arrivals[0]


def test_rag_client_waits_the_retry_after_of_a_429_then_succeeds() -> None:
    replies = iter([(429, {"error": "slow down"}, {"Retry-After": "1"})])
    timed = Timed(lambda body: next(replies, answer("ok", [chunk("a.md", "# A", 1)])))
    with AskServer(timed) as server:
        # backoff 20 s: a jittered exponential wait could be anything up to 20 s; Retry-After says 1 s
        client = HttpClient(server.url, retries=2, backoff=20.0, max_backoff=30.0)

        async def ask() -> Any:
            try:
                return await client.aask("q", k=3, params={})
            finally:
                await client.aclose()

        reply = asyncio.run(ask())
    assert reply.attempts == 2 and reply.response.answer == "ok"
    assert len(timed.arrivals) == 2 and 0.9 <= timed.gap() < 5.0


def test_judge_waits_the_retry_after_of_a_429_then_succeeds() -> None:
    timed = Timed(fail_times(1, 429, retry_after="1", then=verdicts()))
    with OpenAIServer(timed) as server:
        judge = OpenAIJudge(model="m", base_url=server.base_url, api_key="k", backoff=20.0, max_backoff=30.0)

        async def judge_once() -> Any:
            try:
                return await judge.judge(
                    "correctness", JudgeInput(question="q", answer="a", contexts=("c",), reference_answer="a")
                )
            finally:
                await judge.aclose()

        verdict = asyncio.run(judge_once())
    assert verdict.score == 4.0 and judge.requests_sent == 2
    assert len(timed.arrivals) == 2 and 0.9 <= timed.gap() < 5.0
