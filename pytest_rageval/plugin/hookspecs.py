"""The hooks pytest-rageval adds to pytest (registered by ``pytest_addhooks`` in plugin/__init__.py).

Implement them in a ``conftest.py`` or a plugin, as pytest's own hooks. Each is asked only with ``--rageval``;
every implementation is called on its own, so a mistake in what one returns is one line naming its conftest.py
or plugin, and the hook.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # types only: the hook specifications import nothing of the lower layers
    from pytest_rageval.evaluation.registry import Metric
    from pytest_rageval.judges.base import Judge


@pytest.hookspec(firstresult=False)
def pytest_rageval_metrics(config: pytest.Config) -> Iterable[Metric] | Metric | None:
    """Deterministic metrics to score for every case, from a conftest.py or a plugin.

    Return a list of :class:`pytest_rageval.Metric` (a single Metric or None will do).
    Called once per process (xdist's controller and each worker alike) in ``pytest_configure`` with
    ``--rageval``, before the settings are read, so thresholds and gate tolerances may name the metrics.
    Installed plugins and the conftest.py files pytest loads before collecting are asked: the root folder's and
    those on the way to the paths on the command line (or ``testpaths``); a conftest.py found later, while
    collecting, is not. A returned metric whose name or aggregate is taken by another
    metric is a usage error naming the conftest or plugin; an equal metric returned again is a no-op.

    :param config: the pytest config (an implementation may leave it out).
    """


@pytest.hookspec(firstresult=False)
def pytest_rageval_judges(config: pytest.Config) -> Mapping[str, Callable[[], Judge]] | None:
    """Judges of your own, by name: ``--rageval-judge NAME`` (or ini ``rageval_judge = NAME``) chooses one.

    Return a mapping of names to factories: a :class:`pytest_rageval.Judge` subclass, or any callable taking
    no argument that returns a Judge whose ``name`` is the name it is registered under (None: no judge).
    Asked once per process, as ``pytest_rageval_metrics`` (and by the same conftest.py files), before the
    settings are read. The chosen judge is made once in each process that judges (a serial session, each
    xdist worker); its verdicts are not cached. A name that is not letters, digits, ``_``, ``.`` and ``-``,
    that is a built-in judge's (``auto``, ``openai``, ``lexical``, ``none``) or another implementation's, a
    factory that is not callable, raises or makes anything but a Judge of that name: a usage error naming the
    conftest or plugin.

    :param config: the pytest config (an implementation may leave it out).
    """


@pytest.hookspec(firstresult=False)
def pytest_rageval_run_fields(config: pytest.Config, metrics: dict[str, Any]) -> Mapping[str, Any] | None:
    """Fields to add to the stored run: what you return is kept in metrics.json and config.json under ``user``.

    Return a mapping of field names to JSON values (strings, numbers, true/false, null, lists and mappings with
    string keys), or None for none. Called once, at the end of a run, in the process that writes it (a serial
    session, or xdist's controller), after the aggregates are computed and before the baseline gate. The
    fields of every implementation are joined into one ``user`` object, keys sorted; known secrets (header
    values, the judge key, URL credentials) are masked in it. ``rageval merge``, ``rescore`` and ``judge``
    carry the section into the runs they write. A value that is not JSON, a field two implementations return
    or a section over 64 KiB is one line naming the conftest or plugin; the run is then written without the
    section and the session ends with exit status 4.

    :param config: the pytest config (an implementation may leave it out).
    :param metrics: a copy of metrics.json as it will be written (``aggregate_metrics``, ``cases``, ...);
        changing it changes nothing.
    """
