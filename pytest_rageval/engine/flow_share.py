"""One limit per endpoint across the pytest-xdist workers of a session.

The xdist controller runs a :class:`FlowServer`: a Unix socket in the session's temp folder, served by an asyncio
loop in a thread of its own (no server to install). It holds, per endpoint, the requests in flight of every worker
and the adaptive limit (flow.Aimd) they share; a worker's :class:`SharedLimiter` asks it for each request's place
and tells it how the request went, so ``-n 4`` sends no more to an endpoint than one process would, one 429 or
Retry-After holds back every worker, and an endpoint's rate (``rageval_judge_rate``) is one budget for all of
them: the server spaces the grants. A worker that dies closes its connection: the places it held are freed.

Only the session's workers may use it: the controller makes a key for the session and hands it to each worker
with its start-up input (never on a command line or in the environment); a connection whose first line is not
``{"op": "hello", "key": ...}`` with that key within :data:`HELLO_SECONDS` is closed. Every later message is
checked (flow_messages.read_message: finite, bounded values); one that is not what a worker sends closes its
connection, which frees what it held. A connection holds at most twice an endpoint's limit (held and waiting), and
a place held longer than ``max_hold`` (a request never takes that long) closes the connection holding it.

The protocol is one JSON object per line. Worker to server: ``hello`` (the key), ``acquire`` (endpoint, request
id, the limit's settings: ``ceiling``, ``adaptive``, ``start``, ``rate``, ``shared``), ``release`` (endpoint,
request id, result, seconds, round), ``cancel`` (request id), ``pause`` (endpoint, seconds). Server to worker:
``{"id": ..., "epoch": ...}`` when a place is granted (at the rate's next start), ``{"id": ..., "cancelled":
true}`` when a cancelled request had none yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rageval.flow import Aimd, EndpointLimiter, FlowStats, RateSpacing, SlotTicket

from .flow_messages import Acquire, BadMessage, Cancel, Pause, Release, check_hello, hello, read_message

__all__ = ["FlowAddress", "FlowServer", "SharedLimiter", "SharedSpec"]

log = logging.getLogger("pytest_rageval")

#: seconds a new connection has to send the session's key
HELLO_SECONDS = 10.0
#: the most endpoints one session's workers share limits of
MAX_ENDPOINTS = 1_000


@dataclass(frozen=True)
class FlowAddress:
    """Where a worker reaches the session's :class:`FlowServer`, and the key it must show."""

    path: Path
    key: str


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
    held: dict[str, dict[int, asyncio.TimerHandle]] = field(default_factory=dict)  # endpoint -> request -> its lease
    closed: bool = False

    def send(self, message: dict[str, Any]) -> None:
        if not self.closed:
            self.writer.write(json.dumps(message).encode() + b"\n")

    def close(self) -> None:
        """Stop serving this connection (its places are freed when its reader ends)."""
        self.closed = True
        self.writer.close()


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
        return FlowStats(
            self.limit, self.peak, self.refused, self.timeouts, self.requests, adaptive=self.aimd is not None, rate=rate
        )


class FlowServer:
    """The shared limits of a session's endpoints, served on a Unix socket at ``path`` (the xdist controller).

    ``key``: what a connection must show first (a new random one by default); ``max_spacing``: the longest gap
    between two requests a rate may ask for; ``max_hold``: the longest a place may be held (seconds)."""

    def __init__(
        self, path: Path, *, key: str | None = None, max_spacing: float = 3600.0, max_hold: float = 600.0
    ) -> None:
        self.path = path
        self.key = key if key is not None else secrets.token_urlsafe(32)
        self.max_spacing, self.max_hold = max_spacing, max_hold
        self._endpoints: dict[str, _Endpoint] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rageval-flow", daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def start(self) -> None:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_unix_server(self._serve, path=str(self.path)), self._loop
        )
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
            first = await asyncio.wait_for(reader.readline(), HELLO_SECONDS)
            if not check_hello(first, self.key):
                log.warning("rageval: the shared limit closed a connection that did not show the session's key")
                return
            while not conn.closed and (line := await reader.readline()):
                self._handle(conn, read_message(line, max_spacing=self.max_spacing))
        except BadMessage as exc:
            log.warning("rageval: the shared limit closed a connection that sent a message no worker sends (%s)", exc)
        except (ConnectionError, OSError, ValueError, asyncio.TimeoutError, asyncio.CancelledError):
            pass  # gone, silent past the hello's time, or a line longer than the reader's limit
        finally:
            conn.closed = True
            for name, leases in conn.held.items():  # a worker gone: its places are free again
                for lease in leases.values():
                    lease.cancel()
                self._endpoints[name].busy -= len(leases)
            for name, endpoint in self._endpoints.items():
                if any(w[0] is conn for w in endpoint.waiting):
                    endpoint.waiting = deque(w for w in endpoint.waiting if w[0] is not conn)
                self._grant(name)
            writer.close()

    def _handle(self, conn: _Conn, message: Acquire | Release | Cancel | Pause) -> None:
        name = message.endpoint
        endpoint = self._endpoints.get(name)
        if isinstance(message, Acquire):
            if endpoint is None:
                if len(self._endpoints) >= MAX_ENDPOINTS:
                    raise BadMessage(f"more than {MAX_ENDPOINTS} endpoints")
                spec = SharedSpec(message.ceiling, message.adaptive, message.start, message.rate, message.shared)
                endpoint = self._endpoints[name] = _Endpoint(spec)
            asked = len(conn.held.get(name, ())) + sum(1 for w in endpoint.waiting if w[0] is conn)
            if asked >= 2 * endpoint.ceiling:
                raise BadMessage(f"more than {2 * endpoint.ceiling} places asked for at {name!r:.100}")
            endpoint.waiting.append((conn, message.id))
        elif endpoint is None:
            raise BadMessage(f"no endpoint {name!r:.100}")
        elif isinstance(
            message, Cancel
        ):  # a request given up while waiting; if its place was granted already, a release follows
            kept = deque(w for w in endpoint.waiting if not (w[0] is conn and w[1] == message.id))
            if len(kept) < len(endpoint.waiting):
                endpoint.waiting = kept
                conn.send({"id": message.id, "cancelled": True})
            return
        elif isinstance(message, Release):
            lease = conn.held.get(name, {}).pop(message.id, None)
            if lease is None:
                raise BadMessage(f"request {message.id} holds no place at {name!r:.100}")
            lease.cancel()
            endpoint.busy -= 1
            self._outcome(endpoint, message.result, message.seconds, message.epoch)
        else:
            endpoint.resume_at = max(endpoint.resume_at, time.monotonic() + message.seconds)
        self._grant(name)

    def _overheld(self, conn: _Conn, name: str) -> None:
        """A place held past ``max_hold``: no request takes that long, so its connection is closed (which frees it)."""
        log.warning(
            "rageval: the shared limit closed a connection that held a place at %.100r longer than %g s",
            name,
            self.max_hold,
        )
        conn.close()

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
            conn.held.setdefault(name, {})[request] = self._loop.call_later(self.max_hold, self._overheld, conn, name)
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

    def __init__(self, address: FlowAddress) -> None:
        self.path, self._key = address.path, address.key
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[str, asyncio.Future[int]]] = {}  # request id -> (endpoint, its round)
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
                    log.warning(
                        "rageval: the shared limit at %s cannot be reached (%s): this worker limits itself",
                        self.path,
                        exc,
                    )
                    return None
                self._reader_task = loop.create_task(self._read(reader))
                self.send(hello(self._key))
        return self._writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                message = json.loads(line)
                request = int(message["id"])
                endpoint, future = self._pending.pop(request, ("", None))
                if future is None or message.get("cancelled"):
                    continue
                if not future.done():
                    future.set_result(int(message["epoch"]))
                else:  # cancelled while its grant was on the way: give the place back
                    self.send(
                        {
                            "op": "release",
                            "ep": endpoint,
                            "id": request,
                            "result": "none",
                            "epoch": int(message["epoch"]),
                        }
                    )
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

    async def acquire(self, endpoint: str, spec: SharedSpec) -> tuple[int, int] | None:
        """Wait for a place at ``endpoint``; the request's id and round, or None when the server cannot be reached."""
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
            return request, await future
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
            grant = await self.link.acquire(self.endpoint, self.spec)
            ticket = _SharedTicket(local)
            try:
                yield ticket
            finally:
                if grant is not None:
                    request, epoch = grant
                    result = {"result": ticket.outcome, "seconds": ticket.seconds, "epoch": epoch}
                    self.link.send({"op": "release", "ep": self.endpoint, "id": request, **result})

    def pause(self, seconds: float) -> None:
        self.local.pause(seconds)
        self.link.send({"op": "pause", "ep": self.endpoint, "seconds": seconds})

    def stats(self) -> FlowStats:
        return self.local.stats()

    @property
    def waiting(self) -> int:
        return self.local.waiting


def link_to(address: FlowAddress) -> _Link:
    """A worker's connection to the server at ``address`` (made on first use, in the loop that uses it)."""
    return _Link(address)
