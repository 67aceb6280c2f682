"""How long to wait before retrying a request: the one backoff policy of the RAG client, the judge and the
judge cache.

``backoff_delay``: a server's ``Retry-After`` (or ``retry-after-ms``) when it sent one, else exponential backoff
with full jitter (a uniform draw from 0 to ``base * 2**attempt``); both capped at ``cap``. The draw comes from a
private ``random.Random`` (never the global one, which a user's test may seed) unless a caller passes its own
``rand``; only how long a retry waits depends on it, never what a request returns or a verdict says.
"""

from __future__ import annotations

import email.utils
import random
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

__all__ = ["backoff_delay", "retry_after_seconds"]

_JITTER = random.Random()
_MAX_DOUBLINGS = 64  # 2**64 * any base is past every cap; a larger exponent would overflow a float


def backoff_delay(
    attempt: int, *, base: float, cap: float, headers: Any = None, rand: Callable[[], float] = _JITTER.random
) -> float:
    """Seconds to wait after failed attempt ``attempt`` (0 for the first): ``Retry-After`` from ``headers`` when
    present, else a uniform draw in [0, ``base * 2**attempt``]; never more than ``cap``."""
    after = retry_after_seconds(headers)
    if after is not None:
        return min(after, cap)
    ceiling = min(cap, base * 2.0 ** min(max(attempt, 0), _MAX_DOUBLINGS))
    return ceiling * min(max(rand(), 0.0), 1.0)


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date), or None."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
