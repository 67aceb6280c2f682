"""What the plugin reads back is checked value by value: a tampered baseline, older run or run folder is one line
naming the file, the field and the problem, never a traceback.

Real runs make the folders (a callable target, the lexical judge, full text stored); each test damages one field
of a copy, as a hand edit, an older version or a hostile file would, then runs ``pytest --rageval`` (pytester, in a
child process) or the real ``rageval`` command (a child process). A session still writes its own metrics.json,
report.html, CI summary and terminal summary and moves ``latest``; a command changes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e  # the tests here run pytest or the rageval command in processes of their own

TARGET = """
def ask(question, params):
    chunks = [{"rel_path": "docs/a.md", "heading_path": "# A", "text": "A fact.", "score": 1.0},
              {"rel_path": "docs/b.md", "heading_path": "# B", "text": "Other text.", "score": 0.5}]
    return {"answer": "A fact.", "retrieved_chunks": chunks[: params.get("k", 2)], "references": chunks[:1]}
"""
GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}
CASES = [
    {"id": "c0", "question": "q0", "gold_supports": [GOLD], "reference_answer": "A fact.", "thresholds": {"mrr": 0.5}},
    {"id": "c1", "question": "q1", "gold_supports": [GOLD], "repeat": 2},
    {"id": "c2", "question": "q2", "gold_supports": [GOLD]},
]
C0 = "eval_sets/s.jsonl::c0"
HUGE = "1" + "0" * 309  # an integer beyond float range
SURROGATE = '"\\ud800"'  # a lone surrogate, as a JSON escape


def tamper(path: Path, field: tuple[Any, ...], raw: str, *, line: int | None = None) -> None:
    """Set ``field`` of the JSON file at ``path`` (of its ``line``-th line: results.jsonl) to the JSON text ``raw``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    data = json.loads(lines[line - 1] if line else "\n".join(lines))
    node = data
    for part in field[:-1]:
        node = node[part]
    node[field[-1]] = "@@tampered@@"
    text = json.dumps(data).replace('"@@tampered@@"', raw)
    if line:
        lines[line - 1] = text
        text = "\n".join(lines)
    path.write_text(text + "\n", encoding="utf-8")


def no_traceback(output: str) -> None:
    assert "Traceback" not in output and "INTERNALERROR" not in output, output


# --------------------------------------------------------------------------- the session


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(rag=TARGET)
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in CASES) + "\n"})
    return pytester


def session(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--rageval",
        "--rageval-judge=none",
        "--rageval-target=rag:ask",
        "-p",
        "no:cacheprovider",
        "--rageval-summary-md=summary.md",
        *args,
        timeout=60,
    )


def latest(pytester: pytest.Pytester) -> Path:
    results = pytester.path / "results"
    return results / (results / "latest").read_text().strip()


def assert_new_run_written(pytester: pytest.Pytester, result: pytest.RunResult, before: Path) -> None:
    """The new run's folder is complete, ``latest`` moved to it, and both summaries were written."""
    run = latest(pytester)
    assert run != before
    assert (run / "metrics.json").is_file() and (run / "report.html").is_file()
    assert (pytester.path / "summary.md").is_file()
    result.stdout.fnmatch_lines(["*rageval summary*"])


@pytest.mark.parametrize(
    ("field", "raw", "named"),
    [
        (
            ("cases", C0, "outcome"),
            SURROGATE,
            f'cases["{C0}"].outcome: a lone surrogate (\\ud800) is not valid Unicode text',
        ),
        (("aggregate_metrics", "mrr_avg"), HUGE, "aggregate_metrics.mrr_avg: a number beyond float range"),
        (("cases", C0, "metrics", "mrr"), HUGE, f'cases["{C0}"].metrics.mrr: a number beyond float range'),
        (("cases", C0, "metrics"), '"abc"', f"cases[\"{C0}\"].metrics: expected an object, got 'abc'"),
    ],
    ids=["outcome-surrogate", "aggregate-huge", "case-metric-huge", "case-metrics-string"],
)
def test_a_tampered_baseline_refuses_the_gate_in_one_line(
    project: pytest.Pytester, field: tuple[Any, ...], raw: str, named: str
) -> None:
    session(project, "--rageval-baseline=base", "--rageval-update-baseline").assert_outcomes(passed=len(CASES))
    base = project.path / "base" / "metrics.json"
    tamper(base, field, raw)
    (project.path / "summary.md").unlink()
    before = latest(project)
    result = session(project, "--rageval-baseline=base")
    output = result.stdout.str() + result.stderr.str()
    no_traceback(output)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    assert (
        f"= rageval FAILED (exit 1): 0 new failures, gate FAILED: baseline refused: {base}: {named} ="
        in result.stdout.lines
    )
    assert_new_run_written(project, result, before)
    summary = (project.path / "summary.md").read_text(encoding="utf-8")
    problem = named.rsplit(": ", 1)[-1].split(" (")[0]  # (markdown escapes the path's underscores)
    assert "gate FAILED" in summary and "baseline refused: " in summary and problem in summary, summary


@pytest.mark.parametrize(
    ("field", "raw", "named"),
    [
        (("run_id",), SURROGATE, "run_id: a lone surrogate (\\ud800) is not valid Unicode text"),
        (("aggregate_metrics", "mrr_avg"), HUGE, "aggregate_metrics.mrr_avg: a number beyond float range"),
    ],
    ids=["run-id-surrogate", "aggregate-huge"],
)
def test_a_tampered_older_run_is_left_out_of_the_history_with_a_note(
    project: pytest.Pytester, field: tuple[Any, ...], raw: str, named: str
) -> None:
    session(project).assert_outcomes(passed=len(CASES))
    older = latest(project)
    tamper(older / "metrics.json", field, raw)
    for _ in range(2):  # every later run goes on, not only the next one
        (project.path / "summary.md").unlink()
        before = latest(project)
        result = session(project)
        output = result.stdout.str() + result.stderr.str()
        no_traceback(output)
        assert result.ret == pytest.ExitCode.OK, output
        assert f"an older run left out of the history: {older / 'metrics.json'}: {named}" in result.stdout.lines
        assert_new_run_written(project, result, before)


# --------------------------------------------------------------------------- the commands


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with real runs: ``results/`` (a baseline run, then a run compared with it: ``base/``), and a
    config matrix run in ``mx/``, all with the lexical judge and full text stored."""
    root = tmp_path_factory.mktemp("made")
    (root / "rag.py").write_text(TARGET, encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "eval_sets").mkdir()
    (root / "eval_sets" / "s.jsonl").write_text("\n".join(json.dumps(c) for c in CASES) + "\n", encoding="utf-8")
    common = [
        sys.executable,
        "-m",
        "pytest",
        "--rageval",
        "--rageval-judge=lexical",
        "--rageval-target=rag:ask",
        "--rageval-store-full-text",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-q",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    for extra in (
        ["--rageval-baseline=base", "--rageval-update-baseline"],
        ["--rageval-baseline=base"],
        ["--rageval-output=mx", "--rageval-matrix=top_k=1,2"],
        ["--rageval-output=mx", "--rageval-matrix=top_k=1,2", "--rageval-baseline=mx"],
    ):
        done = subprocess.run([*common, *extra], cwd=root, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    return root


def run_of(root: Path, output: str) -> Path:
    return root / output / (root / output / "latest").read_text().strip()


def first_run(root: Path) -> Path:
    """The older run of ``results/`` (the baseline run)."""
    (older,) = [p for p in (root / "results").iterdir() if p.is_dir() and p != run_of(root, "results")]
    return older


def rageval(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``rageval`` command in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but the reports a command may rebuild, by path."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "report.html" and "__pycache__" not in p.parts
    }


RUN, OLDER, MX, BASE = "RUN", "OLDER", "MX", "BASE"  # which folder a case damages: resolved in the test


#: (command and its arguments, folder, file, line of results.jsonl or None, field, JSON text, the line's field and problem)
COMMAND_FAULTS = [
    # rageval rescore RUN
    (["rescore", RUN], RUN, "results.jsonl", 1, ("trace", "k"), '"abc"', "trace.k: expected an integer, got 'abc'"),
    (
        ["rescore", RUN],
        RUN,
        "results.jsonl",
        1,
        ("metrics", "latency_ms"),
        '"slow"',
        "metrics.latency_ms: expected a number or true/false, got 'slow'",
    ),
    (["rescore", RUN], RUN, "results.jsonl", 1, ("judge",), '"x"', "judge: expected an object, got 'x'"),
    (["rescore", RUN], RUN, "results.jsonl", 1, ("thresholds",), "[1]", "thresholds: expected an object, got a list"),
    (
        ["rescore", RUN],
        RUN,
        "config.json",
        None,
        ("config", "judge_metrics"),
        "5",
        "config.judge_metrics: expected a list, got 5",
    ),
    (
        ["rescore", RUN],
        RUN,
        "config.json",
        None,
        ("config", "thresholds", "cli"),
        '"abc"',
        "config.thresholds.cli: expected an object, got 'abc'",
    ),
    (
        ["rescore", RUN],
        RUN,
        "config.json",
        None,
        ("eval_set_files", "eval_sets/s.jsonl"),
        SURROGATE,
        'eval_set_files["eval_sets/s.jsonl"]: a lone surrogate (\\ud800) is not valid Unicode text',
    ),
    (["rescore", RUN], RUN, "metrics.json", None, ("judge",), '"x"', "judge: expected an object, got 'x'"),
    (
        ["rescore", RUN],
        RUN,
        "metrics.json",
        None,
        ("judge", "name"),
        SURROGATE,
        "judge.name: a lone surrogate (\\ud800) is not valid Unicode text",
    ),
    (
        ["rescore", RUN],
        RUN,
        "metrics.json",
        None,
        ("aggregate_metrics",),
        '"x"',
        "aggregate_metrics: expected an object, got 'x'",
    ),
    # rageval judge RUN
    (
        ["judge", RUN, "--judge", "lexical", "--no-cache"],
        RUN,
        "config.json",
        None,
        ("config", "judge_metrics"),
        "5",
        "config.judge_metrics: expected a list, got 5",
    ),
    (
        ["judge", RUN, "--judge", "lexical", "--no-cache"],
        RUN,
        "results.jsonl",
        3,
        ("outcome",),
        '["passed"]',
        "outcome: expected a string, got a list",
    ),
    (
        ["judge", MX, "--judge", "lexical", "--no-cache"],
        MX,
        "metrics.json",
        None,
        ("config_ranking",),
        '"x"',
        "config_ranking: expected an object, got 'x'",
    ),
    (
        ["judge", MX, "--judge", "lexical", "--no-cache"],
        MX,
        "metrics.json",
        None,
        ("config_ranking", "metric"),
        "[1]",
        "config_ranking.metric: expected a string, got a list",
    ),
    # rageval report RUN
    (
        ["report", RUN],
        RUN,
        "metrics.json",
        None,
        ("comparison", "flipped_to_fail"),
        "5",
        "comparison.flipped_to_fail: expected a list, got 5",
    ),
    (
        ["report", RUN],
        RUN,
        "metrics.json",
        None,
        ("repeats", "spread"),
        '"x"',
        "repeats.spread: expected an object, got 'x'",
    ),
    (
        ["report", RUN],
        RUN,
        "metrics.json",
        None,
        ("run_id",),
        SURROGATE,
        "run_id: a lone surrogate (\\ud800) is not valid Unicode text",
    ),
    (
        ["report", MX],
        MX,
        "metrics.json",
        None,
        ("config_ranking", "ranked", 0, "ci_low"),
        '"low"',
        "config_ranking.ranked[0].ci_low: expected a number, got 'low'",
    ),
    # rageval merge RUN RUN
    (
        ["merge", OLDER, RUN, "-o", "merged"],
        OLDER,
        "metrics.json",
        None,
        ("k",),
        '"abc"',
        "k: expected an integer, got 'abc'",
    ),
    # rageval compare BASE RUN
    (
        ["compare", BASE, RUN],
        BASE,
        "metrics.json",
        None,
        ("aggregate_metrics", "mrr_avg"),
        HUGE,
        "aggregate_metrics.mrr_avg: a number beyond float range",
    ),
    (
        ["compare", BASE, RUN],
        RUN,
        "metrics.json",
        None,
        ("aggregate_metrics", "judge_coverage"),
        "5",
        "aggregate_metrics.judge_coverage: expected an object, got 5",
    ),
    (
        ["compare", BASE, RUN],
        BASE,
        "metrics.json",
        None,
        ("cases", C0, "metrics"),
        '"abc"',
        f"cases[\"{C0}\"].metrics: expected an object, got 'abc'",
    ),
]


@pytest.mark.parametrize(
    ("argv", "which", "name", "line", "field", "raw", "named"),
    COMMAND_FAULTS,
    ids=[f"{argv[0]}-{name}-{'.'.join(map(str, field))}" for argv, _, name, _, field, *_ in COMMAND_FAULTS],
)
def test_a_tampered_run_folder_is_one_line_and_nothing_is_changed(
    made: Path,
    tmp_path: Path,
    argv: list[str],
    which: str,
    name: str,
    line: int | None,
    field: tuple[Any, ...],
    raw: str,
    named: str,
) -> None:
    root = tmp_path / "project"
    shutil.copytree(made, root)
    folders = {RUN: run_of(root, "results"), OLDER: first_run(root), MX: run_of(root, "mx"), BASE: root / "base"}
    path = folders[which] / name
    tamper(path, field, raw, line=line)
    before = snapshot(root)
    done = rageval(root, *(str(folders.get(arg, arg)) for arg in argv))
    no_traceback(done.stdout + done.stderr)
    assert done.returncode == 2, done.stdout + done.stderr
    (message,) = done.stderr.strip().splitlines()
    where = f"{path}:{line}" if line else str(path)
    assert message.startswith(f"rageval: {where}: {named}"), message
    assert snapshot(root) == before  # nothing rewritten, no new run folder


def test_history_leaves_out_a_tampered_older_run_with_a_note(made: Path, tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(made, root)
    older = first_run(root)
    tamper(older / "metrics.json", ("aggregate_metrics", "mrr_avg"), HUGE)
    done = rageval(root, "history", str(root / "results"), "--metric", "mrr")
    no_traceback(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == (
        f"note: an older run left out of the history: {older / 'metrics.json'}: aggregate_metrics.mrr_avg: a number beyond float range"
    )
    assert lines[0].endswith(": 1 run") and run_of(root, "results").name in lines[2] and older.name not in lines[2]


@pytest.mark.parametrize(
    ("argv", "which", "name", "line", "field", "raw"),
    [
        (["report", RUN], RUN, "metrics.json", None, ("comparison", "deltas"), '[{"name": "x"}]'),
        (["rescore", RUN], RUN, "config.json", None, ("config", "thresholds"), "null"),
        (["judge", RUN, "--judge", "lexical", "--no-cache"], RUN, "results.jsonl", 1, ("test_case_id",), "null"),
    ],
    ids=["report-delta-without-values", "rescore-null-thresholds", "judge-null-case-id"],
)
def test_a_missing_or_null_field_is_read_as_not_recorded(
    made: Path,
    tmp_path: Path,
    argv: list[str],
    which: str,
    name: str,
    line: int | None,
    field: tuple[Any, ...],
    raw: str,
) -> None:
    root = tmp_path / "project"
    shutil.copytree(made, root)
    path = run_of(root, "results") / name
    tamper(path, field, raw, line=line)
    done = rageval(root, *(str(run_of(root, "results")) if arg == RUN else arg for arg in argv))
    no_traceback(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
