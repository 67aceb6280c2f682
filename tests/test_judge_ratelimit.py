"""The judge endpoint limiter: calls in flight are bounded, and a 429 pauses every request together."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from openai_server import OpenAIServer, error, ok

from pytest_rageval.judges.base import JudgeInput
from pytest_rageval.judges.openai_judge import OpenAIJudge

VERDICT = json.dumps({"reasoning": "ok", "score": 4, "supported_claims": [], "unsupported_claims": []})


def test_a_429_pauses_every_request_to_the_endpoint() -> None:
    arrivals: list[tuple[float, int]] = []
    lock = threading.Lock()

    def respond(body: dict, headers: dict) -> Any:
        with lock:
            first = not arrivals
            arrivals.append((time.monotonic(), 429 if first else 200))
        if first:
            return error(429, "slow down", type_="rate_limit_error", headers={"Retry-After": "1"})
        time.sleep(0.3)  # the request beside the first holds its slot until the 429 has surely been seen
        return ok(VERDICT)

    async def main(base_url: str) -> list:
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

    def __call__(self, body: dict, headers: dict) -> Any:
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
    from pytest_rageval.judges.factory import build_judge
    from pytest_rageval.settings import Settings

    in_flight = InFlight()
    with OpenAIServer(in_flight) as server:
        settings = Settings(rootdir=tmp_path, judge="openai", judge_model="m", judge_base_url=server.base_url,
                            concurrency=2, no_cache=True)
        primary = build_judge(settings, {"RAGEVAL_JUDGE_API_KEY": "k"})
        spot = build_judge(settings, {"RAGEVAL_JUDGE_API_KEY": "k"}, model="m2", share_endpoint_with=primary)
        assert primary is not None and spot is not None

        async def main() -> None:
            calls = [setup.judge.judge("groundedness", JudgeInput(f"q{i}", "a", ("c",)))
                     for i in range(4) for setup in (primary, spot)]
            try:
                await asyncio.gather(*calls)
            finally:
                await primary.judge.aclose()
                await spot.judge.aclose()

        asyncio.run(main())
        models = sorted(r["body"]["model"] for r in server.requests)
    assert models == ["m"] * 4 + ["m2"] * 4
    assert in_flight.max == 2  # one cap for the endpoint, not one per model
