"""The apps of ``examples/`` run as a user runs them: ``pytest --rageval`` in a copy of the example's folder.

Each example is a small app over the demo notes, built the way its framework documents (LlamaIndex, LangChain,
LangGraph, Haystack) or a plain HTTP service, with its own pyproject.toml, eval set and committed baseline. For each:
one serial run exits 0, writes every artifact and passes its own baseline, and the ``rageval`` commands read its run
folder; a run with ``-n 2`` passes the same cases; and a change that makes retrieval shallower (its ``TOP_K = 5``
set to 1) fails the gate, naming the cases that flipped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from needs import need_installed

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
]  # each test runs pytest and the rageval command in processes of their own

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: example folder -> (the module that is its target, the packages it imports)
APPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "llamaindex": ("app.py", ("llama_index.core", "llama_index.retrievers.bm25")),
    "langchain": ("app.py", ("langchain_core", "langchain_community", "langchain_text_splitters", "rank_bm25")),
    "langgraph": (
        "app.py",
        ("langgraph", "langchain_core", "langchain_community", "langchain_text_splitters", "rank_bm25"),
    ),
    "haystack": ("app.py", ("haystack",)),
    "http_service": ("service.py", ()),
}

#: pytest plugins of other installed packages that no example uses (as tests/conftest.py blocks for pytester runs)
UNUSED_PLUGINS = ("hypothesispytest", "langsmith_plugin", "anyio", "platformdirs", "randomly", "benchmark")

#: what a user adds on the command line in CI: JUnit, the CI summary, the texts ``rageval rescore`` needs
CI_OPTIONS = ("--junitxml=junit.xml", "--rageval-summary-md=summary.md", "--rageval-store-full-text")


class Example:
    """A copy of one example's folder, with its HTTP service running when it has one."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.folder = folder
        self.service: subprocess.Popen[str] | None = None
        self.target: tuple[str, ...] = ()

    def start(self) -> None:
        if APPS[self.name][0] != "service.py":
            return
        self.service = subprocess.Popen(
            [sys.executable, "service.py", "--port", "0"],
            cwd=self.folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.service.stdout is not None
        line = self.service.stdout.readline()  # "serving on http://127.0.0.1:PORT/api/v1/ask"
        assert line.startswith("serving on http://127.0.0.1:"), (
            line + self.service.stderr.read() if self.service.stderr else line
        )
        self.target = (f"--rageval-target={line.split()[-1]}",)

    def stop(self) -> None:
        if self.service is not None:
            self.service.terminate()
            self.service.communicate(timeout=30)

    def pytest(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--rageval",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
                *self.target,
                *args,
            ],
            self.folder,
        )

    def rageval(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run([sys.executable, "-m", "pytest_rageval.cli", *args], self.folder)

    def runs(self) -> list[Path]:
        return sorted(path.parent for path in (self.folder / "results").glob("*/metrics.json"))

    def cases(self) -> list[str]:
        return [
            json.loads(line)["id"]
            for line in (self.folder / "eval_sets" / "governance.jsonl").read_text().splitlines()
            if line.strip()
        ]


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` in ``cwd``, without the pytest plugins other installed packages bring (two seconds of each start)."""
    env = {**os.environ, "PYTEST_ADDOPTS": " ".join(f"-p no:{name}" for name in UNUSED_PLUGINS)}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def _shown(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}"


@pytest.fixture(params=sorted(APPS))
def example(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Example]:
    """The example copied as a user would check it out (its docs/ link followed), its service started."""
    name: str = request.param
    for module in APPS[name][1]:
        need_installed(module)
    folder = tmp_path / name
    shutil.copytree(EXAMPLES / name, folder, ignore=shutil.ignore_patterns("results", "__pycache__", ".rageval_cache"))
    copy = Example(name, folder)
    copy.start()
    try:
        yield copy
    finally:
        copy.stop()


def test_an_example_passes_writes_every_artifact_and_its_run_folder_is_read(example: Example) -> None:
    result = example.pytest("-n", "0", "--rageval-baseline=baseline/", *CI_OPTIONS)
    assert result.returncode == 0, _shown(result)
    cases = example.cases()
    assert f"{len(cases)} passed" in result.stdout, _shown(result)
    (run,) = example.runs()
    for artifact in ("metrics.json", "results.jsonl", "report.html", "config.json"):
        assert (run / artifact).is_file(), (
            f"{artifact} missing from {sorted(p.name for p in run.iterdir())}\n{_shown(result)}"
        )
    metrics = json.loads((run / "metrics.json").read_text())
    assert (metrics["passed"], metrics["failed"], metrics["errors"]) == (len(cases), 0, 0)
    assert metrics["aggregate_metrics"]["recall_at_k_avg"] == 1
    junit = ET.parse(example.folder / "junit.xml").getroot()
    suite = junit if junit.tag == "testsuite" else junit[0]
    assert (int(suite.get("tests", 0)), int(suite.get("failures", 0)), int(suite.get("errors", 0))) == (
        len(cases),
        0,
        0,
    )
    summary = (example.folder / "summary.md").read_text()
    assert "gate passed" in summary, summary
    for command in (
        ("report", str(run)),
        ("rescore", str(run)),
        ("compare", "baseline", str(run)),
        ("history", "results"),
    ):
        done = example.rageval(*command)
        assert done.returncode == 0, f"rageval {' '.join(command)}: {_shown(done)}"
    assert len(example.runs()) == 2  # the rescored run beside the first


def test_an_example_passes_under_xdist(example: Example) -> None:
    result = example.pytest("-n", "2", "--rageval-baseline=baseline/")
    assert result.returncode == 0, _shown(result)
    assert f"{len(example.cases())} passed" in result.stdout, _shown(result)
    assert " rageval passed: 0 new failures, gate passed " in result.stdout, _shown(
        result
    )  # its own baseline, under xdist too
    (run,) = example.runs()
    for name in ("metrics.json", "results.jsonl", "config.json", "report.html"):
        assert (run / name).is_file(), name


def test_a_shallower_retrieval_fails_an_examples_baseline(example: Example) -> None:
    module = example.folder / APPS[example.name][0]
    source = module.read_text()
    assert source.count("TOP_K = 5") == 1
    module.write_text(source.replace("TOP_K = 5", "TOP_K = 1"))
    example.stop()
    example.start()  # the service runs the changed code
    result = example.pytest("-n", "0", "--rageval-baseline=baseline/")
    assert result.returncode == 1, _shown(result)
    output = result.stdout
    failed = {line.split()[1] for line in output.splitlines() if line.startswith("FAILED eval_sets/governance.jsonl::")}
    assert any("::multi-" in key for key in failed), _shown(result)  # one section cannot answer a two-part question
    lines = output.splitlines()
    assert " rageval FAILED (exit 1): " in lines[-1] and "gate FAILED: regression" in lines[-1], _shown(
        result
    )  # one verdict
    start = lines.index("  cases that flipped from pass to fail:")
    flipped = set()
    for line in lines[start + 1 :]:
        if not line.startswith("    "):
            break
        flipped.add(line.strip())
    assert flipped == failed, _shown(result)  # every case that fails now passed in the baseline, and is named
