"""The messages of the shared-limit socket (flow_share.FlowServer), read and checked before the server acts on them.

Only the session's own workers hold the key the first message must carry, but a message is still checked field by
field: a value the workers never send (a pause of 1e308 s, a rate of one request in 1e300 s, a limit of 10**30, a
name of a megabyte) is refused with :class:`BadMessage`, and the server closes that connection. Pure: no I/O.
"""

from __future__ import annotations

import hmac
import json
import math
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_CEILING",
    "MAX_ENDPOINT_CHARS",
    "MAX_PAUSE",
    "Acquire",
    "BadMessage",
    "Cancel",
    "Pause",
    "Release",
    "check_hello",
    "hello",
    "read_message",
]

#: the most places one endpoint's limit may have (a concurrency setting has at most 6 digits)
MAX_CEILING = 999_999
#: the longest endpoint name ("judge " or "target " and a URL or a callable's name)
MAX_ENDPOINT_CHARS = 2_000
#: the longest pause a worker asks for (a Retry-After is honoured up to 30 s)
MAX_PAUSE = 300.0
#: the highest request id (a worker counts up from 1)
MAX_ID = 2**53
#: the fastest rate: one request a nanosecond
MAX_RATE = 1e9
RESULTS = ("done", "refused", "timeout", "none")


class BadMessage(ValueError):
    """A message the server refuses: what is wrong with it."""


@dataclass(frozen=True)
class Acquire:
    endpoint: str
    id: int
    ceiling: int
    adaptive: bool
    start: int
    rate: float | None
    shared: bool


@dataclass(frozen=True)
class Release:
    endpoint: str
    id: int
    result: str
    seconds: float
    epoch: int


@dataclass(frozen=True)
class Cancel:
    endpoint: str
    id: int


@dataclass(frozen=True)
class Pause:
    endpoint: str
    seconds: float


Message = Acquire | Release | Cancel | Pause


def hello(key: str) -> dict[str, Any]:
    """The first message of a worker: the session's key."""
    return {"op": "hello", "key": key}


def check_hello(line: bytes, key: str) -> bool:
    """Whether ``line`` is the hello message carrying ``key`` (compared in constant time)."""
    try:
        message = _object(line)
    except BadMessage:
        return False
    given = message.get("key")
    return message.get("op") == "hello" and isinstance(given, str) and hmac.compare_digest(given.encode(), key.encode())


def read_message(line: bytes, *, max_spacing: float) -> Message:
    """The message on ``line``; :class:`BadMessage` when it is not one the workers send. ``max_spacing``: the
    longest gap between two requests a rate may ask for (seconds)."""
    message = _object(line)
    op = message.get("op")
    endpoint = _endpoint(message.get("ep"))
    if op == "acquire":
        ceiling = _int(message, "ceiling", 1, MAX_CEILING)
        return Acquire(
            endpoint,
            _int(message, "id", 1, MAX_ID),
            ceiling,
            _bool(message, "adaptive"),
            _int(message, "start", 1, ceiling),
            _rate(message.get("rate"), max_spacing),
            _bool(message, "shared"),
        )
    if op == "release":
        result = message.get("result")
        if result not in RESULTS:
            raise BadMessage(f"result must be one of {', '.join(RESULTS)}, got {result!r:.50}")
        seconds = _number(message, "seconds", 0.0, math.inf)
        return Release(
            endpoint, _int(message, "id", 1, MAX_ID), str(result), seconds, _int(message, "epoch", 0, MAX_ID)
        )
    if op == "cancel":
        return Cancel(endpoint, _int(message, "id", 1, MAX_ID))
    if op == "pause":
        return Pause(endpoint, _number(message, "seconds", 0.0, MAX_PAUSE))
    raise BadMessage(f"unknown op {op!r:.50}")


def _object(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        raise BadMessage("not JSON") from None
    if not isinstance(message, dict):
        raise BadMessage("not a JSON object")
    return message


def _endpoint(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ENDPOINT_CHARS:
        raise BadMessage(f"ep must be a name of 1 to {MAX_ENDPOINT_CHARS} characters")
    return value


def _int(message: dict[str, Any], key: str, low: int, high: int) -> int:
    value = message.get(key)
    if type(value) is not int or not low <= value <= high:
        raise BadMessage(f"{key} must be a whole number from {low} to {high}, got {value!r:.50}")
    return value


def _bool(message: dict[str, Any], key: str) -> bool:
    value = message.get(key)
    if not isinstance(value, bool):
        raise BadMessage(f"{key} must be true or false, got {value!r:.50}")
    return value


def _number(message: dict[str, Any], key: str, low: float, high: float) -> float:
    value: Any = message.get(key)
    if type(value) not in (int, float) or not math.isfinite(value) or not low <= value <= high:
        raise BadMessage(f"{key} must be a number from {low:g} to {high:g}, got {value!r:.50}")
    return float(value)


def _rate(value: Any, max_spacing: float) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or not 1.0 / max_spacing <= value <= MAX_RATE:
        raise BadMessage(
            f"rate must be from one request in {max_spacing:g} s to {MAX_RATE:g} a second, got {value!r:.50}"
        )
    return float(value)
