"""The judge's first request alone: ``Probe`` runs it until its answer has decided the response format, so that a server which
refuses json_schema refuses exactly one request, not one per case in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


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
