"""A judge endpoint that answers 429 with a long Retry-After forever, or 503 forever, trips a circuit breaker: after
two requests in a row used up their retries, every later request fails at once naming why, so a run ends in
bounded time; another process of the run (an xdist worker) that sees the shared flag gives up early too."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from openai_server import OpenAIServer, fail_times

from pytest_rageval.judges.base import JudgeError, JudgeInput
from pytest_rageval.judges.openai_judge import OpenAIJudge, StoppedFlag

CASES = 10
INPUT = JudgeInput(
    question="q?", answer="a.", contexts=("c.",), context_ids=(None,), reference_answer="a.", key_facts=()
)


def judge_all(judge: OpenAIJudge, cases: int) -> list[str]:
    """Each case's error, judged one after another."""

    async def main() -> list[str]:
        errors = []
        try:
            for _ in range(cases):
                try:
                    await judge.judge("correctness", INPUT)
                except JudgeError as exc:
                    errors.append(exc.message)
        finally:
            await judge.aclose()
        return errors

    return asyncio.run(main())


@pytest.mark.parametrize("status, shown", [(429, "HTTP 429"), (503, "HTTP 503")])
def test_an_endpoint_that_refuses_everything_is_given_up_after_two_requests(status: int, shown: str) -> None:
    with OpenAIServer(fail_times(10**6, status, retry_after="30")) as server:
        judge = OpenAIJudge(model="m", base_url=server.base_url, api_key="sk-test-1234", max_backoff=0.001)
        errors = judge_all(judge, CASES)
        sent = len(server.requests)
    assert len(errors) == CASES
    attempts = judge.max_retries + 1
    assert sent == 2 * attempts, sent  # two requests' retries, then nothing more is sent
    stopped = f"the judge at {server.base_url} stopped answering ({shown} on 2 requests in a row, each after {attempts} attempts)"
    assert errors[1] == stopped and errors[2:] == [stopped] * (CASES - 2), errors[:3]
    assert judge.stopped_answering == (server.base_url, 0)


def test_an_answer_between_failures_keeps_the_breaker_open(tmp_path: Path) -> None:
    """One request that used up its retries, then an answer: the count starts again."""
    with OpenAIServer(fail_times(6, 503)) as server:
        judge = OpenAIJudge(model="m", base_url=server.base_url, api_key="sk-test-1234", max_backoff=0.001)
        errors = judge_all(judge, 4)
    assert len(errors) == 1 and judge.stopped_answering is None


def test_another_process_that_found_it_stopped_makes_this_one_give_up_early(tmp_path: Path) -> None:
    flag = StoppedFlag(tmp_path / "judge-stopped")
    flag.raise_flag()  # as another xdist worker's judge did
    with OpenAIServer(fail_times(10**6, 429, retry_after="30")) as server:
        judge = OpenAIJudge(model="m", base_url=server.base_url, api_key="sk-test-1234", max_backoff=0.001)
        judge.stopped_flag = flag
        errors = judge_all(judge, 3)
        sent = len(server.requests)
    assert sent == 3, sent  # the first request and two retries, then nothing more
    assert (
        errors
        == [
            f"the judge at {server.base_url} stopped answering (HTTP 429; another process of the run found it stopped answering)"
        ]
        * 3
    )
