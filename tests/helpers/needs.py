"""Tests that need a real part (a browser, a package, a local model server) skip without it, except in CI.

`.ci/run` installs every such part, so under ``CI`` a missing part is a failure, not a skip: a green CI
can never hide a test that did not run.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    """Skip the test (outside CI) or fail it (CI set): ``reason`` says which part is missing."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so this is a failure: .ci/run must install it", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def need_module(name: str) -> ModuleType:
    """``pytest.importorskip`` that fails under CI."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"{name} is not installed ({exc})")


def need_installed(name: str) -> None:
    """Like :func:`need_module`, without importing it: for tests whose subprocess imports it (a ``pytester`` test
    must not import a package with a C extension in-process: pytester drops it from ``sys.modules`` afterwards,
    and numpy, for one, cannot be imported twice in a process)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(name) is not None
    except ImportError:
        found = False
    if not found:
        missing(f"{name} is not installed")
