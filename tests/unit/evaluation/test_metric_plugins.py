"""Metrics from outside the package: the ``pytest_rageval_metrics`` hook of a conftest.py and the
``pytest_rageval.metrics`` entry points of an installed distribution, in pytest (serially and under ``-n 2``) and
in the ``rageval`` command; each mistake one line and a usage error's exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_rageval.evaluation import external_metrics, registry
from pytest_rageval.evaluation.external_metrics import MetricPluginError, load_entry_points, register_returned
from pytest_rageval.evaluation.registry import Metric

#: the package's checkout, and the PYTHONPATH this suite was started with (before a test adds a folder)
WORKTREE = str(Path(__file__).resolve().parents[3])
OUTER_PYTHONPATH = os.environ.get("PYTHONPATH", "")

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}

#: A callable target: the gold chunk first for q-first, second for q-second.
RAG = """
def ask(question, params):
    gold = {"rel_path": "docs/a.md", "heading_path": "# A"}
    other = {"rel_path": "docs/b.md", "heading_path": "# B"}
    chunks = [gold, other] if question == "q-first" else [other, gold]
    return {"answer": "An answer.", "references": [gold], "debug": {"retrieved_chunks": chunks}}
"""

#: A team's metric module: the scoring function, the metric, and the function an entry point names.
METRIC_MODULE = '''
from pytest_rageval.evaluation.registry import Metric


def top_is_gold(case, response, ctx):
    """1 when the first retrieved chunk matches a gold item."""
    return int(bool(ctx.top) and bool(ctx.top[0]))


TOP_IS_GOLD = Metric(
    name="top_is_gold", kind="deterministic", scale=(0.0, 1.0), direction="higher",
    applies_to="gold", aggregate_kind="avg", score=top_is_gold,
)


def metrics():
    return [TOP_IS_GOLD]
'''

#: What docs/how-to/own-metric.md tells a user to write in conftest.py.
CONFTEST = '''
from pytest_rageval import Metric


def top_is_gold(case, response, ctx):
    """1 when the first retrieved chunk matches a gold item."""
    return int(bool(ctx.top) and bool(ctx.top[0]))


def pytest_rageval_metrics():
    return [
        Metric(
            name="top_is_gold", kind="deterministic", scale=(0.0, 1.0), direction="higher",
            applies_to="gold", aggregate_kind="avg", score=top_is_gold,
        )
    ]
'''


def make_project(pytester: pytest.Pytester, *, threshold: bool = True) -> None:
    """Two gold cases answered by a callable target; the second asks top_is_gold >= 1 (a metric the package lacks)."""
    second: dict[str, Any] = {"id": "second", "question": "q-second", "gold_supports": [GOLD]}
    if threshold:
        second["thresholds"] = {"top_is_gold": 1}
    cases = [{"id": "first", "question": "q-first", "gold_supports": [GOLD]}, second]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in cases) + "\n"})
    pytester.makepyfile(rag=RAG)


def run_rageval(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """``pytest --rageval`` in a new process (a metric registered there never reaches this process's registry)."""
    return pytester.runpytest_subprocess(
        "--rageval", "--rageval-judge=none", "--rageval-target=rag:ask", "-p", "no:cacheprovider", *args
    )


def latest_run(folder: Path) -> Path:
    return folder / (folder / "latest").read_text().strip()


def assert_scored(run_dir: Path) -> None:
    """top_is_gold per case in results.jsonl and its aggregate in metrics.json."""
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert {r["test_case_id"]: r["metrics"]["top_is_gold"] for r in records} == {"first": 1, "second": 0}
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["aggregate_metrics"]["top_is_gold_avg"] == 0.5


def one_error_line(result: pytest.RunResult) -> str:
    """The run stopped with a usage error (exit status 4) of one line, no traceback; returns the line."""
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "Traceback" not in output and "[gw" not in output, output
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, output
    return errors[0]


# --------------------------------------------------------------------------- a distribution on disk


def install(site: Path, name: str, module: str, entry_points: dict[str, str]) -> Path:
    """``name`` 1.0 installed in ``site``: its module and a dist-info folder with METADATA and entry_points.txt,
    as importlib.metadata finds an installed distribution."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{name}.py").write_text(module, encoding="utf-8")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    lines = "".join(f"{ep} = {value}\n" for ep, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{external_metrics.ENTRY_POINT_GROUP}]\n{lines}", encoding="utf-8")
    return site


def on_pythonpath(monkeypatch: pytest.MonkeyPatch, *folders: Path) -> None:
    """The processes started from now on find ``folders`` (and this worktree) on sys.path."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([*map(str, folders), WORKTREE, *([OUTER_PYTHONPATH] if OUTER_PYTHONPATH else [])])
    )


def rageval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


# --------------------------------------------------------------------------- the hook in a conftest.py


def test_a_conftest_hook_adds_a_metric_serially_and_under_xdist(pytester: pytest.Pytester, xdist: list[str]) -> None:
    """The metric is scored and thresholded where cases run (each xdist worker) and aggregated where results are
    kept (the controller)."""
    make_project(pytester)
    pytester.makeconftest(CONFTEST)
    result = run_rageval(pytester, *xdist)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "top_is_gold = 0 (needs >= 1)" in out
    if xdist:
        assert "created: 2/2 workers" in out, out
    assert_scored(latest_run(pytester.path / "results"))


def test_without_the_hook_the_metric_is_unknown(pytester: pytest.Pytester) -> None:
    """The same project without the conftest: a threshold on top_is_gold names an unknown metric (the hook is
    what made it known above)."""
    make_project(pytester)
    result = run_rageval(pytester)
    result.assert_outcomes(passed=1, errors=1)
    assert "eval_sets/s.jsonl:2: field 'thresholds': unknown metric 'top_is_gold'" in result.stdout.str()


@pytest.mark.parametrize(
    ("returns", "message"),
    [
        (
            "[Metric(name='mrr', kind='deterministic', scale=(0.0, 1.0), direction='higher', "
            "applies_to='gold', aggregate_kind='avg', score=lambda c, r, x: 1)]",
            ": metric 'mrr' clashes with the built-in metric of that name",
        ),
        (
            "[Metric(name='mrr_avg', kind='deterministic', scale=(0.0, 1.0), direction='higher', "
            "applies_to='gold', aggregate_kind='rate', aggregate='mrr_avg', score=lambda c, r, x: 1)]",
            ": the aggregate 'mrr_avg' of metric 'mrr_avg' is taken by the built-in metric 'mrr'",
        ),
        ("'top_is_gold'", ": expected a Metric or a list of Metrics, got 'top_is_gold' (str)"),
        (
            "[Metric(name='tone', kind='judge', scale=(0.0, 1.0), direction='higher', applies_to='answered', aggregate_kind='avg')]",
            ": metric 'tone' is a judge metric; only deterministic metrics can be added",
        ),
        (
            "[Metric(name='nothing', kind='deterministic', scale=(0.0, 1.0), direction='higher', applies_to='all')]",
            " raised ValueError: metric 'nothing': a deterministic metric needs a score function, others have none",
        ),
    ],
    ids=["built-in-name", "built-in-aggregate", "not-a-metric", "judge-metric", "metric-raises"],
)
def test_a_conftest_hook_that_returns_a_wrong_metric_is_one_usage_error(
    pytester: pytest.Pytester, returns: str, message: str
) -> None:
    make_project(pytester, threshold=False)
    pytester.makeconftest(
        f"from pytest_rageval.evaluation.registry import Metric\n\ndef pytest_rageval_metrics(config):\n    return {returns}\n"
    )
    assert (
        one_error_line(run_rageval(pytester)) == f"ERROR: pytest-rageval: conftest.py: pytest_rageval_metrics{message}"
    )
    assert not (pytester.path / "results").exists()  # stopped before the run folder was made


# --------------------------------------------------------------------------- an entry point of an installed distribution


@pytest.fixture
def team_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``teammetrics`` installed in a folder on the PYTHONPATH of the processes a test starts."""
    site = install(tmp_path / "site", "teammetrics", METRIC_MODULE, {"top_is_gold": "teammetrics:metrics"})
    on_pythonpath(monkeypatch, site)
    return site


def test_an_entry_point_metric_is_scored_by_pytest_and_aggregated_by_the_rageval_command(
    pytester: pytest.Pytester, team_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)  # no conftest: the installed distribution alone adds the metric
    result = run_rageval(pytester)
    result.assert_outcomes(passed=1, failed=1)
    run_dir = latest_run(pytester.path / "results")
    assert_scored(run_dir)

    merged = rageval("merge", str(run_dir), "-o", "merged", cwd=pytester.path)
    assert merged.returncode == 0, merged.stderr
    assert_scored(latest_run(pytester.path / "merged"))

    on_pythonpath(monkeypatch)  # the same command without the distribution: the per-case values stay, no aggregate
    bare = rageval("merge", str(run_dir), "-o", "bare", cwd=pytester.path)
    assert bare.returncode == 0, bare.stderr
    assert (
        "top_is_gold_avg"
        not in json.loads((latest_run(pytester.path / "bare") / "metrics.json").read_text())["aggregate_metrics"]
    )


def test_an_entry_point_metric_reaches_xdist_workers(pytester: pytest.Pytester, team_site: Path) -> None:
    make_project(pytester)
    result = run_rageval(pytester, "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    assert "created: 2/2 workers" in result.stdout.str()
    assert_scored(latest_run(pytester.path / "results"))


def test_a_conftest_hook_may_return_the_entry_points_metric_again(pytester: pytest.Pytester, team_site: Path) -> None:
    """The same metric from both: the second registration is a no-op."""
    make_project(pytester)
    pytester.makeconftest("import teammetrics\n\ndef pytest_rageval_metrics():\n    return teammetrics.TOP_IS_GOLD\n")
    run_rageval(pytester).assert_outcomes(passed=1, failed=1)
    assert_scored(latest_run(pytester.path / "results"))


BROKEN = [
    (
        "raise ImportError('no module named scorer_backend')\n",
        "cannot load it: ImportError: no module named scorer_backend",
    ),
    ("def metrics():\n    return 42\n", "expected a Metric or a list of Metrics, got 42 (int)"),
    (
        "def metrics():\n    return [object()]\n",
        "expected a Metric or a list of Metrics, got an item <object object at",
    ),
    (
        "def metrics():\n    raise RuntimeError('no config\\nsecond line')\n",
        "calling it raised RuntimeError: no config",
    ),
    (
        "from pytest_rageval.evaluation.registry import Metric\n"
        "def metrics():\n    return Metric(name='recall_at_k', kind='deterministic', scale=(0.0, 1.0), direction='higher', "
        "applies_to='gold', aggregate_kind='avg', score=lambda c, r, x: 1)\n",
        "metric 'recall_at_k' clashes with the built-in metric of that name",
    ),
]
BROKEN_IDS = ["import-error", "not-a-metric", "not-a-metric-item", "raises", "built-in-name"]
LABEL = (
    "entry point 'broken = brokenmetrics:metrics' (distribution brokenmetrics 1.0) of group pytest_rageval.metrics: "
)


@pytest.mark.parametrize(("module", "problem"), BROKEN, ids=BROKEN_IDS)
def test_a_broken_entry_point_is_one_line_in_pytest_and_the_command(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, problem: str
) -> None:
    on_pythonpath(monkeypatch, install(tmp_path / "site", "brokenmetrics", module, {"broken": "brokenmetrics:metrics"}))
    make_project(pytester, threshold=False)
    line = one_error_line(run_rageval(pytester))
    assert line.startswith(f"ERROR: pytest-rageval: {LABEL}{problem}"), line
    assert not (pytester.path / "results").exists()

    command = rageval("history", "results", cwd=pytester.path)
    assert command.returncode == 2 and command.stdout == ""
    assert command.stderr.splitlines() == [command.stderr.strip()]
    assert command.stderr.startswith(f"rageval: {LABEL}{problem}"), command.stderr


# --------------------------------------------------------------------------- in this process


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry and the loader's record of origins as they are; restored afterwards."""
    monkeypatch.setattr(registry, "METRICS", list(registry.METRICS))
    monkeypatch.setattr(external_metrics, "_ORIGINS", {})
    yield


def scored(name: str, **fields: Any) -> Metric:
    return Metric(
        name=name,
        kind="deterministic",
        scale=(0.0, 1.0),
        direction="higher",
        applies_to="all",
        aggregate_kind="avg",
        score=lambda c, r, x: 1,
        **fields,
    )


@pytest.mark.usefixtures("own_registry")
def test_what_a_plugin_returns_is_registered_once_and_a_clash_names_the_first_source() -> None:
    assert register_returned("a", None) == ()
    assert register_returned("a", (m for m in [scored("one"), scored("two")])) == (scored("one"), scored("two"))
    assert register_returned("b", [scored("one")]) == (scored("one"),)  # equal: a no-op
    assert register_returned("b", registry.get("mrr")) == (registry.get("mrr"),)  # a built-in one, equal: a no-op too
    assert registry.metric_names("deterministic").count("one") == 1
    with pytest.raises(MetricPluginError, match=r"^c: metric 'two' clashes with the metric of a of that name$"):
        register_returned("c", [scored("three"), scored("two", default_threshold=0.5)])
    assert registry.get("three") is None  # nothing of a refused return is registered
    with pytest.raises(MetricPluginError, match=r"^d: two different metrics named 'four'$"):
        register_returned("d", [scored("four"), scored("four", default_threshold=0.5)])
    registry.register(scored("five"))
    with pytest.raises(MetricPluginError, match="'mrr' clashes with the built-in metric"):
        register_returned("g", scored("mrr"))
    with pytest.raises(MetricPluginError, match="clashes with the metric registered with register"):
        register_returned("e", scored("five", tolerance=0.1))
    with pytest.raises(MetricPluginError, match=r"got \{'name': 'six'\} \(dict\)"):
        register_returned("f", {"name": "six"})


@pytest.mark.usefixtures("own_registry")
def test_entry_points_load_in_name_order_and_again_as_no_ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = (
        "from pytest_rageval.evaluation.registry import Metric\n"
        "ONE = Metric(name='ep_one', kind='deterministic', scale=(0.0, 1.0), direction='higher', "
        "applies_to='all', aggregate_kind='avg', score=lambda c, r, x: 1)\n"
        "def two():\n"
        "    return [Metric(name='ep_two', kind='deterministic', scale=(0.0, 1.0), direction='higher', "
        "applies_to='all', aggregate_kind='rate', score=lambda c, r, x: 1)]\n"
    )
    site = install(
        tmp_path / "site",
        "orderedmetrics_ep",
        module,
        {"b_two": "orderedmetrics_ep:two", "a_one": "orderedmetrics_ep:ONE"},
    )
    monkeypatch.syspath_prepend(str(site))
    before = registry.metric_names("deterministic")
    try:
        first = [m.name for m in load_entry_points() if m.name.startswith("ep_")]
        assert first == ["ep_one", "ep_two"]  # a_one before b_two
        assert registry.metric_names("deterministic") == (*before, "ep_one", "ep_two")
        load_entry_points()
        assert registry.metric_names("deterministic") == (*before, "ep_one", "ep_two")
    finally:
        sys.modules.pop("orderedmetrics_ep", None)
