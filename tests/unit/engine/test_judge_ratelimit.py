"""The judge endpoint limiter: calls in flight are bounded, granted in case order, and a 429 pauses every
request together."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk
from openai_server import OneSlot, OpenAIServer, error, ok, user_text

from pytest_rageval.flow import CASE_ORDER, EndpointLimiter
from pytest_rageval.judges.base import JudgeInput
from pytest_rageval.judges.openai_judge import OpenAIJudge

VERDICT = json.dumps({"reasoning": "ok", "score": 4, "supported_claims": [], "unsupported_claims": []})


def test_a_429_pauses_every_request_to_the_endpoint() -> None:
    arrivals: list[tuple[float, int]] = []
    lock = threading.Lock()

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Any:
        with lock:
            first = not arrivals
            arrivals.append((time.monotonic(), 429 if first else 200))
        if first:
            return error(429, "slow down", type_="rate_limit_error", headers={"Retry-After": "1"})
        time.sleep(0.3)  # the request beside the first holds its slot until the 429 has surely been seen
        return ok(VERDICT)

    async def main(base_url: str) -> list[Any]:
        judge = OpenAIJudge(model="m", base_url=base_url, api_key="k", max_in_flight=2, backoff=0.01)
        inputs = [JudgeInput(question=f"q{i}", answer="a", contexts=("c",)) for i in range(6)]

        async def staggered(i: int, inp: JudgeInput) -> Any:
            await asyncio.sleep(0.02 * i)  # the others arrive after the 429 came back
            return await judge.judge("groundedness", inp)

        try:
            return await asyncio.gather(*(staggered(i, inp) for i, inp in enumerate(inputs)))
        finally:
            await judge.aclose()

    with OpenAIServer(respond) as server:
        verdicts = asyncio.run(main(server.base_url))
    assert [v.score for v in verdicts] == [4.0] * 6
    t429 = arrivals[0][0]
    later = [t - t429 for t, status in arrivals[1:]]
    # Only a request already in flight beside the first (2 slots) can arrive during the Retry-After
    # pause; every request sent after the 429 came back waited for the pause to end.
    assert len(later) == 6 and sum(1 for t in later if t < 0.9) <= 1 and sorted(later)[1] >= 0.9


class InFlight:
    """A responder that answers after 50 ms and records the most requests it ever held at once."""

    def __init__(self) -> None:
        self.now = self.max = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any], headers: dict[str, Any]) -> Any:
        with self.lock:
            self.now += 1
            self.max = max(self.max, self.now)
        time.sleep(0.05)
        with self.lock:
            self.now -= 1
        return ok(VERDICT)


def test_requests_in_flight_are_bounded() -> None:
    in_flight = InFlight()

    async def main(base_url: str) -> None:
        judge = OpenAIJudge(model="m", base_url=base_url, api_key="k", max_in_flight=3)
        try:
            await asyncio.gather(*(judge.judge("groundedness", JudgeInput(f"q{i}", "a", ("c",))) for i in range(12)))
        finally:
            await judge.aclose()

    with OpenAIServer(in_flight) as server:
        asyncio.run(main(server.base_url))
    assert in_flight.max == 3


def test_the_spot_check_judge_shares_the_endpoint_limiter(tmp_path: Any) -> None:
    """A second model on the same endpoint counts against the same cap (and so pauses with it on a 429)."""
    from pytest_rageval.config.settings import Settings
    from pytest_rageval.engine.endpoint_limits import EndpointLimits
    from pytest_rageval.engine.judge_factory import build_judge

    in_flight = InFlight()
    with OpenAIServer(in_flight) as server:
        settings = Settings(
            rootdir=tmp_path,
            judge="openai",
            judge_model="m",
            judge_base_url=server.base_url,
            concurrency=2,
            no_cache=True,
        )
        limits = EndpointLimits(settings)
        primary = build_judge(settings, {"RAGEVAL_JUDGE_API_KEY": "k"}, limits=limits)
        spot = build_judge(settings, {"RAGEVAL_JUDGE_API_KEY": "k"}, model="m2", limits=limits)
        assert primary is not None and spot is not None

        async def main() -> None:
            calls = [
                setup.judge.judge("groundedness", JudgeInput(f"q{i}", "a", ("c",)))
                for i in range(4)
                for setup in (primary, spot)
            ]
            try:
                await asyncio.gather(*calls)
            finally:
                await primary.judge.aclose()
                await spot.judge.aclose()

        asyncio.run(main())
        models = sorted(r["body"]["model"] for r in server.requests)
    assert models == ["m"] * 4 + ["m2"] * 4
    assert in_flight.max == 2  # one cap for the endpoint, not one per model


# --------------------------------------------------------------------------- case order


def test_a_free_slot_goes_to_the_earliest_waiting_case_not_the_first_to_arrive() -> None:
    async def main() -> list[int]:
        limiter, served, hold = EndpointLimiter(1), [], asyncio.Event()

        async def request(order: int) -> None:
            async with limiter.slot(order):
                served.append(order)
                await hold.wait()

        tasks = [asyncio.create_task(request(9))]
        await asyncio.sleep(0)  # case 9 takes the only slot
        tasks += [asyncio.create_task(request(order)) for order in (5, 2, 7, 0, 2)]
        while limiter.waiting < 5:
            await asyncio.sleep(0)
        hold.set()
        await asyncio.gather(*tasks)
        return served

    assert asyncio.run(main()) == [9, 0, 2, 2, 5, 7]  # ties (the two 2s) in arrival order


def test_a_cancelled_waiter_neither_takes_nor_leaks_a_slot() -> None:
    async def main() -> tuple[list[int], int]:
        limiter, served, hold = EndpointLimiter(1), [], asyncio.Event()

        async def request(order: int) -> None:
            async with limiter.slot(order):
                served.append(order)
                await hold.wait()

        first = asyncio.create_task(request(3))
        await asyncio.sleep(0)
        early, late = asyncio.create_task(request(0)), asyncio.create_task(request(4))
        while limiter.waiting < 2:
            await asyncio.sleep(0)
        early.cancel()  # case 0 is interrupted while it waits
        hold.set()
        await asyncio.gather(first, late)
        async with limiter.slot(5):  # the slot came back: nothing leaked
            served.append(5)
        return served, limiter.waiting

    assert asyncio.run(main()) == ([3, 4, 5], 0)


def test_judge_requests_are_served_in_case_order_through_the_judge() -> None:
    """CASE_ORDER (set where a case starts) ranks the case's judge requests at the endpoint limiter."""
    release = threading.Event()

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Any:
        if "<question>\nq9\n" in user_text(body):
            release.wait(timeout=10)  # case 9 holds the only slot until the others queue behind it
        return ok(VERDICT)

    async def main(base_url: str, server: OpenAIServer) -> None:
        judge = OpenAIJudge(model="m", base_url=base_url, api_key="k", max_in_flight=1)

        async def case(order: int) -> Any:
            CASE_ORDER.set(order)
            return await judge.judge("groundedness", JudgeInput(f"q{order}", "a", ("c",)))

        try:
            await case(-1)  # the probe has decided the response format
            tasks = [asyncio.create_task(case(9))]
            while len(server.requests) < 2:
                await asyncio.sleep(0.01)
            tasks += [asyncio.create_task(case(order)) for order in (6, 1, 4, 0)]
            assert isinstance(judge.limiter, EndpointLimiter)  # the judge's own: none was given
            while judge.limiter.waiting < 4:
                await asyncio.sleep(0.01)
            release.set()
            await asyncio.gather(*tasks)
        finally:
            await judge.aclose()

    with OpenAIServer(respond) as server:
        asyncio.run(main(server.base_url, server))
        questions = [user_text(b).split("\n")[1] for b in server.bodies()]
    assert questions == ["q-1", "q9", "q0", "q1", "q4", "q6"]


# --------------------------------------------------------------------------- in flight within the timeout


def test_the_cap_follows_the_service_time_of_requests_that_ran_alone() -> None:
    limiter = EndpointLimiter(8, timeout=60)
    limiter.report(20.0, alone=False, granted_at=0)  # shared the endpoint: says nothing about one request
    assert limiter.cap == 8
    limiter.report(20.0, alone=True, granted_at=0)
    assert limiter.cap == 1  # 60 s / 2 / 20 s: one request at a time
    for _ in range(EndpointLimiter.SAMPLES - 1):
        limiter.report(2.0, alone=True, granted_at=0)
    assert limiter.cap == 1  # the slow one is still among the last few
    limiter.report(2.0, alone=True, granted_at=0)
    assert limiter.cap == 8  # 60 / 2 / 2 = 15, at most max_in_flight
    limiter.report(6.0, alone=True, granted_at=0)
    assert limiter.cap == 5
    no_timeout = EndpointLimiter(8)
    no_timeout.report(100.0, alone=True, granted_at=0)
    assert no_timeout.cap == 8


def test_a_slow_one_slot_server_gets_one_request_at_a_time_instead_of_timeouts() -> None:
    """The probe ran alone in 0.3 s against a 1 s timeout: then one request at a time, none waits into a timeout.
    Without that, six requests sent together to a one-slot server time out from the third on."""
    server = OneSlot(0.3)

    async def main(base_url: str) -> list[Any]:
        judge = OpenAIJudge(model="m", base_url=base_url, api_key="k", max_in_flight=8, timeout=1.0, max_retries=0)
        try:
            inputs = [JudgeInput(f"q{i}", "a", ("c",)) for i in range(7)]
            return [judge, *await asyncio.gather(*(judge.judge("correctness", inp) for inp in inputs))]
        finally:
            await judge.aclose()

    with OpenAIServer(server) as srv:
        judge, *verdicts = asyncio.run(main(srv.base_url))
    assert [v.score for v in verdicts] == [4.0] * 7
    assert judge.requests_sent == 7 and judge.limiter.cap == 1


# --------------------------------------------------------------------------- a slow one-slot judge, interrupted


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "timeout"])
def test_an_interrupted_run_against_a_slow_one_slot_judge_keeps_every_finished_case(
    pytester: pytest.Pytester, sig: int
) -> None:
    """Cases finish one after another against a one-slot judge, so Ctrl-C (or `timeout`'s SIGTERM) part-way
    through leaves the finished ones, judged, in results.jsonl and a metrics.json marked incomplete."""
    cases = [
        {"id": f"c{i}", "question": f"q{i}", "gold_supports": [{"rel_path": "docs/a.md"}], "reference_answer": "x"}
        for i in range(12)
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in cases) + "\n"})
    gold = chunk("docs/a.md", "# A", 1, text="A fact.")
    with AskServer(lambda body: answer("A fact [1].", [gold])) as rag, OpenAIServer(OneSlot(0.1)) as judge:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "--rageval",
            f"--rageval-target={rag.url}",
            "--rageval-judge=openai",
            "--rageval-judge-model=m",
            f"--rageval-judge-base-url={judge.base_url}",
            "--rageval-no-cache",
            "--rageval-concurrency=4",
            "-p",
            "no:cacheprovider",
            "-q",
        ]
        proc = subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        results: list[Path] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (results and len(results[0].read_text().splitlines()) >= 2):
            results = list((pytester.path / "results").glob("*/results.jsonl"))
            time.sleep(0.02)
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=60)
        served = len(judge.requests)
    assert results, output
    run_dir = results[0].parent
    kept = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert proc.returncode != 0 and metrics["complete"] is False
    assert 2 <= len(kept) < 12 and metrics["total_tests"] == len(kept) and served < 24
    assert [r["test_case_id"] for r in kept] == [f"c{i}" for i in range(len(kept))]
    for record in kept:  # finished means judged: both verdicts are in the record
        assert record["outcome"] == "passed" and record["metrics"]["groundedness"] == 4.0
        assert record["metrics"]["correctness"] == 4.0
