"""What every RAG client is: the ``RagClient`` protocol, its reply (``RagReply``) and its two errors, a setting that
cannot be used (``RagConfigError``) and a call that failed (``RagCallError``, with its ``ERROR_KINDS``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pytest_rageval.errors import ConfigError, RagevalError
from pytest_rageval.evaluation.record import CALL_ERROR_KINDS, CallErrorKind
from pytest_rageval.evaluation.schema import RagResponse

ERROR_KINDS = CALL_ERROR_KINDS  # what a failed call is (record.CallErrorKind)


# --------------------------------------------------------------------------- errors


class RagConfigError(ConfigError):
    """Bad configuration; the message names the setting."""


class RagCallError(RagevalError):
    """A call to the system under test failed; ``kind`` classifies it."""

    def __init__(self, kind: CallErrorKind, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown RagCallError kind {kind!r}; expected one of {', '.join(ERROR_KINDS)}")
        super().__init__(kind, message)
        self.kind: CallErrorKind = kind
        self.message = message
        self.status = status
        self.attempts = attempts
        self.unbindable = False  # a callable could not take (question, params) at all: it is not a target (first_call)
        # a call given up at its timeout that still runs: done when it really ends (first_call keeps its place)
        self.still_running: asyncio.Future[Any] | None = None
        # the user's client raised KeyboardInterrupt: this case's error, then the session stops as on Ctrl-C
        self.interrupt = False

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"RagCallError(kind={self.kind!r}, message={self.message!r})"

    def __reduce__(self) -> Any:
        return (_rebuild_call_error, (self.kind, self.message, self.status, self.attempts))


def _rebuild_call_error(kind: CallErrorKind, message: str, status: int | None, attempts: int) -> RagCallError:
    return RagCallError(kind, message, status=status, attempts=attempts)


# --------------------------------------------------------------------------- reply and protocol


@dataclass(frozen=True)
class RagReply:
    """A successful call: the normalised response and how it went."""

    response: RagResponse
    latency_ms: float  # wall time of the successful attempt
    attempts: int
    notes: tuple[str, ...] = ()  # what was repaired to read the response (safejson's notes: NaN, invalid Unicode)
    ttft_ms: float | None = None  # time to the first non-empty text delta of a streamed answer (None: not streamed)


@runtime_checkable
class RagClient(Protocol):
    """What the runner needs from a client of the system under test."""

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply: ...

    async def aclose(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...
