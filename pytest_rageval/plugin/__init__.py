"""plugin: the pytest surface. This module is the ``pytest11`` entry point (options, ini keys, markers and fixtures);
its modules hold the session's plugin objects, the case runner, the run controller and the parts it orchestrates
(run folder setup, preflight, intake, spot check, gating, writing, the xdist link), the settings and the judge factory.

May import everything below it (foundations, evaluation, targets, judges, gate, runs, report); only cli/ imports it.

Every pytest run imports this module wherever the plugin is installed, so it
imports nothing heavy. Without ``--rageval`` it only registers options, markers
and the plugin's hooks (hookspecs.py); with it, ``pytest_configure`` registers the
metrics of the entry points and of the ``pytest_rageval_metrics`` hook and the judges
of the ``pytest_rageval_judges`` hook (extension_hooks.py), then the plugin objects of
this process's part (session.py decides which).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import pytest

from pytest_rageval import defaults
from pytest_rageval.defaults import INI_KEYS

if TYPE_CHECKING:  # types only: the plugin module imports nothing heavy
    from .handwritten import SessionClient
    from .judge_factory import SessionJudge

IniType = Literal["string", "linelist", "bool"]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The plugin's own hooks (``pytest_rageval_metrics``, ``pytest_rageval_judges``, ``pytest_rageval_run_fields``),
    as pytest-xdist and pytest-html add theirs."""
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rageval", "RAG evaluation (pytest-rageval)")
    group.addoption("--rageval", action="store_true", default=False, help="collect eval sets (*.jsonl) as tests and write run artifacts")
    group.addoption(
        "--rageval-target", default=None, metavar="URL|MODULE:CALLABLE", help="system under test (ini rageval_target, env RAGEVAL_TARGET)"
    )
    group.addoption("--rageval-k", default=None, type=int, metavar="K", help=f"how many retrieved chunks count (ini rageval_k, default {defaults.K})")
    group.addoption(
        "--rageval-output", default=None, metavar="DIR", help=f"folder of run artifacts (ini rageval_output, default {defaults.OUTPUT_DIR})"
    )
    group.addoption(
        "--rageval-baseline", default=None, metavar="PATH", help="baseline metrics.json or run folder to compare with (ini rageval_baseline)"
    )
    group.addoption(
        "--rageval-update-baseline", action="store_true", default=False, help="write this run's metrics.json to the baseline path instead of gating"
    )
    group.addoption("--rageval-allow-regressions", action="store_true", default=False, help="report baseline regressions without failing the session")
    group.addoption(
        "--rageval-ignore-invariants", action="store_true", default=False, help="compare with a baseline even if its eval set or judge differ"
    )
    group.addoption(
        "--rageval-gate-significance", action="store_true", default=False, help="fail only drops whose 95%% paired-bootstrap interval excludes zero"
    )
    group.addoption(
        "--rageval-threshold", action="append", default=[], metavar="METRIC=VALUE", help="override a threshold for every case (repeatable)"
    )
    group.addoption(
        "--rageval-store-full-text", action="store_true", default=False, help="store full chunk text in results.jsonl (default: first 200 characters)"
    )
    group.addoption("--rageval-retrieval-only", action="store_true", default=False, help="run without judge metrics")
    group.addoption(
        "--rageval-concurrency",
        default=None,
        type=int,
        metavar="N",
        help="cases in flight at once in this process, RAG and judge requests included (default: adaptive per endpoint, "
        f"from {defaults.CONCURRENCY} up to ini rageval_max_concurrency, {defaults.MAX_CONCURRENCY})",
    )
    group.addoption(
        "--rageval-repeat",
        default=None,
        metavar="N",
        help="run each judge-dependent case N times (every case without a judge), pass on majority, class it stable_pass/flaky/stable_fail; a case's own repeat wins (ini rageval_repeat)",
    )
    group.addoption(
        "--rageval-shard", default=None, metavar="I/N", help="run share I of N of the cases (by a hash of file and id), for CI matrix jobs"
    )
    group.addoption(
        "--rageval-summary-md",
        default=None,
        metavar="PATH",
        help="write a short Markdown summary of the run for CI (also appended to $GITHUB_STEP_SUMMARY when set)",
    )
    group.addoption("--rageval-resume", default=None, metavar="RUN", help="finish an interrupted run folder: run only the cases it lacks")
    group.addoption(
        "--rageval-matrix",
        default=None,
        metavar="AXES",
        help="run every case under every config, e.g. 'top_k=5,10;alpha=0.0,0.5' (wins over [tool.rageval.matrix])",
    )
    group.addoption("--rageval-rank-by", default=None, metavar="METRIC", help="aggregate the matrix's configs are ranked by (ini rageval_rank_by)")
    group.addoption(
        "--rageval-judge",
        default=None,
        metavar="NAME",
        help="judge in use (ini rageval_judge): auto (openai when a judge model is configured, else lexical), openai, lexical, "
        "none, or the name of a judge of the pytest_rageval_judges hook",
    )
    group.addoption("--rageval-judge-model", default=None, metavar="MODEL", help="model of the OpenAI-compatible judge (ini rageval_judge_model)")
    group.addoption("--rageval-judge-base-url", default=None, metavar="URL", help="judge endpoint (ini rageval_judge_base_url, env OPENAI_BASE_URL)")
    group.addoption(
        "--rageval-cache-dir", default=None, metavar="DIR", help=f"judge cache folder (ini rageval_cache_dir, default {defaults.CACHE_DIR})"
    )
    group.addoption("--rageval-no-cache", action="store_true", default=False, help="neither read nor write the judge cache")
    group.addoption("--rageval-clear-cache", action="store_true", default=False, help="empty the judge cache before the run")
    group.addoption(
        "--rageval-judge-check", action="store_true", default=False, help="first check that the judge tells a faithful from a hallucinated answer"
    )
    group.addoption(
        "--rageval-dry-run", action="store_true", default=False, help="print the planned RAG and judge requests, tokens and cost; send none"
    )
    group.addoption("--rageval-max-judge-cost", default=None, type=float, metavar="USD", help="stop judging once this much is spent (per process)")
    group.addoption("--rageval-spot-check", default=0, type=int, metavar="N", help="re-judge N random cases with --rageval-spot-check-model")
    group.addoption("--rageval-spot-check-model", default=None, metavar="MODEL", help="second judge model for the spot check")
    for name, help_text, kind, default in INI_KEYS:
        parser.addini(name, help_text, type=kind, default=default)


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
    start_session(config, INI_KEYS)


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
