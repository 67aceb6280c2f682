"""compat.py: a missing pytest or pytest-xdist internal costs concurrency, never the run, and is named once.

Each test removes one internal from the real object in the run under test
(a conftest), runs real cases, and checks that every case still passes and that
the run shows one CompatWarning naming what was missing.
"""

from __future__ import annotations

import gc
import importlib.util
import json

import pytest
from needs import need_module

RAG = (
    "def ask(question, params):\n"
    "    return {'answer': 'A answer.', 'debug': {'retrieved_chunks': [{'rel_path': 'docs/a.md', 'heading_path': '# A'}]}}\n"
)
CASES = 6


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """Six cases answered by a callable target, judge none."""
    lines = [
        json.dumps(
            {"id": f"c{i}", "question": f"q{i}", "gold_supports": [{"rel_path": "docs/a.md", "heading_path": "# A"}]}
        )
        for i in range(CASES)
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(lines) + "\n"})
    pytester.makepyfile(rag=RAG)
    pytester.syspathinsert()
    return pytester


def run(project: pytest.Pytester, *args: str) -> str:
    result = project.runpytest(
        "--rageval", "--rageval-judge=none", "--rageval-target=rag:ask", "-p", "no:cacheprovider", *args
    )
    output = result.stdout.str()
    result.assert_outcomes(passed=CASES)
    assert result.ret == pytest.ExitCode.OK, output
    return output


def test_without_the_fixture_info_of_an_item_cases_wait_for_their_setup(project: pytest.Pytester) -> None:
    # Each item's fixture info seen without name2fixturedefs (pytest itself still needs the rest of it).
    project.makeconftest(
        "class Hidden:\n"
        "    def __init__(self, info):\n"
        "        self._info = info\n"
        "    def __getattr__(self, name):\n"
        "        if name == 'name2fixturedefs':\n"
        "            raise AttributeError(name)\n"
        "        return getattr(self._info, name)\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        item._fixtureinfo = Hidden(item._fixtureinfo)\n"
    )
    output = run(project)
    assert (
        output.count("CompatWarning: pytest-rageval: pytest.Function._fixtureinfo.name2fixturedefs is missing") == 1
    ), output
    assert "wait for their setup (run one at a time)" in output


def test_without_xdists_queue_lock_a_worker_looks_one_item_ahead(project: pytest.Pytester) -> None:
    need_module("xdist")
    # In each worker (its own process), xdist's queue seen with neither lock() (pytest-xdist 3.7+) nor a
    # mutex (the queue.Queue of 3.6); xdist's own calls still reach the real queue behind it.
    project.makeconftest(
        "class NoLock:\n"
        "    def __init__(self, queue):\n"
        "        self._queue = queue\n"
        "    def __getattr__(self, name):\n"
        "        if name in ('lock', 'mutex'):\n"
        "            raise AttributeError(name)\n"
        "        return getattr(self._queue, name)\n"
        "def pytest_sessionstart(session):\n"
        "    for plugin in session.config.pluginmanager.get_plugins():\n"
        "        if type(plugin).__name__ == 'WorkerInteractor':\n"
        "            plugin.torun = NoLock(plugin.torun)\n"
    )
    output = run(project, "-n", "2")
    # one line in the warnings summary (pytest groups the workers' identical warnings)
    assert (
        output.count(
            "CompatWarning: pytest-rageval: pytest-xdist's WorkerInteractor.torun.lock() (or its queue's mutex) is missing"
        )
        == 1
    ), output
    assert "not --rageval-concurrency of them" in output


def test_with_every_internal_present_nothing_is_said(project: pytest.Pytester) -> None:
    output = run(project, "-n", "2") if importlib.util.find_spec("xdist") else run(project)
    assert "CompatWarning" not in output, output


def test_the_collected_items_go_back_to_the_gc_after_the_session(project: pytest.Pytester) -> None:
    """gc.freeze() keeps the GC off the items during the session (in-process here) and is undone at its end."""
    assert gc.get_freeze_count() == 0, "something in this process froze objects: the test cannot tell"
    frozen = project.path / "frozen"
    project.makeconftest(
        "import gc, pytest\n"
        "@pytest.hookimpl(trylast=True)\n"
        "def pytest_collection_finish(session):\n"
        f"    open({str(frozen)!r}, 'w').write(str(gc.get_freeze_count()))\n"
    )
    run(project)
    assert int(frozen.read_text()) > 0
    assert gc.get_freeze_count() == 0
