"""The hooks a conftest.py or plugin implements to extend a run: ``pytest_rageval_judges`` (a judge chosen by
``--rageval-judge NAME`` or ini ``rageval_judge``) and ``pytest_rageval_run_fields`` (a ``user`` section in
metrics.json and config.json that the ``rageval`` commands carry), end to end in pytest runs (serially and under
``-n 2``); each mistake one line naming the hook and the conftest.py, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}

#: A callable target: the reference answer for q-right, another for q-wrong.
RAG = """
def ask(question, params):
    gold = {"rel_path": "docs/a.md", "heading_path": "# A"}
    answer = "Paris." if question == "q-right" else "Lyon."
    return {"answer": answer, "references": [gold], "debug": {"retrieved_chunks": [gold]}}
"""

#: A judge of one's own: the top of the scale when the answer is the reference answer, the bottom otherwise.
EXACT = """
from pytest_rageval import Judge, Verdict
from pytest_rageval.judges.base import SCALES


class Exact(Judge):
    def __init__(self):
        super().__init__(name="exact", heuristic=True)

    async def judge(self, metric, inp, *, repeat_index=0):
        if metric not in SCALES:
            return Verdict(metric=metric, label=False)
        low, high = SCALES[metric]
        return Verdict(metric=metric, score=high if inp.answer == inp.reference_answer else low, reasoning="exact match")
"""


def make_project(pytester: pytest.Pytester, conftest: str = "", ini: str = "") -> None:
    """Two cases answered by a callable target, one right and one wrong; ``conftest`` and ``ini`` lines added."""
    cases = [
        {"id": "right", "question": "q-right", "gold_supports": [GOLD], "reference_answer": "Paris."},
        {"id": "wrong", "question": "q-wrong", "gold_supports": [GOLD], "reference_answer": "Paris."},
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in cases) + "\n"})
    pytester.makepyfile(rag=RAG)
    pytester.makeconftest(conftest)
    pytester.makeini(f"[pytest]\nrageval_target = rag:ask\n{ini}")


def run_rageval(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("--rageval", "-p", "no:cacheprovider", *args)


def latest_run(folder: Path) -> Path:
    return folder / (folder / "latest").read_text().strip()


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def rageval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def one_error_line(result: pytest.RunResult) -> str:
    """The run stopped with a usage error (exit status 4) of one line, no traceback; returns the line."""
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "Traceback" not in output, output
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, output
    return errors[0]


# --------------------------------------------------------------------------- pytest_rageval_judges


def test_a_conftest_judge_chosen_by_ini_judges_every_case(pytester: pytest.Pytester, xdist: list[str]) -> None:
    """The judge is made where cases run (each xdist worker) and named in the stored run."""
    make_project(
        pytester, EXACT + "\n\ndef pytest_rageval_judges():\n    return {'exact': Exact}\n", "rageval_judge = exact\n"
    )
    result = run_rageval(pytester, *xdist)
    result.assert_outcomes(passed=1, failed=1)
    assert "judge exact (None, heuristic)" in result.stdout.str()
    run_dir = latest_run(pytester.path / "results")
    records = {r["test_case_id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert {case: r["metrics"]["correctness"] for case, r in records.items()} == {"right": 5.0, "wrong": 0.0}
    assert records["wrong"]["judge"]["correctness"]["reasoning"] == "exact match"
    assert read(run_dir / "metrics.json")["judge"]["name"] == "exact"
    assert read(run_dir / "config.json")["judge"] == {"name": "exact", "model": None, "heuristic": True}


def test_a_factory_and_the_option_choose_a_judge(pytester: pytest.Pytester) -> None:
    """A callable returning a judge, from a conftest that takes ``config``; ``--rageval-judge`` names it."""
    conftest = EXACT + "\n\ndef pytest_rageval_judges(config):\n    return {'exact': lambda: Exact()}\n"
    make_project(pytester, conftest, "rageval_judge = lexical\n")
    result = run_rageval(pytester, "--rageval-judge=exact")
    result.assert_outcomes(passed=1, failed=1)
    assert read(latest_run(pytester.path / "results") / "metrics.json")["judge"]["name"] == "exact"


@pytest.mark.parametrize(
    ("returns", "message"),
    [
        (
            "42",
            "conftest.py: pytest_rageval_judges: expected a mapping of judge names to Judge classes or factories, got 42 (int)",
        ),
        (
            "{'lexical': Exact}",
            "conftest.py: pytest_rageval_judges: the judge name 'lexical' is the built-in judge of that name",
        ),
        (
            "{'two words': Exact}",
            "conftest.py: pytest_rageval_judges: a judge name is letters, digits, '_', '.' and '-' (at most 64), got 'two words' (str)",
        ),
        (
            "{'exact': 3}",
            "conftest.py: pytest_rageval_judges: judge 'exact': expected a Judge class or a callable returning a Judge, got 3 (int)",
        ),
        (
            "{'exact': lambda: 42}",
            "conftest.py: pytest_rageval_judges: judge 'exact': expected a pytest_rageval.Judge, got 42 (int)",
        ),
        (
            "{'exact': lambda: 1 / 0}",
            "conftest.py: pytest_rageval_judges: judge 'exact': making it raised ZeroDivisionError: division by zero",
        ),
        ("{'other': Exact}", "judge 'other': the judge it made is named 'exact'; give the name it is registered under"),
        ("1 / 0", "conftest.py: pytest_rageval_judges raised ZeroDivisionError: division by zero"),
    ],
)
def test_a_bad_judge_is_one_line_naming_the_hook_and_the_conftest(
    pytester: pytest.Pytester, returns: str, message: str
) -> None:
    name = "other" if "other" in returns else "exact"
    make_project(
        pytester, EXACT + f"\n\ndef pytest_rageval_judges():\n    return {returns}\n", f"rageval_judge = {name}\n"
    )
    line = one_error_line(pytester.runpytest("--rageval", "-p", "no:cacheprovider"))
    assert message in line, line
    assert not (pytester.path / "results").exists()


def test_an_unknown_judge_name_lists_the_ones_there_are(pytester: pytest.Pytester) -> None:
    make_project(pytester, EXACT + "\n\ndef pytest_rageval_judges():\n    return {'exact': Exact}\n")
    line = one_error_line(pytester.runpytest("--rageval", "--rageval-judge=exakt", "-p", "no:cacheprovider"))
    assert "rageval_judge: must be one of auto, openai, lexical, none, exact, got 'exakt'" in line, line


# --------------------------------------------------------------------------- pytest_rageval_run_fields

#: Fields from the aggregates the hook is given, a secret the run knows (masked), and a change to its copy.
RUN_FIELDS = """
import os


def pytest_rageval_run_fields(config, metrics):
    fields = {"team": "search", "mrr_seen": metrics["aggregate_metrics"]["mrr_avg"], "tags": ["nightly", 2], "key": os.environ["RAG_TOKEN"]}
    metrics["aggregate_metrics"]["mrr_avg"] = 99  # a copy: the stored run keeps its own
    return fields
"""
SECRET = "tok-8c1f2e5d77aa"


def test_run_fields_are_stored_and_the_commands_carry_them(
    pytester: pytest.Pytester, xdist: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_TOKEN", SECRET)
    make_project(pytester, RUN_FIELDS, "rageval_headers = Authorization: Bearer ${RAG_TOKEN}\n")
    result = run_rageval(pytester, "--rageval-judge=none", "--rageval-store-full-text", *xdist)
    result.assert_outcomes(passed=2)
    run_dir = latest_run(pytester.path / "results")
    expected = {"key": "***", "mrr_seen": 1.0, "tags": ["nightly", 2], "team": "search"}
    metrics = read(run_dir / "metrics.json")
    assert metrics["user"] == expected
    assert list(metrics["user"]) == sorted(expected)
    assert metrics["aggregate_metrics"]["mrr_avg"] == 1.0
    assert read(run_dir / "config.json")["user"] == expected
    assert SECRET not in "".join(p.read_text(encoding="utf-8") for p in run_dir.iterdir() if p.is_file())
    if xdist:
        return
    # The commands that write a run from another keep the section as it is.
    rescored = rageval("rescore", str(run_dir), "--threshold", "mrr=0.5", "-o", "rescored", cwd=pytester.path)
    assert rescored.returncode == 0, rescored.stderr
    merged = rageval("merge", str(run_dir), "-o", "merged", cwd=pytester.path)
    assert merged.returncode == 0, merged.stderr
    for folder in ("rescored", "merged"):
        written = latest_run(pytester.path / folder)
        assert read(written / "metrics.json")["user"] == expected, folder
        assert read(written / "config.json")["user"] == expected, folder
    judged = rageval("judge", str(run_dir), "--judge", "lexical", cwd=pytester.path)
    assert judged.returncode == 0, judged.stderr
    assert read(run_dir / "metrics.json")["user"] == expected
    assert read(run_dir / "config.json")["user"] == expected


#: A plugin module (``-p fields_plugin``) whose field clashes with the conftest's.
PLUGIN = "def pytest_rageval_run_fields():\n    return {'team': 'other'}\n"


@pytest.mark.parametrize(
    ("returns", "message"),
    [
        (
            "42",
            "conftest.py: pytest_rageval_run_fields: expected a mapping of field names to JSON values, got 42 (int)",
        ),
        (
            "{'x': float('nan')}",
            "conftest.py: pytest_rageval_run_fields: field 'x': nan is not a finite number (JSON has none)",
        ),
        ("{'x': {'y': [object]}}", "conftest.py: pytest_rageval_run_fields: field 'x'.y[0]: expected a JSON value"),
        ("{'x': {1: 2}}", "conftest.py: pytest_rageval_run_fields: field 'x': keys must be strings, got 1 (int)"),
        (
            "{'x': 'y' * 70000}",
            "conftest.py: pytest_rageval_run_fields: the fields take 70009 bytes as JSON, more than the 65536 a run keeps",
        ),
        (
            "{'team': 'search'}",
            "plugin module fields_plugin: pytest_rageval_run_fields: field 'team' is returned by conftest.py: pytest_rageval_run_fields too",
        ),
        ("1 / 0", "conftest.py: pytest_rageval_run_fields raised ZeroDivisionError: division by zero"),
    ],
)
def test_bad_run_fields_are_one_line_and_the_run_is_kept_without_them(
    pytester: pytest.Pytester, returns: str, message: str
) -> None:
    make_project(pytester, f"def pytest_rageval_run_fields(config, metrics):\n    return {returns}\n")
    pytester.makepyfile(fields_plugin=PLUGIN)
    pytester.syspathinsert()
    result = pytester.runpytest("--rageval", "--rageval-judge=none", "-p", "fields_plugin", "-p", "no:cacheprovider")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "Traceback" not in output, output
    lines = [line for line in result.stdout.lines if "pytest_rageval_run_fields" in line]
    assert len(lines) == 1 and message in lines[0], output
    run_dir = latest_run(pytester.path / "results")
    assert "user" not in read(run_dir / "metrics.json")
    assert "user" not in read(run_dir / "config.json")
