"""Configuration mistakes stop the run once, at start-up.

Each is one usage error (exit status 4) with a did-you-mean where a name is
misspelt, before any case runs: no request reaches the target, no run folder
is written, ``latest`` does not move, and under pytest-xdist no worker starts.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk
from openai_server import OpenAIServer, verdicts

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}


def respond(body: dict[str, Any]) -> Any:
    return answer("A answer.", [chunk("docs/a.md", "# A", 1)])


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """An eval set, and an earlier run's ``latest`` that a stopped run must leave alone."""
    pytester.makefile(
        ".jsonl", **{"eval_sets/s": json.dumps({"id": "a", "question": "q", "gold_supports": [GOLD]}) + "\n"}
    )
    (pytester.path / "results").mkdir()
    (pytester.path / "results" / "latest").write_text("20250101-000000-abcdef\n")
    return pytester


def stopped_at_startup(pytester: pytest.Pytester, *args: str) -> str:
    """Run with a live target; assert the run stopped before any case; return the one error line."""
    with AskServer(respond) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", *args)
        requests = len(server.requests)
    return _one_usage_error(pytester, result, requests)


def _one_usage_error(pytester: pytest.Pytester, result: pytest.RunResult, requests: int = 0) -> str:
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert requests == 0
    assert "Traceback" not in output and "created:" not in output and "[gw" not in output  # no xdist worker started
    assert sorted(p.name for p in (pytester.path / "results").iterdir()) == ["latest"]
    assert (pytester.path / "results" / "latest").read_text() == "20250101-000000-abcdef\n"
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, output
    return errors[0]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "[tool.rageval.treshold]\nmrr = 1\n",
            "pyproject.toml:1: unknown table [tool.rageval.treshold] (did you mean [tool.rageval.thresholds]?)",
        ),
        (
            '[tool.rageval.judge]\nmetrics = ["groundedness"]\nmodle = "gpt-4o-mini"\n',
            "pyproject.toml:3: [tool.rageval.judge]: unknown key 'modle' (did you mean 'model'?)",
        ),
        (
            '[tool.rageval]\ntarget = "myrag:ask"\n',
            "pyproject.toml:2: [tool.rageval]: unknown key 'target' (rageval_target is an ini key: set it under [tool.pytest.ini_options])",
        ),
        (
            "[tool.rageval.matrix]\ntop_k = [5, 10]\nexclude = [{topk = 5}]\n",
            "pyproject.toml:1: [tool.rageval.matrix] exclude[0]: unknown axis 'topk' (did you mean 'top_k'?)",
        ),
        (
            "[tool.rageval.thresholds]\nmrr = 0.5\n\n[tool.rageval.thresholds.multi_hop]\nrecal_all_at_k = 1\n",
            "pyproject.toml:5: [tool.rageval.thresholds].multi_hop: unknown metric 'recal_all_at_k' (did you mean 'recall_all_at_k'?)",
        ),
        (
            '[tool.rageval.judge]\njson_mode = "json"\n',
            "pyproject.toml:2: [tool.rageval.judge] json_mode: Input should be",
        ),
    ],
    ids=["table", "judge-key", "ini-key", "matrix", "category-metric", "judge-value"],
)
def test_a_mistake_in_tool_rageval_stops_the_run_once(project: pytest.Pytester, table: str, message: str) -> None:
    project.makepyprojecttoml(table)
    line = stopped_at_startup(project)
    assert line.startswith("ERROR: pytest-rageval: ") and message in line, line


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "[tool.rageval]\nthersholds = 0.5\n",
            "pyproject.toml:2: [tool.rageval]: unknown key 'thersholds' (did you mean 'thresholds'?)",
        ),
        (
            '[tool.rageval.judge]\nbase_ulr = "http://127.0.0.1:9/v1"\n',
            "pyproject.toml:2: [tool.rageval.judge]: unknown key 'base_ulr' (did you mean 'base_url'?)",
        ),
        (
            '[tool.rageval]\njudge = { modle = "m" }\n',
            "pyproject.toml:2: [tool.rageval.judge]: unknown key 'modle' (did you mean 'model'?)",
        ),
        (
            "[tool.rageval.judge]\nmodel = 4\n",
            "pyproject.toml:2: [tool.rageval.judge] model: Input should be a valid string",
        ),
        ("[tool.rageval]\ngate = 0.1\n", "pyproject.toml:2: [tool.rageval.gate] must be a table, got a number"),
        (
            '[tool.rageval.judge.prices]\ngpt = "cheap"\n',
            "pyproject.toml:2: [tool.rageval.judge.prices] gpt: must be [USD per 1M prompt tokens, USD per 1M completion tokens], "
            "two finite numbers of at least 0",
        ),
        (
            '[tool.rageval."x\\u001bcy\\u202ez"]\na = 1\n',  # an escape and a bidi control in a table name: shown escaped
            'pyproject.toml:1: unknown table [tool.rageval."x\\u001bcy\\u202ez"]',
        ),
    ],
    ids=[
        "unknown-key",
        "sub-table-key",
        "inline-sub-table-key",
        "wrong-type",
        "key-not-a-table",
        "wrong-value",
        "control-name",
    ],
)
def test_the_table_is_one_checked_model(project: pytest.Pytester, table: str, message: str) -> None:
    """config.RagevalConfig forbids unknown keys at every level and checks types; each mistake is one usage error."""
    project.makepyprojecttoml(table)
    line = stopped_at_startup(project)
    assert line == f"ERROR: pytest-rageval: {message}", line


def test_every_mistake_of_the_table_is_named_in_file_order(project: pytest.Pytester) -> None:
    project.makepyprojecttoml(
        '[tool.rageval.gate]\nmrr_avgg = 0.1\n\n[tool.rageval.treshold]\nmrr = 1\n\n[tool.rageval.judge]\nmetrics = ["groundednes"]\n'
    )
    line = stopped_at_startup(project)
    assert (
        line.index(
            "pyproject.toml:2: [tool.rageval.gate].mrr_avgg: unknown metric 'mrr_avgg' (did you mean 'mrr_avg'?)"
        )
        < line.index("pyproject.toml:4: unknown table [tool.rageval.treshold]")
        < line.index(
            "pyproject.toml:8: [tool.rageval.judge] metrics: unknown judge metric 'groundednes' (did you mean 'groundedness'?)"
        )
    )


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        (
            "rageval_response_map =\n    answer = reply\n    anser = text\n",
            "rageval_response_map line 2: unknown target 'anser' (did you mean 'answer'?)",
        ),
        (
            "rageval_response_map =\n    debug.retrieved_chunks.rel_path = path\n",
            "rageval_response_map line 1: unknown target 'debug.retrieved_chunks.rel_path' (did you mean 'retrieved_chunks.rel_path'?)",
        ),
        (
            "rageval_response_map =\n    references.relpath = path\n",
            "rageval_response_map line 1: 'relpath' is not a chunk key (did you mean 'rel_path'?)",
        ),
        ("rageval_request_map =\n    question query\n", "rageval_request_map line 1: expected 'target = source'"),
        ("rageval_headers =\n    Authorization Bearer abc\n", "rageval_headers line 1: expected 'Name: value'"),
        (
            "rageval_headers =\n    X-Token: ${RAGEVAL_TEST_UNSET_VARIABLE}\n",
            "rageval_headers: environment variable 'RAGEVAL_TEST_UNSET_VARIABLE' is not set",
        ),
    ],
    ids=["response-target", "response-path-as-target", "chunk-key", "request-map", "header", "header-variable"],
)
def test_a_map_or_header_that_does_not_parse_stops_the_run_once(
    project: pytest.Pytester, ini: str, message: str
) -> None:
    project.makeini("[pytest]\n" + ini)
    line = stopped_at_startup(project)
    assert message in line, line


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "nomod_rageval_test:ask",
            "rageval_target 'nomod_rageval_test:ask': cannot import module 'nomod_rageval_test'",
        ),
        ("myrag:aks", "rageval_target 'myrag:aks': module 'myrag' has no attribute 'aks'"),
        ("brokenrag:ask", "rageval_target 'brokenrag:ask': importing 'brokenrag' failed: ImportError: no vector store"),
        (
            "http://exa mple.com/ask",
            "rageval_target: 'http://exa mple.com/ask' is not a valid URL (host 'exa%20mple.com')",
        ),
        ("http://localhost:99999/ask", "rageval_target: 'http://localhost:99999/ask' is not a valid URL (port 99999)"),
    ],
    ids=["no-module", "no-attribute", "import-fails", "bad-host", "bad-port"],
)
def test_an_unusable_target_stops_the_run_once(project: pytest.Pytester, target: str, message: str) -> None:
    project.makepyfile(
        myrag="def ask(question, params):\n    return {'answer': 'x'}\n",
        brokenrag="raise ImportError('no vector store')\n",
    )
    result = project.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={target}")
    line = _one_usage_error(project, result)
    assert message in line, line


@pytest.mark.parametrize("mistake", ["table", "map", "target", "signature"])
def test_under_xdist_a_mistake_stops_the_run_once_before_any_worker_starts(
    project: pytest.Pytester, mistake: str
) -> None:
    """One mistake of each kind above, with ``-n 2``: the controller stops the run; no worker starts."""
    project.makepyfile(rag="def one(question):\n    return {'answer': 'x'}\n")
    if mistake == "table":
        project.makepyprojecttoml("[tool.rageval.treshold]\nmrr = 1\n")
        expected = "unknown table [tool.rageval.treshold] (did you mean [tool.rageval.thresholds]?)"
    elif mistake == "map":
        project.makeini("[pytest]\nrageval_response_map =\n    anser = text\n")
        expected = "unknown target 'anser' (did you mean 'answer'?)"
    if mistake in ("table", "map"):
        line = stopped_at_startup(project, "-n", "2")
    else:
        target, expected = (
            ("nomod_rageval_test:ask", "cannot import module 'nomod_rageval_test'")
            if mistake == "target"
            else ("rag:one", "its signature (question) cannot take (question, params)")
        )
        line = _one_usage_error(
            project, project.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={target}", "-n", "2")
        )
    assert line.startswith("ERROR: pytest-rageval: ") and expected in line, line


def test_without_a_target_map_lines_are_still_checked(project: pytest.Pytester) -> None:
    # A conftest fixture serves the cases; the maps are then unused, but a line that does not parse is still a mistake.
    project.makeini(
        "[pytest]\nrageval_response_map =\n    anser = reply\nrageval_headers =\n    X-Token: ${UNSET_IS_FINE_HERE}\n"
    )
    line = _one_usage_error(project, project.runpytest("--rageval", "--rageval-judge=none"))
    assert "unknown target 'anser' (did you mean 'answer'?)" in line
    project.makeini("[pytest]\nrageval_headers =\n    X-Token: ${UNSET_IS_FINE_HERE}\n")
    project.makeconftest(
        "import pytest\n@pytest.fixture(scope='session')\ndef rageval_client():\n"
        "    return lambda q, p: {'answer': 'x', 'debug': {'retrieved_chunks': [{'rel_path': 'docs/a.md', 'heading_path': '# A'}]}}\n"
    )
    project.runpytest("--rageval", "--rageval-judge=none").assert_outcomes(passed=1)


def test_judge_model_and_endpoint_in_tool_rageval_judge(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[tool.rageval.judge] model/base_url`` configure the judge; ini keys and options win over them."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("RAGEVAL_JUDGE_API_KEY", raising=False)
    with OpenAIServer(verdicts()) as judge, AskServer(respond) as rag:
        project.makepyprojecttoml(f'[tool.rageval.judge]\nmodel = "table-model"\nbase_url = "{judge.base_url}"\n')
        result = project.runpytest("--rageval", f"--rageval-target={rag.url}")
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["rageval: *judge openai (table-model)*"])
        assert {b["model"] for b in judge.bodies()} == {"table-model"}
        judge.requests.clear()
        project.makeini(
            "[pytest]\nrageval_judge_model = ini-model\n"
        )  # tox.ini configures pytest; the table still counts
        overridden = project.runpytest("--rageval", f"--rageval-target={rag.url}", "--rageval-no-cache")
        overridden.assert_outcomes(passed=1)
        assert {b["model"] for b in judge.bodies()} == {"ini-model"}
        judge.requests.clear()
        cli = project.runpytest(
            "--rageval", f"--rageval-target={rag.url}", "--rageval-judge-model=cli-model", "--rageval-no-cache"
        )
        cli.assert_outcomes(passed=1)
        assert {b["model"] for b in judge.bodies()} == {"cli-model"}


def test_a_mistake_in_the_pyproject_stops_rageval_compare_too(project: pytest.Pytester) -> None:
    project.makepyprojecttoml("[tool.rageval.gate]\nmrr_avg = 0.1\n[tool.rageval.judge]\nmodle = 'x'\n")
    result = project.run(sys.executable, "-m", "pytest_rageval.cli", "compare", "a", "b")
    assert result.ret == 2
    assert "pyproject.toml:4: [tool.rageval.judge]: unknown key 'modle' (did you mean 'model'?)" in result.stderr.str()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "rag:answer",
            "ERROR: pytest-rageval: rageval_target 'rag:answer': its second parameter top_k=4 would receive the params "
            "dict; a target is called fn(question, params), where params is a dict holding k *",
        ),
        (
            "rag:one",
            "ERROR: pytest-rageval: rageval_target 'rag:one': its signature (question) cannot take (question, params)*",
        ),
        (
            "rag:askk",
            "ERROR: pytest-rageval: rageval_target 'rag:askk': module 'rag' has no attribute 'askk' (did you mean 'ask'?)",
        ),
        (
            "rag:index",
            "ERROR: pytest-rageval: rageval_target 'rag:index': 'index' is a dict object, not callable nor an object of "
            "LlamaIndex, LangChain, LangGraph or Haystack; "
            "a target is called fn(question, params)*",
        ),
    ],
)
def test_a_target_that_cannot_be_called_stops_the_run_saying_how_targets_are_called(
    project: pytest.Pytester, target: str, message: str
) -> None:
    project.makepyfile(
        rag="""
        calls = []
        index = {}
        def answer(question, top_k=4):
            calls.append(question)
            return {"answer": "x"}
        def one(question):
            calls.append(question)
            return {"answer": "x"}
        def ask(question, params):
            return {"answer": "x"}
    """
    )
    result = project.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={target}")
    line = _one_usage_error(project, result)
    assert fnmatch.fnmatch(line, message), line


BIG = "1" + "0" * 400


@pytest.mark.parametrize(
    ("table", "args", "message"),
    [
        (
            "[tool.rageval.gate]\nrecall_at_k_avg = nan\n",
            (),
            "[tool.rageval.gate].recall_at_k_avg: must be a finite number, got nan",
        ),
        ("[tool.rageval.gate]\nmrr_avg = inf\n", (), "[tool.rageval.gate].mrr_avg: must be a finite number, got inf"),
        (
            f"[tool.rageval.gate]\nmrr_avg = {BIG}\n",
            (),
            "[tool.rageval.gate].mrr_avg: must be a finite number, got 1000",
        ),
        ("[tool.rageval.gate]\nmin_judge_coverage = nan\n", (), "min_judge_coverage: must be a finite number, got nan"),
        (
            "[tool.rageval.gate]\nmin_judge_coverage = 1.5\n",
            (),
            "min_judge_coverage: must be a share from 0 to 1, got 1.5",
        ),
        ("[tool.rageval.thresholds]\nmrr = nan\n", (), "threshold of 'mrr' must be a finite number, got nan"),
        (f"[tool.rageval.thresholds]\nmrr = {BIG}\n", (), "threshold of 'mrr' must be a finite number, got 1000"),
        (
            "[tool.rageval.judge.prices]\ngpt = [nan, 1.0]\n",
            (),
            "gpt: must be [USD per 1M prompt tokens, USD per 1M completion tokens]",
        ),
        ("[tool.rageval.judge.prices]\ngpt = [-1.0, 1.0]\n", (), "two finite numbers of at least 0"),
        ("", ("--rageval-threshold", "mrr=nan"), "threshold of 'mrr' must be a finite number, got 'nan'"),
        (
            "",
            ("--rageval-max-judge-cost", "nan"),
            "--rageval-max-judge-cost: must be a finite amount of USD of at least 0, got nan",
        ),
        (
            "",
            ("--rageval-max-judge-cost", "-1"),
            "--rageval-max-judge-cost: must be a finite amount of USD of at least 0, got -1.0",
        ),
        (
            '[tool.pytest.ini_options]\nrageval_timeout = "inf"\n',
            (),
            "rageval_timeout: must be more than 0 seconds, got 'inf'",
        ),
    ],
    ids=[
        "gate-nan",
        "gate-inf",
        "gate-400-digits",
        "coverage-nan",
        "coverage-above-1",
        "threshold-nan",
        "threshold-400-digits",
        "price-nan",
        "price-negative",
        "cli-threshold-nan",
        "budget-nan",
        "budget-negative",
        "timeout-inf",
    ],
)
def test_a_number_that_would_switch_a_check_off_stops_the_run_once(
    project: pytest.Pytester, table: str, args: tuple[str, ...], message: str
) -> None:
    if table:
        project.makepyprojecttoml(table)
    line = stopped_at_startup(project, *args)
    assert line.startswith("ERROR: pytest-rageval: ") and message in line, line
    assert "Traceback" not in line and len(line) < 400


def test_a_path_option_written_with_a_space_that_moved_the_root_is_one_line_naming_the_equals_form(
    project: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp(
        "runs"
    )  # an existing folder outside the project: pytest's root would move there
    line = stopped_at_startup(project, "--rageval-output", str(elsewhere))
    assert line.startswith(
        f"ERROR: pytest-rageval: pytest took the value of --rageval-output ({elsewhere}) for a test path and moved its root folder (rootdir) to "
    ), line
    assert line.endswith(f", before this plugin's options were known: write --rageval-output={elsewhere}"), line
    with AskServer(respond) as server:
        works = project.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", f"--rageval-output={elsewhere}"
        )
    assert works.ret == 0 and (elsewhere / "latest").is_file()
