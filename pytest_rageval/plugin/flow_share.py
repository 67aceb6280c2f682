"""One limit per endpoint across the pytest-xdist workers of a session.

The xdist controller runs a :class:`FlowServer`: a Unix socket in the session's temp folder, served by an asyncio
loop in a thread of its own (no server to install). It holds, per endpoint, the requests in flight of every worker
and the adaptive limit (flow.Aimd) they share; a worker's :class:`SharedLimiter` asks it for each request's place
and tells it how the request went, so ``-n 4`` sends no more to an endpoint than one process would, one 429 or
Retry-After holds back every worker, and an endpoint's rate (``rageval_judge_rate``) is one budget for all of
them: the server spaces the grants. A worker that dies closes its connection: the places it held are freed.

The protocol is one JSON object per line. Worker to server: ``acquire`` (endpoint, request id, the limit's
settings: ``ceiling``, ``adaptive``, ``start``, ``rate``, ``shared``), ``release`` (endpoint, result, seconds,
round), ``cancel`` (request id), ``pause`` (endpoint, seconds). Server to worker: ``{"id": ..., "epoch": ...}``
when a place is granted (at the rate's next start), ``{"id": ..., "cancelled": true}`` when a cancelled request
had none yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rageval.flow import Aimd, EndpointLimiter, FlowStats, RateSpacing, SlotTicket

__all__ = ["FlowServer", "SharedLimiter", "SharedSpec"]

log = logging.getLogger("pytest_rageval")


@dataclass(frozen=True)
class SharedSpec:
    """How the shared limit of one endpoint is set: adaptive from ``start`` up to ``ceiling``, or fixed at ``ceiling``;
    ``per_second``: the endpoint's rate (None: none); ``shared``: False when only the rate is shared (a fixed
    ``--rageval-concurrency N`` is each worker's own)."""

    ceiling: int
    adaptive: bool
    start: int
    per_second: float | None = None
    shared: bool = True


# --------------------------------------------------------------------------- the server (xdist controller)


@dataclass(eq=False)
class _Conn:
    writer: asyncio.StreamWriter
    held: dict[str, int] = field(default_factory=dict)  # endpoint -> places this worker holds
    closed: bool = False

    def send(self, message: dict[str, Any]) -> None:
        if not self.closed:
            self.writer.write(json.dumps(message).encode() + b"\n")


class _Endpoint:
    """One endpoint's places in flight across every worker, and its shared limit."""

    def __init__(self, spec: SharedSpec) -> None:
        self.ceiling = max(1, spec.ceiling)
        self.aimd = Aimd(spec.start, self.ceiling) if spec.adaptive else None
        self.rate = RateSpacing(spec.per_second) if spec.per_second else None
        self.shared = spec.shared  # False: only the rate is shared, each worker keeps its own limit
        self.busy = 0
        self.waiting: deque[tuple[_Conn, int]] = deque()
        self.resume_at = 0.0
        self.wakeup: asyncio.TimerHandle | None = None  # the grant due when a pause or the rate's wait ends
        self.requests = self.refused = self.timeouts = self.peak = 0

    @property
    def limit(self) -> int:
        return self.aimd.allowed if self.aimd is not None else self.ceiling

    @property
    def full(self) -> bool:
        """Whether every place the workers share is taken."""
        return self.shared and self.busy >= self.limit

    def stats(self) -> FlowStats:
        rate = self.rate.per_second if self.rate is not None else None
        return FlowStats(self.limit, self.peak, self.refused, self.timeouts, self.requests, adaptive=self.aimd is not None, rate=rate)


class FlowServer:
    """The shared limits of a session's endpoints, served on a Unix socket at ``path`` (the xdist controller)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._endpoints: dict[str, _Endpoint] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rageval-flow", daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def start(self) -> None:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(asyncio.start_unix_server(self._serve, path=str(self.path)), self._loop)
        self._server = future.result(timeout=10)

    def stop(self) -> None:
        """Close the socket and end the loop's thread (idempotent)."""
        if not self._thread.is_alive():
            self._loop.close()
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:  # the connections still open
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()
        with contextlib.suppress(OSError):
            self.path.unlink()

    def stats(self) -> list[tuple[str, FlowStats]]:
        """Each endpoint's limit now, the most in flight at once, the requests and those refused, by name."""
        return sorted((name, endpoint.stats()) for name, endpoint in list(self._endpoints.items()))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writer)
        try:
            while line := await reader.readline():
                try:
                    self._handle(conn, json.loads(line))
                except (ValueError, KeyError, TypeError):
                    log.warning("rageval: the shared limit ignored a message it cannot read: %.200r", line)
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            conn.closed = True
            for name, held in conn.held.items():  # a worker gone: its places are free again
                endpoint = self._endpoints[name]
                endpoint.busy -= held
                endpoint.waiting = deque(w for w in endpoint.waiting if w[0] is not conn)
                self._grant(name)
            writer.close()

    def _handle(self, conn: _Conn, message: dict[str, Any]) -> None:
        op, name = message["op"], str(message.get("ep", ""))
        if op == "acquire":
            rate = float(message["rate"]) if message.get("rate") else None
            spec = SharedSpec(int(message["ceiling"]), bool(message["adaptive"]), int(message["start"]), rate, bool(message.get("shared", True)))
            self._endpoints.setdefault(name, _Endpoint(spec)).waiting.append((conn, int(message["id"])))
        elif op == "cancel":  # a request given up while waiting; if its place was granted already, a release follows
            endpoint = self._endpoints[name]
            kept = deque(w for w in endpoint.waiting if not (w[0] is conn and w[1] == message["id"]))
            if len(kept) < len(endpoint.waiting):
                endpoint.waiting = kept
                conn.send({"id": message["id"], "cancelled": True})
            return
        elif op == "release":
            endpoint = self._endpoints[name]
            endpoint.busy -= 1
            conn.held[name] -= 1
            self._outcome(endpoint, str(message["result"]), float(message.get("seconds") or 0.0), int(message.get("epoch") or 0))
        elif op == "pause":
            endpoint = self._endpoints[name]
            endpoint.resume_at = max(endpoint.resume_at, time.monotonic() + max(0.0, float(message["seconds"])))
        self._grant(name)

    @staticmethod
    def _outcome(endpoint: _Endpoint, outcome: str, seconds: float, epoch: int) -> None:
        if outcome == "refused":
            endpoint.refused += 1
        elif outcome == "timeout":
            endpoint.timeouts += 1
        if endpoint.aimd is None:
            return
        if outcome == "done":
            endpoint.aimd.answered(seconds, epoch)
        elif outcome == "refused":
            endpoint.aimd.refused_now(epoch)
        elif outcome == "timeout":
            endpoint.aimd.timed_out(epoch)

    def _grant(self, name: str) -> None:
        """Grant free places in arrival order, each at the rate's next start, none while the endpoint is paused."""
        endpoint = self._endpoints.get(name)
        if endpoint is None:
            return
        while not endpoint.full and endpoint.waiting:
            now = time.monotonic()
            due = max(endpoint.resume_at, endpoint.rate.next_start if endpoint.rate is not None else now)
            if due > now:
                self._wake_at(endpoint, name, due)
                return
            conn, request = endpoint.waiting.popleft()
            if conn.closed:
                continue
            if endpoint.rate is not None:
                endpoint.rate.reserve(now)
            endpoint.busy += 1
            endpoint.requests += 1
            endpoint.peak = max(endpoint.peak, endpoint.busy)
            conn.held[name] = conn.held.get(name, 0) + 1
            conn.send({"id": request, "epoch": endpoint.aimd.epoch() if endpoint.aimd is not None else 0})

    def _wake_at(self, endpoint: _Endpoint, name: str, due: float) -> None:
        """Call :meth:`_grant` at ``due`` (``time.monotonic``, the loop's clock); one timer an endpoint, the earliest."""
        if endpoint.wakeup is not None:
            if endpoint.wakeup.when() <= due:
                return
            endpoint.wakeup.cancel()

        def wake() -> None:
            endpoint.wakeup = None
            self._grant(name)

        endpoint.wakeup = self._loop.call_at(due, wake)


# --------------------------------------------------------------------------- the worker's side


class _Link:
    """A worker's connection to the :class:`FlowServer`, one per event loop; None once it cannot be used."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[str, asyncio.Future[int]]] = {}  # request id -> (endpoint, its grant)
        self._connecting: asyncio.Lock | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self.broken = False

    async def _connect(self) -> asyncio.StreamWriter | None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._writer, self._pending, self._connecting = loop, None, {}, asyncio.Lock()
        assert self._connecting is not None
        async with self._connecting:
            if self._writer is None and not self.broken:
                try:
                    reader, self._writer = await asyncio.open_unix_connection(str(self.path))
                except OSError as exc:
                    self.broken = True
                    log.warning("rageval: the shared limit at %s cannot be reached (%s): this worker limits itself", self.path, exc)
                    return None
                self._reader_task = loop.create_task(self._read(reader))
        return self._writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                message = json.loads(line)
                endpoint, future = self._pending.pop(int(message["id"]), ("", None))
                if future is None or message.get("cancelled"):
                    continue
                if not future.done():
                    future.set_result(int(message["epoch"]))
                else:  # cancelled while its grant was on the way: give the place back
                    self.send({"op": "release", "ep": endpoint, "result": "none", "epoch": int(message["epoch"])})
        except (ConnectionError, OSError, ValueError):
            pass
        self.broken = True
        for _, future in self._pending.values():  # the server is gone: nobody waits for it any more
            if not future.done():
                future.set_result(0)

    def send(self, message: dict[str, Any]) -> None:
        if self._writer is not None and not self.broken:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                self._writer.write(json.dumps(message).encode() + b"\n")

    async def acquire(self, endpoint: str, spec: SharedSpec) -> int | None:
        """Wait for a place at ``endpoint``; its round, or None when the server cannot be reached."""
        if self.broken or await self._connect() is None:
            return None
        request = next(self._ids)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending[request] = (endpoint, future)
        self.send(
            {
                "op": "acquire",
                "ep": endpoint,
                "id": request,
                "ceiling": spec.ceiling,
                "adaptive": spec.adaptive,
                "start": spec.start,
                "rate": spec.per_second,
                "shared": spec.shared,
            }
        )
        try:
            return await future
        except asyncio.CancelledError:
            self.send({"op": "cancel", "ep": endpoint, "id": request})
            raise


class _SharedTicket:
    """A place held locally and at the server; the outcome goes to both."""

    def __init__(self, local: SlotTicket) -> None:
        self._local = local
        self.outcome, self.seconds = "none", 0.0

    def done(self, seconds: float) -> None:
        self._local.done(seconds)
        self.outcome, self.seconds = "done", seconds

    def refused(self) -> None:
        self._local.refused()
        self.outcome = "refused"

    def timed_out(self) -> None:
        self._local.timed_out()
        self.outcome = "timeout"


class SharedLimiter:
    """A worker's limiter of one endpoint whose places are granted by the session's :class:`FlowServer`.

    A request first takes a place in this worker's own ``local`` limiter (earliest case first, bounded by the
    endpoint's service time), then one at the server. When the server cannot be reached the local limiter alone
    holds the worker's requests.
    """

    def __init__(self, link: _Link, endpoint: str, spec: SharedSpec, local: EndpointLimiter) -> None:
        self.link, self.endpoint, self.spec, self.local = link, endpoint, spec, local

    @contextlib.asynccontextmanager
    async def slot(self, order: int | None = None) -> AsyncIterator[SlotTicket]:
        async with self.local.slot(order) as local:
            epoch = await self.link.acquire(self.endpoint, self.spec)
            ticket = _SharedTicket(local)
            try:
                yield ticket
            finally:
                if epoch is not None:
                    message = {"op": "release", "ep": self.endpoint, "result": ticket.outcome, "seconds": ticket.seconds, "epoch": epoch}
                    self.link.send(message)

    def pause(self, seconds: float) -> None:
        self.local.pause(seconds)
        self.link.send({"op": "pause", "ep": self.endpoint, "seconds": seconds})

    def stats(self) -> FlowStats:
        return self.local.stats()

    @property
    def waiting(self) -> int:
        return self.local.waiting


def link_to(path: Path) -> _Link:
    """A worker's connection to the server at ``path`` (made on first use, in the loop that uses it)."""
    return _Link(path)
