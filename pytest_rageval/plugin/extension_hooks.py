"""Register the metrics from outside the package before a ``--rageval`` session reads its settings: those of the
``pytest_rageval.metrics`` entry points, then those the ``pytest_rageval_metrics`` hook returns.

Each hook implementation is called on its own, in pluggy's call order, so that a mistake names the conftest.py or
plugin that made it. Any mistake is one usage error (exit status 4) before any case runs.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from pytest_rageval.evaluation.external_metrics import MetricPluginError, load_entry_points, register_returned
from pytest_rageval.sanitize import error_message

HOOK = "pytest_rageval_metrics"


def register_plugin_metrics(config: pytest.Config) -> None:
    """Load the metric entry points and register what each ``pytest_rageval_metrics`` implementation returns."""
    arguments = {"config": config}
    try:
        load_entry_points()
        for impl in reversed(getattr(config.hook, HOOK).get_hookimpls()):  # pluggy calls the last registered first
            if impl.hookwrapper or getattr(impl, "wrapper", False):  # (pluggy < 1.1 has no new-style wrappers)
                continue
            source = f"{_source(impl.plugin, impl.plugin_name, config.rootpath)}: {HOOK}"
            try:
                returned = impl.function(*(arguments[name] for name in impl.argnames))
            except Exception as exc:  # the user's hook failed: one line naming it
                raise MetricPluginError(f"{source} raised {error_message(exc)}") from None
            register_returned(source, returned)
    except MetricPluginError as exc:
        raise pytest.UsageError(f"pytest-rageval: {exc}") from None


def _source(plugin: object, name: str, rootdir: Path) -> str:
    """A conftest.py by its path (relative to the root folder when inside it); a plugin by its registered name and
    module."""
    if not isinstance(plugin, ModuleType):
        return f"plugin {name!r}"
    file = Path(plugin.__file__ or name)
    if file.name == "conftest.py":
        return str(file.relative_to(rootdir)) if file.is_relative_to(rootdir) else str(file)
    return f"plugin module {plugin.__name__}" if name == plugin.__name__ else f"plugin {name!r} (module {plugin.__name__})"
