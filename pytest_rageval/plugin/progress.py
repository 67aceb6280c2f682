"""Live progress while the session waits on one slow case (a slow judge) and others finish ahead of it.

Cases run up to ``concurrency`` at a time but report in collection order, so one slow case holds the
progress line still while the cases after it finish. While the session waits for a case's result,
:meth:`LiveProgress.wait` wakes on every case that finishes meanwhile and says so on the terminal:

- ``-v``: a line per finished case, ``finished: set.jsonl::q7 (3 of 25, 4 in flight)``, below pytest's
  line of the awaited case, whose PASSED/FAILED then starts the next line (as with pytest's live logs);
- no ``-v``, on a terminal: ``rageval: 3 of 25 cases finished, 4 in flight, waiting on set.jsonl::q1``,
  at most once every :data:`INTERVAL` seconds (the first when the first case finishes ahead);
- otherwise (captured output, a pipe, ``-q``), an xdist worker (it has no terminal; the controller
  shows each item as a worker reports it), or concurrency 1 (nothing runs ahead): nothing.

Only the main thread writes, between the waits, with pytest's capture suspended (as live logging does).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from pytest_rageval.sanitize import terminal_safe

__all__ = ["INTERVAL", "LiveProgress"]

#: seconds between two in-flight lines without ``-v``
INTERVAL = 5.0


class LiveProgress:
    """Says which cases finished while the session waits on an earlier one; made by :meth:`for_session`."""

    def __init__(
        self,
        config: pytest.Config,
        reporter: Any,
        *,
        verbose: bool,
        total: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.reporter = reporter
        self.verbose = verbose
        self.total = total  # eval-set cases this session runs
        self.clock = clock
        self.finished: set[str] = set()  # node ids: reported, or announced ahead of their report
        self._last: float | None = None  # when the last in-flight line was written (no -v)
        self._below: str | None = None  # the awaited item whose pytest line our lines follow

    @classmethod
    def for_session(cls, config: pytest.Config, total: int, concurrency: int) -> LiveProgress | None:
        """The progress of this process, or None when it says nothing (see the module's docstring; an xdist
        worker's case runner asks for none)."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or concurrency <= 1:
            return None
        verbosity = int(config.option.verbose)  # (Config.get_verbosity is pytest 8 and later)
        if verbosity > 0:
            return cls(config, reporter, verbose=True, total=total)
        if verbosity == 0 and getattr(reporter, "isatty", False):
            return cls(config, reporter, verbose=False, total=total)
        return None

    def done(self, nodeid: str) -> None:
        """A case's item finished (it reported)."""
        self.finished.add(nodeid)

    def wait(
        self, nodeid: str, future: concurrent.futures.Future[Any], started: Mapping[str, concurrent.futures.Future[Any]]
    ) -> None:
        """Return once ``future`` (case ``nodeid``'s) is done; meanwhile say each case of ``started`` that finishes."""
        while True:
            ahead = [(key, f) for key, f in started.items() if key not in self.finished and key != nodeid]
            fresh = [key for key, f in ahead if f.done()]
            if fresh:
                self._say(nodeid, future, fresh, started)
            if future.done():
                return
            waiting = [f for key, f in ahead if not f.done()]
            concurrent.futures.wait([future, *waiting], return_when=concurrent.futures.FIRST_COMPLETED)

    def _in_flight(
        self, future: concurrent.futures.Future[Any], started: Mapping[str, concurrent.futures.Future[Any]]
    ) -> int:
        return sum(1 for f in started.values() if not f.done()) + (0 if future.done() else 1)

    def _say(
        self,
        nodeid: str,
        future: concurrent.futures.Future[Any],
        fresh: list[str],
        started: Mapping[str, concurrent.futures.Future[Any]],
    ) -> None:
        lines = []
        for key in fresh:
            self.finished.add(key)
            if self.verbose:
                lines.append(
                    f"finished: {terminal_safe(key)} ({len(self.finished)} of {self.total}, {self._in_flight(future, started)} in flight)"
                )
        if not self.verbose:
            now = self.clock()
            if self._last is not None and now - self._last < INTERVAL:
                return
            self._last = now
            lines.append(
                f"rageval: {len(self.finished)} of {self.total} cases finished, "
                f"{self._in_flight(future, started)} in flight, waiting on {terminal_safe(nodeid)}"
            )
        self._write(nodeid, lines)

    def _write(self, nodeid: str, lines: list[str]) -> None:
        """``lines`` on lines of their own below pytest's line of the awaited item, the way pytest's live logs are:
        its outcome (``PASSED``, or the next dots) then starts the line after them."""
        text = "\n".join(lines) + "\n"
        if self._below != nodeid:  # the first lines while this item is awaited: end pytest's line first
            text, self._below = "\n" + text, nodeid
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            self.reporter.write(text, flush=True)
