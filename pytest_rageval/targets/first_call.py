"""A target's first call before all others, and a cap on its calls in flight.

The first case's call goes out alone: a target that builds its index lazily builds it once, not once per case
that starts at the same time, and a callable that cannot be called the way targets are called (the call cannot
bind ``(question, params)``) stops the session with one usage error instead of failing every case. What a
target returns or raises from inside its own code is that case's error, whichever case goes first. Every call
then waits for a place at the target's endpoint limiter (flow.EndpointLimiter: a fixed number in flight, or an
adaptive one that follows the target's latency and its 429/503 refusals; never more than
``rageval_target_concurrency``, for a target that is not thread-safe). A call given up at its timeout that still
runs (a sync target's thread, an async one that ignored its cancellation) keeps its place until it really ends:
the next call waits for a place, and errors once it has waited ``timeout`` while calls past their timeout hold
every place.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import Any

from pytest_rageval.flow import Limiter, SlotTicket

from .callable_client import HOW_TARGETS_ARE_CALLED
from .protocol import RagCallError, RagClient, RagReply

__all__ = ["GatedClient", "TargetMismatch", "is_mismatch"]


class TargetMismatch(Exception):
    """The target's first call showed it cannot be called as targets are; the message says how they are."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def is_mismatch(error: RagCallError) -> bool:
    """A failure that says the target cannot be called as targets are (the call could not bind (question, params));
    not what it returned or raised inside (None, a TypeError of its own code: that case's error, whatever case
    went first)."""
    return error.unbindable


class GatedClient:
    """``inner`` with its first call alone and its calls in flight held by ``limiter`` (inside the engine's loop).

    ``stop_on_mismatch``: a first call that shows a mismatch raises :class:`TargetMismatch` (a Python callable,
    whose signature and return value are the user's code; an HTTP service's odd answer stays that case's error).
    """

    def __init__(
        self, inner: RagClient, *, limiter: Limiter, name: str, stop_on_mismatch: bool, timeout: float | None = None
    ) -> None:
        self.inner = inner
        self.timeout = timeout  # how long a call waits for a place that calls past their timeout hold
        self.limiter = limiter
        # an HTTP client holds each attempt, retries included, to the limit itself (it hears every 429)
        self._per_attempt = hasattr(inner, "limiter")
        if self._per_attempt:
            inner.limiter = limiter  # type: ignore[attr-defined]
        self.name = name
        self.stop_on_mismatch = stop_on_mismatch
        self.first_latency_ms: float | None = None  # the first call's, when it answered (the terminal summary shows it)
        self._first: asyncio.Event | None = None
        self._mismatch: str | None = None
        self.abandoned = 0  # calls past their timeout that still run, each holding its place
        self._holders: set[asyncio.Task[None]] = set()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        if self._first is None:
            self._first = asyncio.Event()
            try:
                reply = await self._call(question, k=k, params=params)
            except RagCallError as exc:
                if not (self.stop_on_mismatch and is_mismatch(exc)):
                    raise
                self._mismatch = f"the first call of {self.name} (question {question[:80]!r}) could not be made: {exc.message}; {HOW_TARGETS_ARE_CALLED}"
                raise TargetMismatch(self._mismatch) from None
            finally:
                self._first.set()
            self.first_latency_ms = reply.latency_ms
            return reply
        await self._first.wait()
        if self._mismatch is not None:
            raise TargetMismatch(self._mismatch)
        return await self._call(question, k=k, params=params)

    async def _call(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        if self._per_attempt:
            return await self.inner.aask(question, k=k, params=params)
        hold, ticket = await self._place()
        try:
            reply = await self.inner.aask(question, k=k, params=params)
        except RagCallError as exc:
            if exc.kind == "timeout":
                ticket.timed_out()
            if exc.still_running is not None:  # the call goes on: its place stays taken until it ends
                self._hold_until(exc.still_running, hold)
                raise
            await hold.__aexit__(None, None, None)
            raise
        except BaseException:
            await hold.__aexit__(None, None, None)
            raise
        ticket.done(reply.latency_ms / 1000.0)
        await hold.__aexit__(None, None, None)
        return reply

    async def _place(self) -> tuple[AbstractAsyncContextManager[SlotTicket], SlotTicket]:
        """A place at the limiter, and its ticket; a ``timeout`` error once calls past their timeout have held
        every place for ``timeout`` while this call waited."""
        hold = self.limiter.slot()
        if self.timeout is None:
            return hold, await hold.__aenter__()
        entering = asyncio.ensure_future(hold.__aenter__())
        loop = asyncio.get_running_loop()
        blocked_since: float | None = None
        try:
            while not (await asyncio.wait({entering}, timeout=_LOOK))[0]:
                if self.abandoned < _places(self.limiter):
                    blocked_since = None
                    continue
                blocked_since = loop.time() if blocked_since is None else blocked_since
                if loop.time() - blocked_since >= self.timeout:
                    raise RagCallError("timeout", self._never_placed())
        except BaseException:
            if entering.done() and not entering.cancelled() and entering.exception() is None:
                await hold.__aexit__(None, None, None)  # granted just as the wait ended: give it back
            entering.cancel()
            raise
        return hold, entering.result()

    def _never_placed(self) -> str:
        held = f"{self.abandoned} earlier call{'s' if self.abandoned > 1 else ''} past {'their' if self.abandoned > 1 else 'its'} timeout"
        return (
            f"{self.name} was not called within {self.timeout:g} s: {held} still running held every place the "
            "target's concurrency allows"
        )

    def _hold_until(self, running: asyncio.Future[Any], hold: AbstractAsyncContextManager[SlotTicket]) -> None:
        """Keep ``hold``'s place until ``running`` ends (or the session's loop cancels the wait)."""
        self.abandoned += 1

        async def release() -> None:
            try:
                await asyncio.wait({running})
            finally:
                self.abandoned -= 1
                await hold.__aexit__(None, None, None)

        task = asyncio.get_running_loop().create_task(release())
        self._holders.add(task)
        task.add_done_callback(self._holders.discard)


#: How often a call waiting for a place looks whether calls past their timeout hold every place (seconds).
_LOOK = 0.1


def _places(limiter: Limiter) -> int:
    """How many calls ``limiter`` lets run at once now (a shared limiter: its process's own part)."""
    own = getattr(limiter, "local", limiter)
    cap = getattr(own, "cap", None)
    return cap if isinstance(cap, int) else 1
