"""One limit per endpoint across processes: the xdist controller's FlowServer and the workers' SharedLimiters,
over a real Unix socket; and whole runs against loopback endpoints that count or refuse what is in flight."""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk

from pytest_rageval.engine.flow_share import FlowAddress, FlowServer, SharedLimiter, SharedSpec, link_to
from pytest_rageval.flow import EndpointLimiter


class Counter:
    """Requests in flight now and at most, across threads."""

    def __init__(self) -> None:
        self.now = self.most = self.total = self.refused = 0
        self.lock = threading.Lock()

    def enter(self) -> int:
        with self.lock:
            self.now += 1
            self.total += 1
            self.most = max(self.most, self.now)
            return self.now

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


@pytest.fixture
def server() -> Any:
    with tempfile.TemporaryDirectory(prefix="rageval-t-") as folder:  # short: a socket path is bounded
        flow = FlowServer(Path(folder) / "flow.sock")
        flow.start()
        yield flow
        flow.stop()


def worker(
    address: FlowAddress,
    counter: Counter,
    requests: int,
    spec: SharedSpec,
    hold: float = 0.01,
    starts: list[float] | None = None,
) -> None:
    """One process's requests, in an event loop of its own, through its own connection to the server; ``starts``
    gets the time each request started."""
    limiter = SharedLimiter(link_to(address), "judge e", spec, EndpointLimiter(spec.ceiling))

    async def one() -> None:
        async with limiter.slot() as ticket:
            if starts is not None:
                starts.append(time.monotonic())
            counter.enter()
            await asyncio.sleep(hold)
            counter.leave()
            ticket.done(hold)

    async def main() -> None:
        await asyncio.gather(*(one() for _ in range(requests)))

    asyncio.run(main())


def test_workers_share_one_limit_per_endpoint(server: FlowServer) -> None:
    counter = Counter()
    spec = SharedSpec(ceiling=3, adaptive=False, start=3)
    threads = [
        threading.Thread(target=worker, args=(FlowAddress(server.path, server.key), counter, 20, spec))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert counter.total == 60 and counter.most == 3  # three workers of 3 each would reach 9
    [(name, stats)] = server.stats()
    assert name == "judge e" and stats.requests == 60 and stats.peak == 3 and not stats.adaptive


def test_a_worker_that_dies_holding_places_frees_them(server: FlowServer) -> None:
    spec = SharedSpec(ceiling=2, adaptive=False, start=2)

    async def hold_and_vanish() -> None:
        link = link_to(FlowAddress(server.path, server.key))
        for _ in range(2):
            assert await link.acquire("judge e", spec) is not None
        assert link._writer is not None
        link._writer.close()  # the worker dies with both places held

    asyncio.run(hold_and_vanish())
    counter = Counter()
    done = threading.Thread(target=worker, args=(FlowAddress(server.path, server.key), counter, 4, spec))
    done.start()
    done.join(10)
    assert counter.total == 4 and counter.most == 2


def test_a_worker_that_cannot_reach_the_server_limits_itself(tmp_path: Path) -> None:
    counter = Counter()
    worker(FlowAddress(tmp_path / "missing.sock", "k"), counter, 6, SharedSpec(ceiling=2, adaptive=False, start=2))
    assert counter.total == 6 and counter.most == 2  # its own limiter


# --------------------------------------------------------------------------- whole runs


def _project(pytester: pytest.Pytester, cases: int, ini: str = "") -> None:
    lines = [{"id": f"c{i}", "question": f"q{i}", "gold_supports": [{"rel_path": "docs/a.md"}]} for i in range(cases)]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in lines) + "\n"})
    pytester.makeini(f"[pytest]\n{ini}")


def _responder(counter: Counter, *, refuse_at: int | None = None, hold: float = 0.03) -> Any:
    gold = chunk("docs/a.md", "# A", 1, text="A fact.")

    def respond(body: dict[str, Any]) -> Any:
        now = counter.enter()
        try:
            if refuse_at is not None and now > refuse_at:
                with counter.lock:
                    counter.refused += 1
                return (429, {"error": "too many in flight"})
            time.sleep(hold)
            return answer("A fact [1].", [gold])
        finally:
            counter.leave()

    return respond


def test_under_xdist_the_workers_share_the_target_limit(pytester: pytest.Pytester) -> None:
    """Adaptive (no --rageval-concurrency) with rageval_max_concurrency = 3: two workers send no more than 3 at once."""
    _project(pytester, 40, "rageval_max_concurrency = 3\n")
    counter = Counter()
    with AskServer(_responder(counter)) as rag:
        result = pytester.runpytest_subprocess(
            "--rageval", f"--rageval-target={rag.url}", "--rageval-judge=none", "-n", "2", "-p", "no:cacheprovider"
        )
    result.assert_outcomes(passed=40)
    assert counter.total == 40 and counter.most <= 3, counter.most
    result.stdout.fnmatch_lines(
        [f"target {rag.url}*: adaptive limit settled at * (most at once: *); 40 requests, none refused"]
    )


def test_an_endpoint_that_refuses_above_three_in_flight_refuses_few(pytester: pytest.Pytester) -> None:
    _project(pytester, 200)
    counter = Counter()
    with AskServer(_responder(counter, refuse_at=3, hold=0.01)) as rag:
        result = pytester.runpytest_subprocess(
            "--rageval", f"--rageval-target={rag.url}", "--rageval-judge=none", "-p", "no:cacheprovider"
        )
    result.assert_outcomes(passed=200)
    refused = counter.refused
    # the first burst (8 at the start against room for 3) is refused in part, and retries of it; then fewer than 5%
    assert 0 < refused <= 10 + 0.05 * counter.total, (refused, counter.total)
    result.stdout.fnmatch_lines(
        [
            f"target {rag.url}*: adaptive limit settled at * (most at once: *); {counter.total} requests, {refused} refused (429/503)"
        ]
    )


def test_a_fixed_concurrency_is_each_workers_own(pytester: pytest.Pytester) -> None:
    _project(pytester, 8)
    counter = Counter()
    with AskServer(_responder(counter)) as rag:
        result = pytester.runpytest_subprocess(
            "--rageval",
            f"--rageval-target={rag.url}",
            "--rageval-judge=none",
            "--rageval-concurrency=2",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
        )
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines([f"target {rag.url}*: limit 2 (most at once: 2); 8 requests, none refused"])


@pytest.mark.parametrize("shared_limit", [True, False])
def test_workers_share_one_rate_whether_or_not_they_share_the_limit(server: FlowServer, shared_limit: bool) -> None:
    starts: list[float] = []
    counter = Counter()
    spec = SharedSpec(ceiling=2, adaptive=False, start=2, per_second=40.0, shared=shared_limit)  # one every 25 ms
    threads = [
        threading.Thread(target=worker, args=(FlowAddress(server.path, server.key), counter, 4, spec, 0.3, starts))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert counter.total == 12
    # every start is its own 25 ms apart from the first, across the three workers: 11 gaps (one of slack for a late
    # delivery); three workers each with its own rate would take about 3 gaps
    assert max(starts) - min(starts) >= 10 * 0.025, sorted(starts)
    if shared_limit:
        assert counter.most == 2
    else:
        assert counter.most >= 3  # each worker's own 2: the 300 ms holds overlap
    [(_, stats)] = server.stats()
    assert stats.requests == 12 and stats.rate == 40.0


def test_under_xdist_a_target_rate_is_one_budget_for_the_workers(pytester: pytest.Pytester) -> None:
    _project(pytester, 20, "rageval_target_rate = 20/s\n")
    counter = Counter()
    arrivals: list[float] = []
    respond = _responder(counter, hold=0.0)

    def timed(body: dict[str, Any]) -> Any:
        with counter.lock:
            arrivals.append(time.monotonic())
        return respond(body)

    with AskServer(timed) as rag:
        result = pytester.runpytest_subprocess(
            "--rageval",
            f"--rageval-target={rag.url}",
            "--rageval-judge=none",
            "--rageval-concurrency=4",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
        )
    result.assert_outcomes(passed=20)
    # 20 calls at 20 a second are 19 gaps of 50 ms (two of slack: a worker's first call also opens its connection);
    # each worker on its own rate would need about 9
    assert max(arrivals) - min(arrivals) >= 17 * 0.05, sorted(b - arrivals[0] for b in arrivals)
    result.stdout.fnmatch_lines(
        [f"target {rag.url}*: limit 4 (most at once: *), at most 20/s; 20 requests, none refused"]
    )


def test_a_rate_that_cannot_be_read_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _project(pytester, 1, "rageval_judge_rate = ten a minute\n")
    result = pytester.runpytest_subprocess("--rageval", "--rageval-judge=none", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*rageval_judge_rate: expected a rate like 10/min, 2/s or 500/h, got 'ten a minute'*"])
