"""The endpoint limiters of one process: how many requests may be in flight to the target and to the judge.

With ``--rageval-concurrency N`` each endpoint gets N (the target at most ``rageval_target_concurrency``); without
it each limit adapts (flow.Aimd), starting at 8 and rising no higher than ``rageval_max_concurrency`` (64), and
under pytest-xdist a worker's limiters take their places from the controller's flow_share.FlowServer, so the
workers share one limit per endpoint (a fixed N stays each worker's own). ``rageval_judge_rate`` and
``rageval_target_rate`` cap how fast requests start (``10/min``), one budget for all the workers of a session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_rageval import defaults
from pytest_rageval.config.settings import Settings
from pytest_rageval.flow import Aimd, EndpointLimiter, FlowStats, Limiter, RateSpacing, format_rate
from pytest_rageval.redact import scrub_urls

from .flow_share import FlowAddress, SharedLimiter, SharedSpec, link_to

if TYPE_CHECKING:
    from pytest_rageval.config.settings import Settings

__all__ = ["EndpointLimits", "combined", "flow_notes"]


class EndpointLimits:
    """One limiter per endpoint (made on first use): the judge's by base URL, the target's by name."""

    def __init__(self, settings: Settings, *, shared: FlowAddress | None = None) -> None:
        self.settings = settings
        self._link = link_to(shared) if shared is not None else None
        self._limiters: dict[str, Limiter] = {}

    def judge(self, base_url: str | None) -> Limiter:
        """The limiter of the judge endpoint at ``base_url`` (bounded, too, by what it answers within the timeout)."""
        s = self.settings
        return self._get(
            f"judge {scrub_urls(base_url or 'the default endpoint')}",
            s.concurrency,
            timeout=s.timeout,
            rate=s.judge_rate,
        )

    def target(self, name: str) -> Limiter:
        """The limiter of the target ``name``: never more than ``rageval_target_concurrency`` in flight."""
        s = self.settings
        return self._get(f"target {name}", min(s.concurrency, s.target_concurrency), timeout=None, rate=s.target_rate)

    def stats(self) -> list[tuple[str, FlowStats]]:
        """What each endpoint's limiter in this process did, by name (the sent requests of a shared one only)."""
        return sorted((name, limiter.stats()) for name, limiter in self._limiters.items())

    def own_stats(self) -> list[tuple[str, FlowStats]]:
        """:meth:`stats` of the limiters this process holds alone (not those shared with other workers)."""
        return [(name, stats) for name, stats in self.stats() if not isinstance(self._limiters[name], SharedLimiter)]

    def _get(self, name: str, ceiling: int, *, timeout: float | None, rate: float | None) -> Limiter:
        if name not in self._limiters:
            adaptive = self.settings.adaptive
            start = min(defaults.CONCURRENCY, ceiling)
            if self._link is not None and (adaptive or rate):  # a fixed N is each worker's own; a rate never is
                local = EndpointLimiter(ceiling, timeout=timeout)
                spec = SharedSpec(ceiling, adaptive, start, per_second=rate, shared=adaptive)
                self._limiters[name] = SharedLimiter(self._link, name, spec, local)
            else:
                aimd = Aimd(start, ceiling) if adaptive else None
                spacing = RateSpacing(rate) if rate else None
                self._limiters[name] = EndpointLimiter(ceiling, timeout=timeout, aimd=aimd, rate=spacing)
        return self._limiters[name]


def combined(stats: list[tuple[str, FlowStats]]) -> list[tuple[str, FlowStats]]:
    """Each endpoint's figures over every process that reported them: requests, refusals and timeouts summed; the
    limit and the most in flight the highest of any one process."""
    merged: dict[str, FlowStats] = {}
    for name, s in stats:
        m = merged.get(name)
        merged[name] = (
            s
            if m is None
            else FlowStats(
                max(m.limit, s.limit),
                max(m.peak, s.peak),
                m.refused + s.refused,
                m.timeouts + s.timeouts,
                m.requests + s.requests,
                m.adaptive,
                m.rate or s.rate,
            )
        )
    return sorted(merged.items())


def flow_notes(stats: list[tuple[str, FlowStats]]) -> list[str]:
    """One line per endpoint that was sent requests: where its limit settled, the most in flight, what it refused."""
    lines = []
    for name, s in stats:
        if not s.requests:
            continue
        limit = f"adaptive limit settled at {s.limit}" if s.adaptive else f"limit {s.limit}"
        rate = f", at most {format_rate(s.rate)}" if s.rate else ""
        refused = f", {s.refused} refused (429/503)" if s.refused else ", none refused"
        timeouts = f", {s.timeouts} timed out" if s.timeouts else ""
        lines.append(f"{name}: {limit} (most at once: {s.peak}){rate}; {s.requests} requests{refused}{timeouts}")
    return lines
