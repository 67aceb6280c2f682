"""The adaptive limit on requests in flight (flow.Aimd) and the endpoint limiter that applies it."""

from __future__ import annotations

import asyncio
import itertools
import math
import time

import pytest

from pytest_rageval.flow import Aimd, EndpointLimiter, RateSpacing, format_rate, parse_rate


def answered(aimd: Aimd, times: int, seconds: float = 0.1) -> None:
    for _ in range(times):
        aimd.answered(seconds, aimd.epoch())


def test_the_limit_rises_by_one_an_answer_until_the_first_refusal_then_by_about_one_a_round() -> None:
    aimd = Aimd(8, 64)
    answered(aimd, 10)
    assert aimd.allowed == 18
    aimd.refused_now(aimd.epoch())
    assert aimd.allowed == 9  # halved
    answered(aimd, 10)  # a round of answers: about one more
    assert aimd.allowed == 10


def test_one_decrease_per_round_however_many_requests_of_it_are_refused() -> None:
    aimd = Aimd(16, 64)
    sent = [aimd.epoch() for _ in range(16)]
    for epoch in sent[8:]:  # eight requests of the same round refused
        aimd.refused_now(epoch)
    assert aimd.allowed == 8
    aimd.refused_now(aimd.epoch())  # a request sent after the decrease: a new round
    assert aimd.allowed == 4


def test_near_the_level_last_refused_the_limit_rises_slowly() -> None:
    aimd = Aimd(5, 64)
    aimd.refused_now(aimd.epoch())  # refused at 5: down to 2.5
    answered(aimd, 2)
    assert aimd.allowed == 3
    answered(aimd, 3)
    assert aimd.allowed == 4  # below the refused level: about one a round
    answered(aimd, 4 * 8)
    assert aimd.allowed == 4  # the next step would pass 5: sixteen times slower
    answered(aimd, 4 * 16)
    assert aimd.allowed == 5


def test_latency_that_climbs_holds_then_eases_the_limit() -> None:
    aimd = Aimd(10, 64)
    aimd.refused_now(aimd.epoch())  # out of slow start at 5
    answered(aimd, 20, seconds=0.1)
    held = aimd.limit
    answered(aimd, 1, seconds=0.5)  # smoothed latency 0.22 s: more than twice the best, less than four times
    assert aimd.limit == held
    answered(aimd, 10, seconds=2.0)  # now far above: eases off, once per round
    assert aimd.allowed < int(held)


@pytest.mark.parametrize("start, ceiling", [(8, 64), (1, 1), (100, 4)])
def test_the_limit_stays_between_one_and_the_ceiling(start: int, ceiling: int) -> None:
    aimd = Aimd(start, ceiling)
    answered(aimd, 500)
    assert aimd.allowed == ceiling
    for _ in range(20):
        aimd.timed_out(aimd.epoch())
    assert aimd.allowed == 1


def test_without_an_adaptive_limit_the_limiter_keeps_its_number() -> None:
    limiter = EndpointLimiter(3)
    assert limiter.cap == 3 and not limiter.stats().adaptive


async def _against(capacity: int, requests: int = 400) -> tuple[int, int, EndpointLimiter]:
    """``requests`` sent through an adaptive limiter to an endpoint that refuses any request finding ``capacity``
    in flight; each refused one is sent again. Returns (refused, most in flight at the endpoint, the limiter)."""
    limiter = EndpointLimiter(64, aimd=Aimd(8, 64))
    state = {"in": 0, "most": 0, "refused": 0}

    async def one() -> None:
        while True:
            async with limiter.slot() as ticket:
                if state["in"] >= capacity:
                    state["refused"] += 1
                    ticket.refused()
                    continue
                state["in"] += 1
                state["most"] = max(state["most"], state["in"])
                await asyncio.sleep(0.002)
                state["in"] -= 1
                ticket.done(0.002)
                return

    await asyncio.gather(*(one() for _ in range(requests)))
    return state["refused"], state["most"], limiter


@pytest.mark.parametrize("capacity", [4, 16])
def test_against_an_endpoint_that_refuses_above_its_capacity_few_requests_are_refused(capacity: int) -> None:
    refused, most, limiter = asyncio.run(_against(capacity))
    stats = limiter.stats()
    assert refused == stats.refused and stats.requests == 400 + refused
    assert refused < 0.05 * stats.requests, stats
    assert most == capacity  # and it used what the endpoint allows


def test_against_an_endpoint_that_refuses_nothing_the_limit_reaches_the_ceiling() -> None:
    refused, most, limiter = asyncio.run(_against(10_000))
    assert refused == 0 and most == 64 and limiter.stats().limit == 64


# -- a rate: requests started no faster than the endpoint allows ---------------------------------------------------


@pytest.mark.parametrize(
    "text, per_second",
    [("10/min", 10 / 60), ("2/s", 2.0), ("500/h", 500 / 3600), (" 1.5 / second ", 1.5), ("3/MINUTE", 0.05)],
)
def test_a_rate_is_read_in_its_unit(text: str, per_second: float) -> None:
    assert math.isclose(parse_rate(text), per_second)


@pytest.mark.parametrize("text", ["10", "fast", "10/day", "0/min", "-1/s", "nan/s", "inf/min", "/min"])
def test_a_rate_that_cannot_be_read_says_what_it_expects(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected a rate like 10/min, 2/s or 500/h"):
        parse_rate(text)


def test_a_rate_is_written_back_in_the_largest_unit_it_fills() -> None:
    assert [format_rate(parse_rate(t)) for t in ("10/min", "2/s", "0.5/s", "30/h")] == [
        "10/min",
        "2/s",
        "30/min",
        "30/h",
    ]


def test_rate_spacing_starts_each_request_one_interval_after_the_one_before() -> None:
    spacing = RateSpacing(10 / 60)  # 10 a minute: one every 6 s, and 2% more
    assert [spacing.reserve(0.0) for _ in range(3)] == pytest.approx([0.0, 6.12, 12.24])  # a burst is spread out
    assert spacing.reserve(100.0) == 100.0  # after a quiet spell, at once
    assert spacing.reserve(101.0) == pytest.approx(106.12)
    starts = [spacing.reserve(200.0 + i * 0.5) for i in range(30)]
    assert max(sum(1 for s in starts if t <= s <= t + 60) for t in starts) == 10  # never more than 10 in any minute


def test_a_window_of_the_rate_keeps_room_for_requests_that_reach_the_endpoint_late() -> None:
    # 20 in any 10 s window, counted where the requests arrive: each arrives up to 0.1 s after its start (or not at
    # all late); the endpoint refuses a request that finds 20 arrived within the 10 s before it
    spacing = RateSpacing(2.0)
    lateness = itertools.cycle([0.1, 0.0, 0.05])
    arrivals = [spacing.reserve(0.0) + next(lateness) for _ in range(100)]
    assert max(sum(1 for a in arrivals[: i + 1] if a > t - 10.0) for i, t in enumerate(arrivals)) <= 20


def test_a_limiter_with_a_rate_starts_requests_no_faster_than_it() -> None:
    limiter = EndpointLimiter(8, rate=RateSpacing(20.0))  # one every 51 ms, 8 in flight allowed
    starts: list[float] = []

    async def one() -> None:
        async with limiter.slot() as ticket:
            starts.append(time.monotonic())
            ticket.done(0.0)

    async def main() -> None:
        await asyncio.gather(*(one() for _ in range(6)))

    begun = time.monotonic()
    asyncio.run(main())
    interval = limiter.rate.interval if limiter.rate is not None else 0.0
    # the i-th start is never before i intervals from the beginning (a busy machine wakes a request late, never early)
    assert all(start - begun >= i * interval - 0.001 for i, start in enumerate(sorted(starts))), [
        s - begun for s in starts
    ]
    assert math.isclose(limiter.stats().rate or 0.0, 20.0)


def test_requests_held_back_by_a_pause_start_spaced_by_the_rate_when_it_ends() -> None:
    limiter = EndpointLimiter(8, rate=RateSpacing(10.0))  # one every 100 ms
    starts: list[float] = []
    paused: list[float] = []

    async def one(first: bool) -> None:
        async with limiter.slot() as ticket:
            starts.append(time.monotonic())
            if first:  # a 429 with Retry-After 0.3 s while the others wait for their starts (0.1, 0.2, ... s)
                await asyncio.sleep(0.05)
                limiter.pause(0.3)
                paused.append(time.monotonic() + 0.3)
            ticket.done(0.0)

    async def main() -> None:
        await asyncio.gather(*(one(i == 0) for i in range(6)))

    asyncio.run(main())
    starts.sort()
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= 0.05, gaps  # not three at once when the pause ends
    assert all(s >= paused[0] - 0.001 for s in starts[1:]), (starts, paused)  # none during the pause
