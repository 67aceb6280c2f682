"""The test suite's own wiring: warm the HTTP transports before the first ``pytester`` run, keep
the suite's runs out of an outer GitHub job's step summary, and start the suite's own pytest runs without the
unrelated pytest plugins that other installed packages bring; mark the tests that start processes ``e2e``.

The project-wide wiring (``pytester``, helper imports) is the root ``conftest.py``.
"""

from collections.abc import Iterator

import httpx
import pytest


def _load_httpx_lazily_imported_modules() -> None:
    """Make one refused loopback request so httpx and httpcore load their lazy modules now.

    ``pytester``'s in-process runs restore ``sys.modules`` afterwards: modules first imported inside
    such a run are dropped, and a later import makes new exception classes that httpx's error mapping
    does not know, so a refused connection would escape as a raw ``httpcore.ConnectError``.
    """
    try:
        httpx.get("http://127.0.0.1:9/", timeout=0.5)
    except httpx.HTTPError:
        pass


def _load_openai_lazily_imported_modules() -> None:
    """The same for the openai SDK's own transport (an async refused chat request, as the judge makes).

    Without it, an in-process pytester run that first used the openai judge leaves later tests with
    transport exception classes the SDK does not map: a timeout escapes as a raw ``ReadTimeout``.
    """
    import asyncio

    import openai

    async def refused() -> None:
        client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="no-key", max_retries=0, timeout=0.5)
        try:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        except openai.APIError:
            pass
        finally:
            await client.close()

    asyncio.run(refused())


@pytest.fixture(scope="session")
def _warm_transports() -> None:
    """Both warm-ups, once per process and only where a test runs pytest in process (a pytester test): other
    tests, and a run of only those, start without them."""
    _load_httpx_lazily_imported_modules()
    _load_openai_lazily_imported_modules()


#: pytest plugins that packages of the dev extra bring and no pytest run started by the suite uses: the hypothesis and
#: langsmith (a LangChain dependency) plugins alone take about two seconds of every pytest start, pytest-benchmark a
#: tenth of one, and each ``-n 2`` run starts three. pytest-randomly shuffles the suite itself, never the projects a
#: test runs, whose output a test reads line by line. ``-p no:NAME`` is a no-op where a plugin is not installed.
UNUSED_PLUGINS = ("hypothesispytest", "langsmith_plugin", "anyio", "platformdirs", "randomly", "benchmark")
BLOCK_UNUSED = " ".join(f"-p no:{name}" for name in UNUSED_PLUGINS)


@pytest.fixture(scope="session", autouse=True)
def _children_block_unused_plugins() -> Iterator[None]:
    """Every pytest process a test or fixture starts (``subprocess`` with this process's environment, the ``rageval``
    commands that run pytest, xdist workers of those runs) blocks :data:`UNUSED_PLUGINS` through ``PYTEST_ADDOPTS``:
    a pytest start with them took 2.9 CPU-seconds against 0.8 without. The suite's own process and workers have read
    their options already. Session-wide, so module-scoped fixtures that build projects get it too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_ADDOPTS", BLOCK_UNUSED)
        yield


@pytest.fixture
def pytester(_warm_transports: None, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's ``pytester`` whose runs (in process, subprocess and their xdist workers) block :data:`UNUSED_PLUGINS`
    (pytester clears ``PYTEST_ADDOPTS`` when it starts; this sets it again), with the transports warmed before
    pytester takes its snapshot of ``sys.modules``."""
    monkeypatch.setenv("PYTEST_ADDOPTS", BLOCK_UNUSED)
    return pytester


#: Fixtures whose tests start processes (pytest runs, a browser): such a test is end to end.
PROCESS_FIXTURES = frozenset({"pytester", "needs_chromium"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e: starts processes (pytest runs, the rageval command, a browser); pytest -m 'not e2e' runs the fast unit tests alone",
    )
    config.addinivalue_line(
        "markers", "slow: takes a quarter of a minute or more; runs first, so under -n it never ends the suite alone"
    )


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle, whose order it keeps otherwise
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that requests a process fixture is marked ``e2e`` (tests that start processes themselves say so).

    ``slow`` tests go first: pytest-xdist hands out the first tests first, so a long one starts at once instead of
    running on alone after every other test has finished (a minute and more added to the suite's wall time)."""
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _no_outer_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's own ``pytest --rageval`` runs must not append to the step summary of a GitHub job running the suite
    (the plugin appends its CI summary to ``$GITHUB_STEP_SUMMARY`` when it is set); tests that want one set it."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
