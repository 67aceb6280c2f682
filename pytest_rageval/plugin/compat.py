"""Every private pytest and pytest-xdist internal the plugin leans on, in one place.

Foundations (layer 0): imports pytest only (xdist and ``_pytest`` lazily).
Each helper reads one internal and, when it is missing (another pytest or
pytest-xdist version), falls back to something that is always correct but
costs concurrency or speed, and warns once per session with a
:class:`CompatWarning` that names what was missing and what the fallback
costs. A helper never lets the missing internal raise.

| helper | internal | fallback |
|---|---|---|
| ``skip_decided_by_marks`` | ``_pytest.skipping.evaluate_skip_marks`` / ``evaluate_xfail_marks`` | the case waits for its setup |
| ``fixture_defs`` | ``item._fixtureinfo.name2fixturedefs`` | the case waits for its setup |
| ``cached_value`` | ``FixtureDef.cached_result`` | the fixture counts as not set up yet |
| ``xdist_pending`` | pytest-xdist's ``WorkerInteractor.torun.lock()`` | a worker looks one item ahead |
| ``shared_fixtureinfo`` | ``session._fixturemanager.getfixtureinfo`` | each case resolves its own fixtures |
| ``session_items`` | ``session.items`` (not set on pytest 7's xdist controller) | a stopped run counts as incomplete |

It also keeps the cyclic garbage collector off the collected items for the
session (``gc.freeze``) and gives them back afterwards: that relies on the
order in which pytest runs its config cleanups (see :func:`arm_gc_freeze`).
"""

from __future__ import annotations

import atexit
import gc
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from pytest_rageval.errors import RagevalWarning

__all__ = [
    "NOTHING",
    "CompatWarning",
    "arm_gc_freeze",
    "cached_value",
    "fixture_defs",
    "freeze_collected",
    "is_xdist_worker",
    "session_items",
    "shared_fixtureinfo",
    "skip_decided_by_marks",
    "xdist_pending",
]

#: A fixture value that is not known yet.
NOTHING: Any = object()

_warned_key = pytest.StashKey[set[str]]()
#: a config attribute, present once armed, True while this session's freeze is in force. Not a StashKey: a key is
#: one module object's, and pytester's in-process runs can leave two copies of this module in one process
#: (one imported before a run's module snapshot, one re-imported in it), each with a key of its own.
_FROZEN = "_rageval_gc_frozen"


class CompatWarning(RagevalWarning, pytest.PytestWarning):
    """pytest-rageval fell back because a pytest or pytest-xdist internal it relies on is missing."""


def _warn_once(config: pytest.Config, internal: str, cost: str) -> None:
    """One CompatWarning per session and internal: ``<internal> is missing ...: <cost>``."""
    warned = config.stash.setdefault(_warned_key, set())
    if internal in warned:
        return
    warned.add(internal)
    warnings.warn(
        CompatWarning(f"pytest-rageval: {internal} is missing in this pytest / pytest-xdist version; {cost}"),
        stacklevel=3,
    )


# --------------------------------------------------------------------------- pytest


def skip_decided_by_marks(item: pytest.Item) -> bool:
    """Whether pytest will skip ``item`` by its skip/skipif/xfail(run=False) marks, or may (then nothing is sent
    for it before its setup). A condition that raises counts as "may": setup reports it."""
    try:
        from _pytest.skipping import evaluate_skip_marks, evaluate_xfail_marks
    except ImportError:
        _warn_once(
            item.config,
            "_pytest.skipping.evaluate_skip_marks",
            "no case is started before its setup (cases run one at a time, not --rageval-concurrency at once)",
        )
        return True
    try:
        if evaluate_skip_marks(item) is not None:
            return True
        xfailed = evaluate_xfail_marks(item)
        return xfailed is not None and not xfailed.run
    except Exception:  # a skipif condition raised: let setup report it
        return True


def fixture_defs(item: pytest.Item, name: str) -> list[Any] | None:
    """The FixtureDefs ``name`` resolves to for ``item`` (the last one wins), [] for none; None when unknown."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", None)
    if not isinstance(defs, dict):
        _warn_once(
            item.config,
            "pytest.Function._fixtureinfo.name2fixturedefs",
            "cases whose fixtures cannot be told apart wait for their setup (run one at a time)",
        )
        return None
    return list(defs.get(name) or ())


def cached_value(config: pytest.Config, fixturedef: Any) -> Any:
    """A session fixture's value if it is set up already (and did not raise), else NOTHING."""
    if getattr(fixturedef, "scope", None) != "session":
        return NOTHING
    if not hasattr(fixturedef, "cached_result"):
        _warn_once(
            config,
            "FixtureDef.cached_result",
            "session fixtures count as not set up yet, so cases that use conftest fixtures wait for their setup",
        )
        return NOTHING
    cached = fixturedef.cached_result
    if isinstance(cached, tuple) and len(cached) == 3 and cached[2] is None:
        return cached[0]
    return NOTHING


def shared_fixtureinfo(collector: pytest.Collector, func: Callable[..., Any]) -> Any:
    """One fixture closure of ``func`` for every item of ``collector`` (as pytest does for a parametrized function);
    None when pytest's fixture manager does not offer it (then each item resolves its own)."""
    manager = getattr(collector.session, "_fixturemanager", None)
    getfixtureinfo = getattr(manager, "getfixtureinfo", None)
    if getfixtureinfo is None:
        _warn_once(
            collector.config,
            "Session._fixturemanager.getfixtureinfo",
            "each case resolves its own fixtures, so collecting a large eval set is slower",
        )
        return None
    try:
        return getfixtureinfo(node=collector, func=func, cls=None)
    except TypeError:  # another signature
        _warn_once(
            collector.config,
            "FixtureManager.getfixtureinfo(node, func, cls)",
            "each case resolves its own fixtures, so collecting a large eval set is slower",
        )
        return None


def session_items(session: pytest.Session) -> list[pytest.Item] | None:
    """The items this process runs; None where pytest keeps none (pytest 7 on the xdist controller)."""
    items = getattr(session, "items", None)
    if items is None:
        _warn_once(
            session.config,
            "Session.items",
            "a run stopped by -x or --maxfail counts as incomplete even when its last case ran",
        )
    return items


def arm_gc_freeze(config: pytest.Config) -> None:
    """Allow :func:`freeze_collected` this session, and undo it when the session's config is cleaned up.

    Call it from a ``tryfirst`` ``pytest_configure``: pytest runs config cleanups last registered first, so
    the unfreeze registered here runs after the cleanups pytest's own plugins register in their
    ``pytest_configure`` (pytest 8.4 and later: five ``gc.collect`` passes of the unraisableexception plugin),
    which thus still skip the frozen items. Unfreezing before them (at ``pytest_unconfigure``) made those passes
    scan every item: 2.6x the collection time of 50,000 parametrized tests for a 50,000-line eval set. The
    interpreter's last collection at exit would scan and free them all too: an exit handler freezes again.
    """
    setattr(config, _FROZEN, False)
    config.add_cleanup(lambda: _unfreeze(config))


def freeze_collected(config: pytest.Config) -> None:
    """Move every object tracked now (the collected items above all) out of the cyclic GC's reach until
    the end of the session (``gc.freeze``). Only when armed and when nothing else has frozen objects, so
    the unfreeze gives back exactly what this session froze."""
    if getattr(config, _FROZEN, True) or gc.get_freeze_count():
        return
    gc.freeze()
    setattr(config, _FROZEN, True)


#: Whether an exit handler freezes everything again: at interpreter exit nothing needs freeing, and the
#: interpreter's last collection would otherwise scan and free every unfrozen item (seconds for 50,000).
_refreeze_at_exit = False


def _unfreeze(config: pytest.Config) -> None:
    """Give this session's frozen objects back to the cyclic GC (a later session in this process, pytester's
    in-process runs among them, may collect them)."""
    global _refreeze_at_exit
    if getattr(config, _FROZEN, False):
        setattr(config, _FROZEN, False)
        gc.unfreeze()
        if not _refreeze_at_exit:
            _refreeze_at_exit = True
            atexit.register(gc.freeze)


# --------------------------------------------------------------------------- pytest-xdist


def is_xdist_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker (xdist's documented ``config.workerinput``)."""
    return hasattr(config, "workerinput")


def xdist_pending(config: pytest.Config) -> list[int] | None:
    """Indices of the items this xdist worker has been sent but not started; None when unknown.

    Reads pytest-xdist's ``WorkerInteractor.torun``: its ``TestQueue`` under ``lock()`` (pytest-xdist 3.7
    and later), or the ``queue.Queue`` of earlier versions under its ``mutex``.
    """
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ != "WorkerInteractor":
            continue
        pending = _queued(getattr(plugin, "torun", None))
        if pending is not None:
            return [i for i in pending if isinstance(i, int)]
        break
    _warn_once(
        config,
        "pytest-xdist's WorkerInteractor.torun.lock() (or its queue's mutex)",
        "each worker starts only its current and next case ahead, not --rageval-concurrency of them",
    )
    return None


def _queued(torun: Any) -> list[Any] | None:
    """A copy of what xdist's queue holds, taken under its lock; None when it cannot be read."""
    try:
        lock = getattr(torun, "lock", None)
        if lock is not None:
            with lock() as items:
                return list(items)
        mutex, items = getattr(torun, "mutex", None), getattr(torun, "queue", None)
        if mutex is not None and items is not None:
            with mutex:
                return list(items)
    except Exception:  # another shape: say so once, start fewer ahead
        return None
    return None
