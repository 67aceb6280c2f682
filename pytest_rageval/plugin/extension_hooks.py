"""Ask the plugin's own hooks (plugin/hookspecs.py), one implementation at a time, so that a mistake names the
conftest.py or plugin that made it:

- ``pytest_rageval_metrics`` (with the ``pytest_rageval.metrics`` entry points) and ``pytest_rageval_judges``:
  in ``pytest_configure``, before the settings are read; any mistake is one usage error (exit status 4) before
  any case runs;
- ``pytest_rageval_run_fields``: by the run controller at the end of a run (:func:`run_fields`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_rageval.errors import ConfigError
from pytest_rageval.evaluation.external_metrics import MetricPluginError, load_entry_points, register_returned
from pytest_rageval.judges.external_judges import JudgePluginError
from pytest_rageval.judges.external_judges import checked as checked_judges
from pytest_rageval.judges.external_judges import use as use_judges
from pytest_rageval.runs.user_fields import UserFieldsError, joined
from pytest_rageval.runs.user_fields import checked as checked_fields
from pytest_rageval.sanitize import error_message

METRICS_HOOK = "pytest_rageval_metrics"
JUDGES_HOOK = "pytest_rageval_judges"
RUN_FIELDS_HOOK = "pytest_rageval_run_fields"


def _answers(
    config: pytest.Config, hook: str, arguments: Mapping[str, Any], error: type[ConfigError]
) -> Iterator[tuple[str, object]]:
    """(source, returned) of each implementation of ``hook``, in pluggy's call order; one that raises is an
    ``error`` naming it."""
    for impl in reversed(getattr(config.hook, hook).get_hookimpls()):  # pluggy calls the last registered first
        if impl.hookwrapper or getattr(impl, "wrapper", False):  # (pluggy < 1.1 has no new-style wrappers)
            continue
        source = f"{_source(impl.plugin, impl.plugin_name, config.rootpath)}: {hook}"
        try:
            returned = impl.function(*(arguments[name] for name in impl.argnames))
        except Exception as exc:  # the user's hook failed: one line naming it
            raise error(f"{source} raised {error_message(exc)}") from None
        yield source, returned


def register_plugin_metrics(config: pytest.Config) -> None:
    """Load the metric entry points and register what each ``pytest_rageval_metrics`` implementation returns."""
    try:
        load_entry_points()
        for source, returned in _answers(config, METRICS_HOOK, {"config": config}, MetricPluginError):
            register_returned(source, returned)
    except MetricPluginError as exc:
        raise pytest.UsageError(f"pytest-rageval: {exc}") from None


def register_plugin_judges(config: pytest.Config) -> None:
    """Keep the judges every ``pytest_rageval_judges`` implementation returns as this session's."""
    try:
        answers = _answers(config, JUDGES_HOOK, {"config": config}, JudgePluginError)
        use_judges(judge for source, returned in answers for judge in checked_judges(source, returned))
    except JudgePluginError as exc:
        raise pytest.UsageError(f"pytest-rageval: {exc}") from None


def run_fields(config: pytest.Config, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The user section every ``pytest_rageval_run_fields`` implementation returns, joined (``{}``: none);
    a :class:`UserFieldsError` naming the implementation on a mistake."""
    arguments = {"config": config, "metrics": copy.deepcopy(dict(metrics))}
    answers = _answers(config, RUN_FIELDS_HOOK, arguments, UserFieldsError)
    return joined((source, checked_fields(source, returned)) for source, returned in answers)


def _source(plugin: object, name: str, rootdir: Path) -> str:
    """A conftest.py by its path (relative to the root folder when inside it); a plugin by its registered name and
    module."""
    if not isinstance(plugin, ModuleType):
        return f"plugin {name!r}"
    file = Path(plugin.__file__ or name)
    if file.name == "conftest.py":
        return str(file.relative_to(rootdir)) if file.is_relative_to(rootdir) else str(file)
    return (
        f"plugin module {plugin.__name__}" if name == plugin.__name__ else f"plugin {name!r} (module {plugin.__name__})"
    )
