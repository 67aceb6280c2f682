"""Metrics from outside the package: what a plugin hands over, checked and registered; the entry points loaded.

Two ways in, both ending in :func:`register_returned`:

- the ``pytest_rageval.metrics`` entry point group (:func:`load_entry_points`): each entry point names a
  :class:`~.registry.Metric`, a list of them, or a callable taking no argument that returns either. The pytest
  plugin (with ``--rageval``) and the ``rageval`` command both load the group before anything else;
- the pytest hook ``pytest_rageval_metrics`` (plugin/hookspecs.py), whose results the plugin hands over here.

A mistake (cannot import, a value that is not a Metric, a name or aggregate already taken) is one
:class:`MetricPluginError` whose one-line message names where the metric came from. Loading again registers
nothing new: an equal metric registered twice is a no-op.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points

from pytest_rageval.errors import ConfigError
from pytest_rageval.sanitize import error_message

from . import registry
from .registry import Metric

__all__ = ["ENTRY_POINT_GROUP", "MetricPluginError", "entry_point_label", "load_entry_points", "register_returned"]

#: The entry point group a package lists its metrics under (``[project.entry-points."pytest_rageval.metrics"]``).
ENTRY_POINT_GROUP = "pytest_rageval.metrics"

#: metric name -> where it came from, for the metrics registered here (a clash names the first source)
_ORIGINS: dict[str, str] = {}


class MetricPluginError(ConfigError):
    """A plugin's metrics cannot be used; the message is one line naming the plugin."""


def _described(value: object) -> str:
    """A short description of a returned value that is not a metric."""
    shown = repr(value)
    return f"{shown[:60]}... ({type(value).__name__})" if len(shown) > 60 else f"{shown} ({type(value).__name__})"


def _as_metrics(source: str, returned: object) -> tuple[Metric, ...]:
    """``returned`` as metrics: a Metric, or an iterable (list, tuple, generator) of them; None is none."""
    if returned is None:
        return ()
    if isinstance(returned, Metric):
        return (returned,)
    if isinstance(returned, (str, bytes, Mapping)) or not isinstance(returned, Iterable):
        raise MetricPluginError(f"{source}: expected a Metric or a list of Metrics, got {_described(returned)}")
    found = tuple(returned)
    for item in found:
        if not isinstance(item, Metric):
            raise MetricPluginError(f"{source}: expected a Metric or a list of Metrics, got an item {_described(item)}")
    return found


def _clash(metric: Metric) -> str | None:
    """Why ``metric`` cannot be registered (one line), or None when it can (or an equal one already is)."""
    if metric.kind != "deterministic":
        return f"metric {metric.name!r} is a {metric.kind} metric; only deterministic metrics can be added"
    for existing in registry.metrics():
        if existing.name == metric.name:
            if existing == metric:
                return None
            return f"metric {metric.name!r} clashes with {_origin(existing.name)} of that name"
        if metric.aggregate is not None and existing.aggregate == metric.aggregate:
            return f"the aggregate {metric.aggregate!r} of metric {metric.name!r} is taken by {_origin(existing.name)} {existing.name!r}"
    return None


def _origin(name: str) -> str:
    """Who defined the registered metric ``name``, for a clash message."""
    if name in _ORIGINS:
        return f"the metric of {_ORIGINS[name]}"
    if name in registry.BUILT_IN:
        return "the built-in metric"
    return "the metric registered with register()"


def register_returned(source: str, returned: object) -> tuple[Metric, ...]:
    """Register what a plugin returned (a Metric, an iterable of them, or None); ``source`` names the plugin in
    a :class:`MetricPluginError`. Nothing of a refused return is registered."""
    found = _as_metrics(source, returned)
    for metric in found:
        if any(other.name == metric.name and other != metric for other in found):
            raise MetricPluginError(f"{source}: two different metrics named {metric.name!r}")
        problem = _clash(metric)
        if problem is not None:
            raise MetricPluginError(f"{source}: {problem}")
    for metric in found:
        if registry.get(metric.name) is None:  # else an equal metric is there already: its origin stays
            _ORIGINS[metric.name] = source
        registry.register(metric)
    return found


def entry_point_label(entry_point: EntryPoint) -> str:
    """``entry point 'name = value' (distribution NAME VERSION)``: how an error names an entry point."""
    dist = entry_point.dist
    of = f" (distribution {dist.name} {dist.version})" if dist is not None else ""
    return f"entry point '{entry_point.name} = {entry_point.value}'{of} of group {ENTRY_POINT_GROUP}"


def _load_one(entry_point: EntryPoint) -> tuple[Metric, ...]:
    label = entry_point_label(entry_point)
    try:
        value = entry_point.load()
    except Exception as exc:  # any import-time failure of the user's module is one line, never a traceback
        raise MetricPluginError(f"{label}: cannot load it: {error_message(exc)}") from None
    if callable(value) and not isinstance(value, Metric):
        try:
            value = value()
        except Exception as exc:
            raise MetricPluginError(f"{label}: calling it raised {error_message(exc)}") from None
    return register_returned(label, value)


def load_entry_points() -> tuple[Metric, ...]:
    """Register the metrics of every ``pytest_rageval.metrics`` entry point, in entry point name order; returns
    them. Idempotent: metrics registered before are registered again as no-ops."""
    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name, ep.value))
    return tuple(metric for entry_point in found for metric in _load_one(entry_point))
