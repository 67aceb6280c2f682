"""Flow control of the requests to one endpoint (the RAG target, a judge): how many may be in flight at once.

``Aimd``: the adaptive limit, additive increase and multiplicative decrease. It rises while answers come back
with flat latency and no refusal (one more per answer until the first sign of overload, then about one more per
round of ``limit`` answers, and more slowly still near the level that was refused last), and falls by half on a
refusal (429, 503) or a timeout, and by a tenth when latency climbs well above the best seen. Only one decrease
per round: answers to requests sent before the last decrease say nothing about the new limit.

``EndpointLimiter``: holds a process's requests to one endpoint to that limit (or a fixed one), serves the
earliest case first (``CASE_ORDER``), pauses every request together on a ``Retry-After``, and bounds the limit by
what the endpoint can answer within the timeout, and (with a ``RateSpacing``) starts requests no faster than the
endpoint's rate allows. Its tickets report each request's outcome back.

Pure asyncio, no I/O: how a limit is shared between processes is the plugin's business (a limiter accepts any
``Aimd``-like object that it can call the same way).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "CASE_ORDER",
    "Aimd",
    "EndpointLimiter",
    "FlowStats",
    "Limiter",
    "RateSpacing",
    "SlotTicket",
    "Ticket",
    "format_rate",
    "parse_rate",
]

#: The collection index of the case whose work runs in this context (set where cases are started);
#: -1 outside a case (a hand-written test, the calibration check, ``rageval judge``), served first.
CASE_ORDER: ContextVar[int] = ContextVar("rageval_case_order", default=-1)


@dataclass(frozen=True)
class FlowStats:
    """What one endpoint's limit did over a run: where it ended, the most requests in flight at once, the requests
    sent and those the endpoint refused (429, 503) or left unanswered."""

    limit: int
    peak: int
    refused: int
    timeouts: int
    requests: int
    adaptive: bool
    rate: float | None = None  # requests a second at most, when the endpoint has a rate


class SlotTicket(Protocol):
    """A held slot, through which a request reports how it went."""

    def done(self, seconds: float) -> None: ...

    def refused(self) -> None: ...

    def timed_out(self) -> None: ...


class Limiter(Protocol):
    """What a client needs of its endpoint's limiter (:class:`EndpointLimiter`, or one shared between processes)."""

    def slot(self, order: int | None = None) -> AbstractAsyncContextManager[SlotTicket]: ...

    def pause(self, seconds: float) -> None: ...

    def stats(self) -> FlowStats: ...


#: Units of a rate, in seconds.
_RATE_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hour": 3600.0}


def parse_rate(text: str) -> float:
    """Requests a second of a rate written ``N/s``, ``N/min`` or ``N/h`` (``10/min``: 1/6); ValueError otherwise."""
    count, slash, unit = text.strip().partition("/")
    seconds = _RATE_UNITS.get(unit.strip().lower())
    try:
        number = float(count)
    except ValueError:
        number = math.nan
    if not slash or seconds is None or not math.isfinite(number) or number <= 0:
        raise ValueError(f"expected a rate like 10/min, 2/s or 500/h, got {text!r}")
    return number / seconds


def format_rate(per_second: float) -> str:
    """A rate as people write it: ``10/min`` for 1/6 a second, ``2/s``, ``500/h``."""
    for unit, seconds in (("s", 1.0), ("min", 60.0), ("h", 3600.0)):
        count = per_second * seconds
        if count >= 1 - 1e-9:
            return f"{count:.3g}/{unit}"
    return f"{per_second * 3600:.3g}/h"


class RateSpacing:
    """Requests started no faster than ``per_second``, evenly spaced: each start is ``1 / per_second`` plus
    ``MARGIN`` of it after the one before (a judge that allows 10 a minute gets one every 6.12 s, so never more
    than 10 in any minute). Pure arithmetic on the times it is given.

    The margin is for the way from a start to the endpoint: a request reaches it a little later or earlier than
    it started (a new connection, a busy event loop, a worker's socket), and with starts exactly ``1 / per_second``
    apart, an endpoint that counts the requests of a sliding window sees one more than it allows whenever a request
    arrives later than the one a whole window after it. 2% of a window absorbs that (0.2 s of a 10 s window).
    """

    MARGIN = 0.02

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self.interval = (1.0 + self.MARGIN) / per_second
        self._next = -math.inf

    @property
    def next_start(self) -> float:
        """The earliest time the next request may start."""
        return self._next

    def reserve(self, now: float) -> float:
        """The start reserved for a request that could start at ``now``: now, or the next free start."""
        start = max(now, self._next)
        self._next = start + self.interval
        return start


class Aimd:
    """An adaptive concurrency limit between 1 and ``ceiling``, starting at ``start``.

    ``epoch()`` is taken when a request is sent and handed back with its outcome: an outcome of a request sent
    before the last decrease never decreases the limit again (one decrease per round of requests).
    """

    #: how much the limit falls on a refusal or timeout, and on latency climbing past ``HIGH_LATENCY`` x the best
    BACK_OFF = 0.5
    EASE_OFF = 0.9
    #: latency (smoothed) past these multiples of the best smoothed latency: hold the limit; ease it off
    FLAT_LATENCY = 2.0
    HIGH_LATENCY = 4.0
    #: near the level last refused, the limit rises this many times more slowly
    CAUTION = 16.0
    SMOOTHING = 0.3

    def __init__(self, start: int, ceiling: int) -> None:
        self.ceiling = max(1, ceiling)
        self.limit = float(min(max(1, start), self.ceiling))
        self._slow_start = True
        self._refused_at: float | None = None  # the limit when the last refusal came
        self._epoch = 0
        self._latency: float | None = None  # smoothed
        self._best: float | None = None  # the lowest smoothed latency seen

    @property
    def allowed(self) -> int:
        """Requests that may be in flight now."""
        return max(1, math.floor(self.limit))

    def epoch(self) -> int:
        """The round a request is sent in (hand it back with the outcome)."""
        return self._epoch

    def answered(self, seconds: float, epoch: int) -> None:
        """A request sent in round ``epoch`` was answered after ``seconds``."""
        self._latency = seconds if self._latency is None else self._latency + self.SMOOTHING * (seconds - self._latency)
        self._best = self._latency if self._best is None else min(self._best, self._latency)
        if self._best > 0 and self._latency > self.HIGH_LATENCY * self._best:
            self._decrease(self.EASE_OFF, epoch)
            return
        if self._best > 0 and self._latency > self.FLAT_LATENCY * self._best:
            return  # queueing at the endpoint: hold
        if self._slow_start:
            step = 1.0
        else:
            step = 1.0 / self.limit
            if self._refused_at is not None and self.limit + 1 > self._refused_at:
                step /= self.CAUTION
        self.limit = min(float(self.ceiling), self.limit + step)

    def refused_now(self, epoch: int) -> None:
        """The endpoint refused a request sent in round ``epoch`` (429, 503): too much in flight."""
        if epoch == self._epoch:
            self._refused_at = self.limit
        self._decrease(self.BACK_OFF, epoch)

    def timed_out(self, epoch: int) -> None:
        """A request sent in round ``epoch`` got no answer in time."""
        self._decrease(self.BACK_OFF, epoch)

    def _decrease(self, factor: float, epoch: int) -> None:
        self._slow_start = False
        if epoch != self._epoch:
            return
        self.limit = max(1.0, self.limit * factor)
        self._epoch += 1


class EndpointLimiter:
    """Shared by every request to one endpoint in this process.

    At most ``cap`` requests run at once (calls, not cases, are limited). A free slot goes to the waiting request
    of the earliest case (``CASE_ORDER``), ties in arrival order, so against a slow server cases finish one after
    another instead of all together at the end. ``pause(seconds)`` (on a 429, honouring Retry-After) holds back
    every request until then instead of each retrying on its own.

    ``cap`` is the adaptive limit of ``aimd`` when there is one, else ``max_in_flight``; either way no more than
    the endpoint's service time allows: a request that had the endpoint to itself (nothing else in flight from
    its start to its end, like a judge's format probe) measures it, and ``cap`` is at most what the endpoint could
    finish one after another within half of ``timeout`` (the slowest of the last few such requests counts). A fast
    API keeps its limit; a local server that takes 20 s a request gets one request at a time instead of a queue
    whose tail times out.
    """

    SAMPLES = 8  # service times remembered

    def __init__(
        self,
        max_in_flight: int = 8,
        *,
        timeout: float | None = None,
        aimd: Aimd | None = None,
        rate: RateSpacing | None = None,
    ) -> None:
        self.max_in_flight = max(1, max_in_flight)
        self.timeout = timeout
        self.aimd = aimd
        self.rate = rate
        self._service_cap: int | None = None
        self._service: list[float] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy = 0  # slots held (a request waiting out a pause or the rate holds its slot)
        self._sending = 0  # requests past every wait: in flight at the endpoint
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()
        self._granted = 0  # slots granted so far: a request is alone if none was granted during it
        self._resume_at = 0.0
        self._requests = 0
        self._refused = 0
        self._timeouts = 0
        self._peak = 0  # the most requests in flight at once

    @property
    def cap(self) -> int:
        """Requests that may be in flight now."""
        limit = self.aimd.allowed if self.aimd is not None else self.max_in_flight
        return limit if self._service_cap is None else min(limit, self._service_cap)

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot now."""
        return sum(1 for _, _, future in self._waiting if not future.done())

    def stats(self) -> FlowStats:
        """The limit now, the most requests in flight at once, and what the endpoint refused."""
        rate = self.rate.per_second if self.rate is not None else None
        return FlowStats(
            self.cap,
            self._peak,
            self._refused,
            self._timeouts,
            self._requests,
            adaptive=self.aimd is not None,
            rate=rate,
        )

    def pause(self, seconds: float) -> None:
        """Hold every request back for ``seconds`` from now (the longest pause wins)."""
        self._resume_at = max(self._resume_at, time.monotonic() + max(0.0, seconds))

    @asynccontextmanager
    async def slot(self, order: int | None = None) -> AsyncIterator[Ticket]:
        """Wait for a slot (earliest case first), for any pause to end and for the rate's next start, then hold
        the slot."""
        await self._acquire(CASE_ORDER.get() if order is None else order)
        sending = False
        try:
            await self._until_resumed()
            # A Retry-After that comes while a request waits for its start: wait it out, then take a new start, so
            # the requests held back by the pause do not all start together when it ends.
            while self.rate is not None and (wait := self.rate.reserve(time.monotonic()) - time.monotonic()) > 0:
                await asyncio.sleep(wait)
                if self._resume_at <= time.monotonic():
                    break
                await self._until_resumed()
            self._requests += 1
            self._sending += 1
            sending = True
            self._peak = max(self._peak, self._sending)
            yield Ticket(
                self, alone=self._sending == 1, granted=self._granted, epoch=self.aimd.epoch() if self.aimd else 0
            )
        finally:
            if sending:
                self._sending -= 1
            self._busy -= 1
            self._grant()

    async def _until_resumed(self) -> None:
        while (wait := self._resume_at - time.monotonic()) > 0:
            await asyncio.sleep(wait)

    def report(self, seconds: float, *, alone: bool, granted_at: int) -> None:
        """A request was answered in ``seconds``; if it had the endpoint to itself (alone when it started,
        no slot granted since), that is the service time: refit the bound on ``cap``."""
        if not alone or self._granted != granted_at:
            return
        self._service = [*self._service[-(self.SAMPLES - 1) :], seconds]
        if self.timeout:
            slowest = max(self._service)
            self._service_cap = max(1, int(self.timeout / 2 / slowest)) if slowest > 0 else None
            self._grant()

    async def _acquire(self, order: int) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop: slots held on the old one are gone with it
            self._loop, self._busy, self._sending, self._waiting = loop, 0, 0, []
        if self._busy < self.cap:  # a live waiter exists only while every slot is busy
            self._take()
            return
        granted: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._waiting, (order, next(self._arrivals), granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():  # handed a slot just as it was cancelled
                self._busy -= 1
                self._grant()
            raise

    def _take(self) -> None:
        self._busy += 1
        self._granted += 1

    def _grant(self) -> None:
        """Hand free slots to the earliest live waiters."""
        while self._busy < self.cap and self._waiting:
            _, _, granted = heapq.heappop(self._waiting)
            if not granted.done():
                self._take()
                granted.set_result(None)


class Ticket:
    """A held slot: report the request's outcome (answered, refused, timed out) through it."""

    def __init__(self, limiter: EndpointLimiter, *, alone: bool, granted: int, epoch: int = 0) -> None:
        self._limiter = limiter
        self._alone = alone
        self._granted = granted
        self._epoch = epoch

    def done(self, seconds: float) -> None:
        """The request was answered in ``seconds``."""
        self._limiter.report(seconds, alone=self._alone, granted_at=self._granted)
        if self._limiter.aimd is not None:
            self._limiter.aimd.answered(seconds, self._epoch)
            self._limiter._grant()  # a higher limit frees slots now

    def refused(self) -> None:
        """The endpoint refused the request for load (429, 503)."""
        self._limiter._refused += 1
        if self._limiter.aimd is not None:
            self._limiter.aimd.refused_now(self._epoch)

    def timed_out(self) -> None:
        """The request got no answer within the timeout."""
        self._limiter._timeouts += 1
        if self._limiter.aimd is not None:
            self._limiter.aimd.timed_out(self._epoch)
