"""plugin: the pytest surface. This module is the ``pytest11`` entry point (options, ini keys, markers and fixtures);
its modules hold the session's plugin objects, the case runner, the run controller and the pytest-bound parts it
orchestrates (run folder setup, preflight, the xdist link), and the settings. The work without pytest (evaluating a
case, intake, spot check, gating, writing, the judge factory) is engine/'s.

May import everything below it (foundations, evaluation, targets, judges, gate, runs, report, engine); nothing
imports it but the package's lazy exports (cli/ reads only the settings).

Every pytest run imports this module wherever the plugin is installed, so it
imports nothing heavy. Without ``--rageval`` it only registers options, markers
and the plugin's hooks (hookspecs.py); with it, ``pytest_configure`` registers the
metrics of the entry points and of the ``pytest_rageval_metrics`` hook and the judges
of the ``pytest_rageval_judges`` hook (extension_hooks.py), then the plugin objects of
this process's part (session.py decides which).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_rageval.config.table import SETTINGS, ini_keys

if TYPE_CHECKING:  # types only: the plugin module imports nothing heavy
    from pytest_rageval.engine.judge_factory import SessionJudge

    from .handwritten import SessionClient


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The plugin's own hooks (``pytest_rageval_metrics``, ``pytest_rageval_judges``, ``pytest_rageval_run_fields``),
    as pytest-xdist and pytest-html add theirs."""
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Every option and ini key of the settings table (config/table.py), where each is declared once."""
    group = parser.getgroup("rageval", "RAG evaluation (pytest-rageval)")
    for setting in SETTINGS:
        if setting.option:
            group.addoption(setting.option, **setting.option_attrs())
    for setting in SETTINGS:
        if setting.ini:
            parser.addini(setting.ini, setting.ini_help(), type=setting.ini_type, default=setting.ini_default)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("rageval") and config.getoption("rageval_dry_run") and hasattr(config.option, "dist"):
        config.option.dist = "no"  # a dry run plans in this process; no xdist workers are started
    config.addinivalue_line("markers", "rageval: an eval-set case run by pytest-rageval")
    config.addinivalue_line("markers", "judge: the outcome depends on an LLM judge verdict")
    if not config.getoption("rageval"):
        return
    from .compat import arm_gc_freeze
    from .extension_hooks import register_plugin_judges, register_plugin_metrics
    from .session import start_session

    arm_gc_freeze(config)  # here, before pytest's own plugins register their config cleanups
    register_plugin_metrics(config)  # before the settings: thresholds and gate tolerances may name the metrics
    register_plugin_judges(config)  # and --rageval-judge the judges
    start_session(config, ini_keys())


@pytest.hookimpl(trylast=True)  # after the session's plugin objects' own unconfigure
def pytest_unconfigure(config: pytest.Config) -> None:
    if config.getoption("rageval", False):
        from .session import end_session

        end_session(config)


def _runner(config: pytest.Config) -> Any:
    from .collect import runner_key  # here: collect.py is heavy, and the idle plugin stays light

    runner = config.stash.get(runner_key, None)
    if runner is None:
        pytest.skip("pytest-rageval is not enabled: run pytest with --rageval")
    return runner


@pytest.fixture(scope="session")
def rageval_client(pytestconfig: pytest.Config, rageval_judge: Any) -> SessionClient:
    """The system under test, from ``--rageval-target``: ``ask(question)`` and ``evaluate(question=..., ...)``.

    Override it in conftest.py to supply the target yourself (a URL, a callable, a framework object or a
    client): tests still get this session client around it. Its ``evaluate`` judges with the ``rageval_judge``
    fixture, so a conftest override of that one counts in hand-written tests as it does for eval-set cases.
    """
    client: SessionClient = _runner(pytestconfig).session_client(judge=rageval_judge)
    return client


@pytest.fixture(scope="session")
def rageval_judge(pytestconfig: pytest.Config) -> SessionJudge | None:
    """The judge in use (None without one); ``rageval_judge.judge(metric, question=..., answer=..., contexts=[...])``."""
    judge: SessionJudge | None = _runner(pytestconfig).session_judge()
    return judge
