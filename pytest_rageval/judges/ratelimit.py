"""Flow control of judge requests to one endpoint.

``EndpointLimiter``: bounded requests in flight (no more than the endpoint can
answer within the timeout), granted in case order, and a 429 pauses them all
together. ``Probe``: the first request of a judge runs alone
until its answer has decided the response format, so that a server which
refuses json_schema refuses exactly one request, not one per case in flight.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

#: The collection index of the case whose work runs in this context (set where cases are started);
#: -1 outside a case (a hand-written test, the calibration check, ``rageval judge``), served first.
CASE_ORDER: ContextVar[int] = ContextVar("rageval_case_order", default=-1)


class EndpointLimiter:
    """Shared by every request to one endpoint in this process.

    At most ``cap`` requests run at once (calls, not cases, are limited). A free
    slot goes to the waiting request of the earliest case (``CASE_ORDER``), ties
    in arrival order, so against a slow server cases finish one after another
    instead of all together at the end. ``pause(seconds)`` (on a 429, honouring
    Retry-After) holds back every request until then instead of each retrying
    on its own.

    ``cap`` starts at ``max_in_flight`` and follows the endpoint's service time:
    a request that had the endpoint to itself (nothing else in flight from its
    start to its end, like the format probe) measures it, and ``cap`` becomes
    what the endpoint could finish one after another within half of
    ``timeout`` (the slowest of the last few such requests counts). A fast API
    keeps ``max_in_flight``; a local server that takes 20 s a request gets one
    request at a time instead of a queue whose tail times out.
    """

    SAMPLES = 8  # service times remembered

    def __init__(self, max_in_flight: int = 8, *, timeout: float | None = None) -> None:
        self.max_in_flight = max(1, max_in_flight)
        self.timeout = timeout
        self.cap = self.max_in_flight
        self._service: list[float] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy = 0
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()
        self._granted = 0  # slots granted so far: a request is alone if none was granted during it
        self._resume_at = 0.0

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot now."""
        return sum(1 for _, _, future in self._waiting if not future.done())

    def pause(self, seconds: float) -> None:
        """Hold every request back for ``seconds`` from now (the longest pause wins)."""
        self._resume_at = max(self._resume_at, time.monotonic() + max(0.0, seconds))

    @asynccontextmanager
    async def slot(self, order: int | None = None) -> AsyncIterator[Ticket]:
        """Wait for a slot (earliest case first) and for any pause to end, then hold the slot."""
        await self._acquire(CASE_ORDER.get() if order is None else order)
        ticket = Ticket(self, alone=self._busy == 1, granted=self._granted)
        try:
            while (wait := self._resume_at - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            yield ticket
        finally:
            self._busy -= 1
            self._grant()

    def report(self, seconds: float, *, alone: bool, granted_at: int) -> None:
        """A request was answered in ``seconds``; if it had the endpoint to itself (alone when it started,
        no slot granted since), that is the service time: refit ``cap``."""
        if not alone or self._granted != granted_at:
            return
        self._service = [*self._service[-(self.SAMPLES - 1) :], seconds]
        if self.timeout:
            slowest = max(self._service)
            self.cap = max(1, min(self.max_in_flight, int(self.timeout / 2 / slowest) if slowest > 0 else self.max_in_flight))
            self._grant()

    async def _acquire(self, order: int) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop: slots held on the old one are gone with it
            self._loop, self._busy, self._waiting = loop, 0, []
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
    """A held slot: ``done(seconds)`` reports the request's time, which counts if it ran alone."""

    def __init__(self, limiter: EndpointLimiter, *, alone: bool, granted: int) -> None:
        self._limiter = limiter
        self._alone = alone
        self._granted = granted

    def done(self, seconds: float) -> None:
        """The request was answered in ``seconds``."""
        self._limiter.report(seconds, alone=self._alone, granted_at=self._granted)


class Probe:
    """Runs the first request alone; the others wait until it has decided the response format."""

    def __init__(self) -> None:
        self.decided = False
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self, send: Callable[[], Awaitable[T]]) -> T:
        """``await send()``: alone while the format is undecided (that call decides it), else at once."""
        if not self.decided:
            loop = asyncio.get_running_loop()
            if self._lock is None or self._loop is not loop:
                self._lock, self._loop = asyncio.Lock(), loop
            async with self._lock:
                if not self.decided:
                    try:
                        return await send()
                    finally:  # answered, failed for another reason or cancelled: the others go on
                        self.decided = True
        return await send()
