"""The project's own pytest wiring (the test suite and the main job both load it).

- ``pytester`` for the suite's end-to-end runs of the plugin;
- ``tests/helpers/`` on ``sys.path``, so the shared loopback servers (``ask_server``, ``openai_server``,
  ``llama_server``, ``loopback``) and helpers (``needs``, ``browser``) import from any test folder;
- shared fixtures: ``xdist`` (each requesting test runs serially and under ``-n 2``, the way syrupy's
  ``plugin_args`` does), ``demo_url`` (the bundled demo RAG served on a loopback port) and
  ``needs_chromium`` (the headless browser of the report tests).

- the suite on every core: plain ``pytest`` runs under pytest-xdist, one worker more than cores (``-n0`` runs it in one
  process); the main job (``pytest --rageval``) keeps its one process;
- the suite's processes keep the bytecode they compile, even under ``PYTHONDONTWRITEBYTECODE``.

What only the test suite needs (warming the HTTP transports) is in ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

HELPERS = str(Path(__file__).resolve().parent / "tests" / "helpers")
if HELPERS not in sys.path:
    sys.path.insert(0, HELPERS)


def _is_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker."""
    return hasattr(config, "workerinput") or "PYTEST_XDIST_WORKER" in os.environ


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``pytest`` alone runs the suite on every core (pytest-xdist reads ``-n auto`` after this hook), with one
    worker more than cores: many tests wait on the processes they start, and a third worker on two cores fills that
    wait (the suite took 280 s against 310 s with two). A given
    ``-n`` wins, the main job, ``pytest --rageval``, keeps its one process, and an xdist worker (which parses
    the command line again, without ``-n``) starts no workers of its own."""
    if (
        not _is_worker(config)
        and config.pluginmanager.hasplugin("xdist")
        and getattr(config.option, "numprocesses", 0) is None
        and not config.getoption("rageval", False)
    ):
        config.option.numprocesses = "auto"


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` here starts one worker more than the cores this process may use (``PYTEST_XDIST_AUTO_NUM_WORKERS``
    still wins)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + 1


def pytest_configure(config: pytest.Config) -> None:
    """The suite's own processes (xdist workers, the pytest runs and commands its tests start) keep the bytecode
    they compile, in a cache folder of their own when the environment says ``PYTHONDONTWRITEBYTECODE``: else each of
    the suite's some thousand process starts compiles the package again (about 0.3 s of CPU each). The main job
    and an xdist worker leave the environment as it is."""
    if _is_worker(config) or config.getoption("rageval", False) or not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    user = getattr(os, "getuid", lambda: "user")()
    os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), f"pytest-rageval-pycache-{user}"))


@pytest.fixture(params=[[], ["-n", "2"]], ids=["serial", "xdist"])
def xdist(request: pytest.FixtureRequest) -> list[str]:
    """Extra pytest arguments: none, then two pytest-xdist workers (the same scenario both ways)."""
    return list(request.param)


@pytest.fixture(scope="session")
def demo_url() -> Iterator[str]:
    """The bundled demo RAG (``pytest_rageval.demo``) over HTTP on a free loopback port."""
    from pytest_rageval.demo import make_server

    server = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def needs_chromium() -> str:
    """The Chromium binary; skips the test without one (fails it under CI)."""
    from browser import chromium
    from needs import missing

    path = chromium()
    if path is None:
        missing("chromium is not installed (Debian package chromium)")
    return path
