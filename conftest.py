"""The project's own pytest wiring (the test suite and the main job both load it).

- ``pytester`` for the suite's end-to-end runs of the plugin;
- ``tests/`` on ``sys.path``, so the shared loopback servers (``ask_server``, ``openai_server``,
  ``llama_server``, ``loopback``) and helpers (``needs``, ``browser``) import from any test folder.

What only the test suite needs (warming the HTTP transports) is in ``tests/conftest.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

pytest_plugins = ["pytester"]

TESTS = str(Path(__file__).resolve().parent / "tests")
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
