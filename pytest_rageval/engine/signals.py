"""The session's signals: SIGTERM treated like Ctrl-C (only noted once the run is being written), and both held
while a record is written and counted.

Python raises a signal handler's exception between any two bytecodes of the main thread, so a Ctrl-C could
land after a record reached results.jsonl and before metrics.json counted it; :func:`held` closes that gap.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM)


def interrupt_on_sigterm(on_signal: Callable[[], None]) -> Any:
    """Treat SIGTERM like Ctrl-C for this session, so finished cases and metrics.json are kept; ``on_signal`` first.

    Returns the handler it replaced (None off the main thread, where nothing is installed)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        on_signal()
        raise KeyboardInterrupt("SIGTERM: stopping; finished cases are kept")

    return signal.signal(signal.SIGTERM, interrupt)


def note_sigterm(on_signal: Callable[[], None]) -> None:
    """From now on SIGTERM only calls ``on_signal``: what the session is finishing is finished first."""

    def note(signum: int, frame: Any) -> None:
        on_signal()

    signal.signal(signal.SIGTERM, note)


def restore_sigterm(previous: Any) -> None:
    """Put back the SIGTERM handler :func:`interrupt_on_sigterm` replaced."""
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Ctrl-C and SIGTERM arriving inside the block are delivered when it ends, to the handlers of before it.

    A no-op off the main thread (signals are only ever handled on it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def note(signum: int, frame: Any) -> None:
        arrived.append(signum)

    previous = {signum: signal.signal(signum, note) for signum in HELD}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for once in dict.fromkeys(arrived):
            signal.raise_signal(once)
