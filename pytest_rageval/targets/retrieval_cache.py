"""The run's retrieval cache: one request per (target, question, params but the depth, run) at the
largest depth of the config matrix, sliced to each smaller k.

Within a process, concurrent cases asking the same key share one request (single-flight: the first
asks, the others await its result). Across the processes of an xdist run, a key's result is a file in
a run-scoped folder the controller makes and removes (``XdistControllerLink``), written under an
``flock`` of the key: the first worker asks, the others read. Nothing is kept past the run, so a
re-run asks the system again. A failed call is shared too (the same error for every config of the key).
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rageval.atomic import write_bytes_atomic
from pytest_rageval.evaluation.anchors import top_k
from pytest_rageval.evaluation.schema import RagResponse

from .protocol import RagCallError, RagClient, RagReply

try:  # pragma: no cover - every POSIX system has it
    import fcntl
except ImportError:  # pragma: no cover - Windows: the in-process single-flight only
    fcntl = None  # type: ignore[assignment]

#: seconds between tries of a key's lock held by another process
_LOCK_POLL = 0.02


def cache_key(target: str, question: str, params: Mapping[str, Any], depth: int, run: int) -> str:
    """The key of one request: its target, question, params (the depth excluded) and the run index of a
    repeated case; ``depth`` counts only when slicing is off (the caller passes 0 otherwise)."""
    text = json.dumps([target, question, dict(sorted(params.items())), depth, run], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def sliced(reply: RagReply, k: int) -> RagReply:
    """``reply`` with its retrieved chunks cut to the top ``k`` (by rank, as scoring reads them)."""
    chunks = reply.response.retrieved_chunks
    if len(chunks) <= k:
        return reply
    response = reply.response.model_copy(update={"retrieved_chunks": top_k(chunks, k)})
    return dataclasses.replace(reply, response=response)


def _encode(outcome: RagReply | RagCallError) -> str:
    if isinstance(outcome, RagCallError):
        return json.dumps(
            {
                "error": {
                    "kind": outcome.kind,
                    "message": outcome.message,
                    "status": outcome.status,
                    "attempts": outcome.attempts,
                }
            }
        )
    return json.dumps(
        {
            "response": outcome.response.model_dump(mode="json"),
            "latency_ms": outcome.latency_ms,
            "attempts": outcome.attempts,
            "notes": list(outcome.notes),
            "ttft_ms": outcome.ttft_ms,
        }
    )


def _decode(text: str) -> RagReply | RagCallError:
    data = json.loads(text)
    if "error" in data:
        e = data["error"]
        return RagCallError(e["kind"], e["message"], status=e["status"], attempts=e["attempts"])
    return RagReply(
        response=RagResponse.model_validate(data["response"]),
        latency_ms=data["latency_ms"],
        attempts=data["attempts"],
        notes=tuple(data["notes"]),
        ttft_ms=data.get("ttft_ms"),
    )


@dataclass
class RetrievalCache:
    """The run's cache; ``folder`` (xdist) shares it between processes, else it lives in this process only."""

    folder: Path | None = None
    requests: int = 0  # requests this process sent through the cache
    _flights: dict[str, asyncio.Future[RagReply | RagCallError]] = field(default_factory=dict)
    _served: dict[str, int] = field(default_factory=dict)

    async def ask(
        self, client: RagClient, key: str, question: str, *, k: int, params: dict[str, Any], users: int = 0
    ) -> RagReply:
        """The reply for ``key``, asked of ``client`` at ``k`` with ``params`` by the first caller only.

        ``users``: how many items the key serves; once that many have asked, it is let go (memory stays flat
        on long runs). 0 keeps it for the run.
        """
        served = self._served[key] = self._served.get(key, 0) + 1
        if users and served >= users:
            self._served.pop(key, None)
        try:
            return await self._ask(client, key, question, k=k, params=params)
        finally:
            if users and served >= users:
                self._flights.pop(key, None)

    async def _ask(self, client: RagClient, key: str, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        flight = self._flights.get(key)
        if flight is None:
            flight = self._flights[key] = asyncio.get_running_loop().create_future()
            try:
                outcome = await self._shared(client, key, question, k=k, params=params)
            except BaseException as exc:  # cancelled, or a bug: the next caller asks again
                self._flights.pop(key, None)
                if isinstance(exc, asyncio.CancelledError):
                    flight.cancel()
                else:
                    flight.set_exception(exc)
                    flight.exception()  # retrieved: no "never retrieved" warning when nobody waits
                raise
            flight.set_result(outcome)
        else:
            outcome = await asyncio.shield(flight)
        if isinstance(outcome, RagCallError):
            raise RagCallError(outcome.kind, outcome.message, status=outcome.status, attempts=outcome.attempts)
        return outcome

    async def _shared(
        self, client: RagClient, key: str, question: str, *, k: int, params: dict[str, Any]
    ) -> RagReply | RagCallError:
        if self.folder is None or fcntl is None:
            return await self._call(client, question, k=k, params=params)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{key}.json"
        fd = os.open(self.folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                        raise
                    await asyncio.sleep(_LOCK_POLL)
            damaged = ""
            if path.is_file():
                try:
                    return _decode(path.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:  # changed under the run
                    damaged = f"the retrieval cache's {path} could not be read ({type(exc).__name__}); asked again"
            outcome = await self._call(client, question, k=k, params=params)
            write_bytes_atomic(path, _encode(outcome).encode("utf-8"))
            if damaged and isinstance(outcome, RagReply):
                outcome = dataclasses.replace(outcome, notes=(*outcome.notes, damaged))
            return outcome
        finally:
            os.close(fd)  # releases the lock

    async def _call(
        self, client: RagClient, question: str, *, k: int, params: dict[str, Any]
    ) -> RagReply | RagCallError:
        self.requests += 1
        try:
            return await client.aask(question, k=k, params=params)
        except RagCallError as exc:
            return exc


@dataclass
class MatrixAsk:
    """A RagClient for one case item of a config: asks through the cache at ``depth`` and slices to ``k``.

    One per item: the n-th call is the case's n-th run (a repeated case asks anew per run).
    """

    inner: RagClient
    cache: RetrievalCache
    target: str  # names the system in the key
    depth: int  # the k the question is asked at
    slice_k: bool
    depth_name: str | None = None  # the matrix's depth axis ("k" or "top_k"): the depth is sent as that param too
    users: int = 0  # how many items one request serves (the configs of its group), 0: unknown
    _runs: int = 0

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        run, self._runs = self._runs, self._runs + 1
        sent = dict(params)
        if self.depth_name is not None:  # an explicit param, so a framework object's retrievers are set to it
            sent[self.depth_name] = self.depth
        key = cache_key(self.target, question, params, 0 if self.slice_k else self.depth, run)
        reply = await self.cache.ask(self.inner, key, question, k=self.depth, params=sent, users=self.users)
        return sliced(reply, k) if k < self.depth else reply

    async def aclose(self) -> None:
        """The inner client is the session's: closed with it."""

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()
