"""A client object of the user's own (a conftest ``rageval_client`` fixture returned an object with ``aask``), held to
the rules every target call follows: ``rageval_timeout`` around each call, and whatever it raises or returns is that
case's error.

The one exception: a ``KeyboardInterrupt`` out of its ``aask`` is the case's error and then stops the session as
Ctrl-C does (``interrupted`` says so; the case runner stops after the case, so the run folder is written).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pytest_rageval.redact import Redactor, environment_secrets

from .callable_client import _cancelled_from_outside, _raised
from .daemon_calls import Abandoned, within
from .maps import type_name
from .protocol import RagCallError, RagClient, RagReply

__all__ = ["UserClient", "attribute", "safe_describe"]


class UserClient:
    """``inner`` (any object with ``aask``, ``aclose`` and ``describe``) with the run's timeout and error rules."""

    def __init__(self, inner: Any, *, name: str, timeout: float | None) -> None:
        self.inner = inner
        self.name = name
        self.timeout = timeout
        self.interrupted: str | None = None  # why the session must stop (its aask raised KeyboardInterrupt)
        self._redactor = Redactor(environment_secrets(os.environ))

    def __repr__(self) -> str:
        return f"UserClient({self.name!r})"

    def describe(self) -> dict[str, Any]:
        return safe_describe(self.inner, self.name)

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        """``inner.aask`` within ``timeout``; anything it raises or a reply that is no RagReply as a RagCallError."""
        try:
            reply = await within(self._ask(question, k=k, params=params), self.timeout)
        except Abandoned as exc:
            error = RagCallError("timeout", f"{self.name} did not return within {self.timeout:g} s")
            error.still_running = exc.ended
            raise error from None
        if not isinstance(reply, RagReply):
            raise RagCallError("invalid_response", f"{self.name} returned {type_name(reply)}, expected a RagReply")
        return reply

    async def _ask(self, question: str, *, k: int, params: dict[str, Any]) -> Any:
        try:
            return await self.inner.aask(question, k=k, params=params)
        except RagCallError:
            raise
        except asyncio.CancelledError as exc:
            if _cancelled_from_outside():
                raise
            raise RagCallError("target", self._raised(exc)) from None
        except KeyboardInterrupt as exc:
            self.interrupted = f"{self._raised(exc)}: the session stops, as on Ctrl-C"
            error = RagCallError("target", self.interrupted)
            error.interrupt = True
            raise error from None
        except BaseException as exc:  # SystemExit and the rest: this case's error, on one line
            raise RagCallError("target", self._raised(exc)) from None

    def _raised(self, exc: BaseException) -> str:
        """``the rageval_client fixture raised SystemExit(3)`` (secrets masked, one line)."""
        return f"{self.name} raised {_raised(exc, self._redactor).removeprefix('the target raised ')}"

    async def aclose(self) -> None:
        """The object's own ``aclose``, when it has one; what it raises is not the session's business."""
        close = attribute(self.inner, "aclose")
        if callable(close):
            try:
                await within(close(), self.timeout)
            except Exception:
                pass


def safe_describe(client: RagClient | Any, name: str) -> dict[str, Any]:
    """``client.describe()`` when it gives a dict, else ``{"kind": "client", "name": name}`` with why not."""
    try:
        described = client.describe()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        return {"kind": "client", "name": name, "describe_error": f"describe() raised {type(exc).__name__}"}
    if not isinstance(described, dict):
        return {"kind": "client", "name": name, "describe_error": f"describe() returned {type_name(described)}"}
    return described


def attribute(obj: Any, name: str) -> Any:
    """``getattr(obj, name, None)``, also when the object's ``__getattr__`` raises something else."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None
