"""Which eval cases to start early, so up to N are in flight while items report one by one.

pytest runs items one after another. Before each item, the plugin looks ahead
at the items this process will run next (the session's list; under
pytest-xdist, the indices the controller has sent this worker) and starts the
cases among them whose work needs nothing from their own setup. Each item's
setup then waits for its own result, so reports stay per item and in order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from . import compat

NOTHING = compat.NOTHING


def skipped_by_marks(item: pytest.Item) -> bool:
    """Whether pytest will skip ``item`` (skip/skipif/xfail(run=False)): then nothing may be sent for it."""
    return compat.skip_decided_by_marks(item)


def _is_conftest(module_name: str) -> bool:
    return module_name.rpartition(".")[2] == "conftest"


def runs_conftest_setup(item: pytest.Item, own: tuple[str, ...] = ("rageval_client", "rageval_judge")) -> bool:
    """Whether conftest code still runs at ``item``'s setup and so may skip it: a ``pytest_runtest_setup``
    hook, or a fixture in its closure (``own`` aside) that is not a session fixture set up already.

    Such a case is not started ahead of its setup: nothing may be sent for a case that setup skips.
    """
    if any(
        _is_conftest(getattr(impl.plugin, "__name__", "")) for impl in item.ihook.pytest_runtest_setup.get_hookimpls()
    ):
        return True
    for name in getattr(item, "fixturenames", ()):
        if name in own:
            continue
        defs = compat.fixture_defs(item, name)
        if defs is None:  # unknown: it may be a conftest fixture
            return True
        if defs and _is_conftest(getattr(defs[-1].func, "__module__", "")) and cached_fixture(item, name) is NOTHING:
            return True
    return False


def cached_fixture(item: pytest.Item, name: str) -> Any:
    """The fixture's value if it is computed already (session scope), else NOTHING."""
    defs = compat.fixture_defs(item, name)
    return compat.cached_value(item.config, defs[-1]) if defs else NOTHING


def is_own_fixture(item: pytest.Item, name: str) -> bool:
    """Whether ``name`` resolves to the plugin's own fixture (not a conftest override)."""
    defs = compat.fixture_defs(item, name)
    return defs is not None and bool(defs) and getattr(defs[-1].func, "__module__", "") == "pytest_rageval.plugin"


class Lookahead:
    """A serial session: the items after the current one in the session's list.

    Where an item is in that list is found next to the item looked up last (a session runs its items in list
    order), not from a table of every item: that table is made only the first time an item is not found
    there (an xdist worker's items come in the order the controller sends them).
    """

    def __init__(self, config: pytest.Config, items: Sequence[pytest.Item]) -> None:
        self.config = config
        self.items = items
        self._last = 0  # the place of the item looked up last
        self._position: dict[int, int] | None = None  # id(item) -> its place, made only when needed

    def index(self, item: pytest.Item) -> int | None:
        """``item``'s place in the session's list; None when it is not in it."""
        items, last = self.items, self._last
        for place in range(last, min(last + 2, len(items))):
            if items[place] is item:
                self._last = place
                return place
        if self._position is None:
            self._position = {id(each): place for place, each in enumerate(items)}
        found = self._position.get(id(item))
        if found is not None:
            self._last = found
        return found

    def order(self, item: pytest.Item) -> int:
        """``item``'s place, to serve the judge requests of earlier cases first (past the end when not listed)."""
        found = self.index(item)
        return len(self.items) if found is None else found

    def upcoming(
        self, item: pytest.Item, nextitem: pytest.Item | None, window: int
    ) -> Iterator[tuple[int, pytest.Item]]:
        """``item``, then up to ``window`` items this process will run after it, each with its place (:meth:`order`)."""
        start = self.index(item)
        yield (len(self.items) if start is None else start), item
        if start is not None:
            yield from enumerate(self.items[start + 1 : start + 1 + window], start + 1)


class WorkerLookahead(Lookahead):
    """An xdist worker: the next item, then those the controller has sent this worker but it has not started."""

    def upcoming(
        self, item: pytest.Item, nextitem: pytest.Item | None, window: int
    ) -> Iterator[tuple[int, pytest.Item]]:
        yield self.order(item), item
        if nextitem is not None:
            yield self.order(nextitem), nextitem
        pending = compat.xdist_pending(self.config) or []
        for index in pending[: max(0, window - 1)]:
            if 0 <= index < len(self.items):
                yield index, self.items[index]


def in_shard(nodeid: str, index: int, count: int) -> bool:
    """Whether a case belongs to share ``index`` (1-based) of ``count``: a stable hash of its node id."""
    import hashlib

    return int(hashlib.sha256(nodeid.encode()).hexdigest()[:16], 16) % count == index - 1
