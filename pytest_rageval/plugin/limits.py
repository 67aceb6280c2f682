"""The endpoint limiters of a run: how many requests may be in flight to the target and to the judge.

With ``--rageval-concurrency N`` each endpoint gets N (the target at most ``rageval_target_concurrency``); without
it each limit adapts (flow.Aimd), starting at 8 and rising no higher than ``rageval_max_concurrency`` (64).
"""

from __future__ import annotations

from pytest_rageval import defaults
from pytest_rageval.flow import Aimd, EndpointLimiter

from .settings import Settings

__all__ = ["judge_limiter", "target_limiter"]


def judge_limiter(settings: Settings) -> EndpointLimiter:
    """The judge endpoint's limiter (bounded, too, by what the endpoint answers within the timeout)."""
    ceiling = settings.concurrency
    aimd = Aimd(defaults.CONCURRENCY, ceiling) if settings.adaptive else None
    return EndpointLimiter(ceiling, timeout=settings.timeout, aimd=aimd)


def target_limiter(settings: Settings) -> EndpointLimiter:
    """The target's limiter: never more than ``rageval_target_concurrency`` in flight."""
    ceiling = min(settings.concurrency, settings.target_concurrency)
    aimd = Aimd(min(defaults.CONCURRENCY, ceiling), ceiling) if settings.adaptive else None
    return EndpointLimiter(ceiling, aimd=aimd)
