"""One limiter per judge endpoint: bounded requests in flight, and a 429 pauses them all together."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator, Optional


class EndpointLimiter:
    """Shared by every request to one endpoint in this process.

    At most ``max_in_flight`` requests run at once (calls, not cases, are
    limited), and ``pause(seconds)`` (on a 429, honouring Retry-After) holds
    back every request until then instead of each retrying on its own.
    """

    def __init__(self, max_in_flight: int = 8) -> None:
        self.max_in_flight = max(1, max_in_flight)
        self._slots: Optional[asyncio.Semaphore] = None
        self._slots_loop: Optional[asyncio.AbstractEventLoop] = None
        self._resume_at = 0.0

    def pause(self, seconds: float) -> None:
        """Hold every request back for ``seconds`` from now (the longest pause wins)."""
        self._resume_at = max(self._resume_at, time.monotonic() + max(0.0, seconds))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait for a free slot and for any pause to end, then hold the slot."""
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots_loop is not loop:
            self._slots, self._slots_loop = asyncio.Semaphore(self.max_in_flight), loop
        async with self._slots:
            while (wait := self._resume_at - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            yield
