"""The hooks pytest-rageval adds to pytest (registered by ``pytest_addhooks`` in plugin/__init__.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # types only: the hook specifications import nothing of the evaluation layer
    from pytest_rageval.evaluation.registry import Metric


@pytest.hookspec(firstresult=False)
def pytest_rageval_metrics(config: pytest.Config) -> Iterable[Metric] | Metric | None:
    """Deterministic metrics to score for every case, from a conftest.py or a plugin.

    Return a list of :class:`~pytest_rageval.evaluation.registry.Metric` (a single Metric or None will do).
    Called once per process (xdist's controller and each worker alike) in ``pytest_configure`` with
    ``--rageval``, before the settings are read, so thresholds and gate tolerances may name the metrics.
    Installed plugins and the conftest.py files pytest loads before collecting are asked: the root folder's and
    those on the way to the paths on the command line (or ``testpaths``); a conftest.py found later, while
    collecting, is not. A returned metric whose name or aggregate is taken by another
    metric is a usage error naming the conftest or plugin; an equal metric returned again is a no-op.

    :param config: the pytest config (an implementation may leave it out).
    """
