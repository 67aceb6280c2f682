"""A sync target's calls, each on its own daemon thread; a call past its timeout is abandoned.

``asyncio.to_thread`` runs calls on the loop's default executor, whose threads
the interpreter joins at exit: a target that slept past ``rageval_timeout``
errored at the timeout but kept pytest alive until it returned. A daemon
thread that nothing joins lets the process end with the session.

Abandoned calls keep their thread until they return, so they are bounded: at
most ``limit`` of them may still run at once; a new call waits (within its own
timeout) for one of them to return before it starts. :class:`Abandoned` carries
a future that is done when the abandoned call really ends (first_call.py keeps
the call's place at the target's limit until then). :func:`within` gives an
awaitable call the same rule: it is cancelled at its timeout and never awaited
past it, also when it ignores the cancellation.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["Abandoned", "DaemonCalls", "NotStarted", "within"]

#: How often a call waiting for an abandoned call to return looks again (seconds).
_POLL = 0.05
#: Seconds a cancelled awaitable call is given to end before it counts as still running.
_GRACE = 0.1


class Abandoned(Exception):
    """The call did not return within its timeout; it is left running.

    ``ended`` is done once the call really ends (None: it ended on its cancellation already).
    """

    def __init__(self, ended: asyncio.Future[Any] | None = None) -> None:
        super().__init__()
        self.ended = ended


class NotStarted(Exception):
    """The call never started: ``running`` abandoned calls (the limit) held every slot until its timeout."""

    def __init__(self, running: int) -> None:
        super().__init__(running)
        self.running = running


class _Call:
    __slots__ = ("abandoned", "ended", "finished")

    def __init__(self, ended: asyncio.Future[None]) -> None:
        self.finished = False
        self.abandoned = False
        self.ended = ended  # done when the thread returns, abandoned or not


class DaemonCalls:
    """Run ``fn(*args)`` on daemon threads for an event loop; at most ``limit`` abandoned calls at once."""

    def __init__(self, limit: int = 8) -> None:
        self.limit = max(1, int(limit))
        self._lock = threading.Lock()
        self._abandoned = 0

    @property
    def abandoned(self) -> int:
        """Calls past their timeout whose threads have not returned yet."""
        with self._lock:
            return self._abandoned

    async def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """``fn(*args)`` on a new daemon thread; what it raises (any BaseException) is raised here.

        Raises :class:`Abandoned` when it runs past ``timeout`` seconds and
        :class:`NotStarted` when the abandoned calls held every slot that long.
        A cancelled wait abandons the call as well.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self.abandoned >= self.limit:
            if deadline is not None and loop.time() >= deadline:
                raise NotStarted(self.abandoned)
            await asyncio.sleep(_POLL)
        done: asyncio.Future[tuple[Any, BaseException | None]] = loop.create_future()
        call = _Call(loop.create_future())
        context = contextvars.copy_context()

        def run() -> None:
            try:
                outcome: tuple[Any, BaseException | None] = (context.run(fn, *args), None)
            except BaseException as exc:
                outcome = (None, exc)
            waited = self._finish(call)
            try:
                loop.call_soon_threadsafe(_end, call.ended)
                if waited:  # abandoned: nobody waits for its outcome
                    loop.call_soon_threadsafe(_settle, done, outcome)
            except RuntimeError:  # the loop closed meanwhile
                pass

        threading.Thread(target=run, name="rageval-target-call", daemon=True).start()
        try:
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            finished, _ = await asyncio.wait({done}, timeout=remaining)
        except asyncio.CancelledError:
            self._abandon(call)
            raise
        if not finished and self._abandon(call):
            raise Abandoned(call.ended)
        value, exc = await done  # finished, or returned just as it was given up: its result is on the way
        if exc is not None:
            raise exc
        return value

    def _finish(self, call: _Call) -> bool:
        """The thread returned: True when its caller still waits, else it frees its abandoned slot."""
        with self._lock:
            if call.abandoned:
                self._abandoned -= 1
                return False
            call.finished = True
            return True

    def _abandon(self, call: _Call) -> bool:
        """Give up waiting for ``call``: True unless it had just finished."""
        with self._lock:
            if call.finished:
                return False
            call.abandoned = True
            self._abandoned += 1
            return True


def _end(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _settle(future: asyncio.Future[Any], outcome: tuple[Any, BaseException | None]) -> None:
    if not future.done():
        future.set_result(outcome)


async def within(call: Awaitable[T], timeout: float | None) -> T:
    """``call``'s result, awaited at most ``timeout`` seconds (None: no limit).

    Past it the call is cancelled and given a moment to end; :class:`Abandoned` is raised either way, with
    ``ended`` set when the call has not ended yet (it swallowed the cancellation): nothing waits for it.
    """
    task = asyncio.ensure_future(call)
    try:
        finished, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if finished:
        return task.result()
    task.cancel()
    task.add_done_callback(_consume)
    await asyncio.wait({task}, timeout=_GRACE)
    raise Abandoned(None if task.done() else task)


def _consume(task: asyncio.Future[Any]) -> None:
    """Read an abandoned call's outcome, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()
