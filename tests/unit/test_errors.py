"""One error hierarchy: every exception the package raises for the user is a ``RagevalError`` (a configuration
mistake a ``ConfigError``, an unusable file a ``DataError``), every warning a ``RagevalWarning``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import pytest_rageval
from pytest_rageval import BaselineError, ConfigError, DataError, RagevalError, RagevalWarning
from pytest_rageval.gate.baseline_file import load_baseline

#: Signals between the package's own parts, caught where they are raised and never shown as they are.
INTERNAL = {"Abandoned", "NotStarted", "BodyRefused", "TargetMismatch", "BadRequest", "_OverBudget", "BadMessage"}


def defined_classes() -> list[type]:
    found: list[type] = []
    for info in pkgutil.walk_packages(pytest_rageval.__path__, "pytest_rageval."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        found += [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == info.name]
    return found


def test_every_error_and_warning_has_the_one_root() -> None:
    classes = defined_classes()
    warnings = [c for c in classes if issubclass(c, Warning)]
    errors = [
        c for c in classes if issubclass(c, Exception) and not issubclass(c, Warning) and c.__name__ not in INTERNAL
    ]
    assert len(errors) >= 20 and warnings
    assert [c.__qualname__ for c in errors if not issubclass(c, RagevalError)] == []
    assert [c.__qualname__ for c in warnings if not issubclass(c, RagevalWarning)] == []


@pytest.mark.parametrize(
    ("module", "name", "root"),
    [
        ("pytest_rageval.evaluation.thresholds", "ThresholdError", ConfigError),
        ("pytest_rageval.evaluation.matrix", "MatrixError", ConfigError),
        ("pytest_rageval.targets.protocol", "RagConfigError", ConfigError),
        ("pytest_rageval.runs.folder", "RunFolderError", DataError),
        ("pytest_rageval.judges.cache", "JudgeCacheError", DataError),
    ],
)
def test_each_kind_sits_under_its_branch(module: str, name: str, root: type) -> None:
    assert issubclass(getattr(importlib.import_module(module), name), root)


def test_a_file_that_is_no_metrics_json_is_a_baseline_error(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text('{"cases": {}}')
    with pytest.raises(BaselineError, match=r"not a metrics\.json"):
        load_baseline(path)
