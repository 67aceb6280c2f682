"""Bounds on what an eval line, a folder, a baseline or the judge cache can ask for: each fault is one clear error.

pytester runs with a callable target (``rag:ask``, written into the pytester folder) and, for the judge
cache, the loopback OpenAI-compatible server. Each run asserts what a user notices: the bad thing is one
error naming the file (line, field, metric) and the problem, every other case runs, no traceback.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from openai_server import OpenAIServer, verdicts

from pytest_rageval.judges.cache import DB_NAME

RAG = "def ask(question, params):\n    return {'answer': 'The fee is 5.', 'retrieved_chunks': [{'rel_path': 'a.md', 'text': 'The fee is 5.'}]}\n"
GOOD = [
    {"id": f"good{i}", "question": f"What is the fee {i}?", "gold_supports": [{"rel_path": "a.md"}]} for i in range(3)
]


def project(pytester: pytest.Pytester, lines: list[Any], name: str = "eval_sets/s") -> None:
    pytester.makepyfile(rag=RAG)
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    path = pytester.path / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--rageval", "--rageval-judge=none", "--rageval-target=rag:ask", "-p", "no:cacheprovider", *extra
    )


def latest_metrics(root: Path) -> dict[str, Any]:
    run_id = (root / "results" / "latest").read_text().strip()
    return cast("dict[str, Any]", json.loads((root / "results" / run_id / "metrics.json").read_text()))


def no_traceback(result: pytest.RunResult) -> None:
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]


# --------------------------------------------------------------------------- hostile JSON in a line

HOSTILE = {
    "deep nesting": (
        '{"id": "deep", "question": "q?", "metadata": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}",
        "field 'metadata.x[0][0][0][0]...': nested deeper than 64 levels",
    ),
    "long integer": (
        '{"id": "long", "question": "q?", "params": {"n": ' + "7" * 5000 + "}}",
        "field 'params.n': a number of 5000 characters (at most 100)",
    ),
    "nan": ('{"id": "nan", "question": "q?", "params": {"t": NaN}}', "field 'params.t': NaN is not valid JSON"),
    "infinity": (
        '{"id": "inf", "question": "q?", "thresholds": {"mrr": -Infinity}}',
        "field 'thresholds.mrr': -Infinity is not valid JSON",
    ),
    "lone surrogate": (
        '{"id": "sur", "question": "q?", "metadata": {"k": "x\\ud800"}}',
        "field 'metadata.k': a lone surrogate (\\ud800) is not valid Unicode text",
    ),
    "duplicate key": (
        '{"id": "dup", "question": "q?", "question": "again?"}',
        "field 'question': key 'question' is given twice in one object",
    ),
}


def test_hostile_json_is_one_bad_line_and_every_other_line_and_set_runs(pytester: pytest.Pytester) -> None:
    project(pytester, [GOOD[0], *(text for text, _ in HOSTILE.values()), GOOD[1]], name="eval_sets/hostile")
    project(pytester, [GOOD[2]], name="eval_sets/other")
    result = run(pytester)
    result.assert_outcomes(passed=3, errors=len(HOSTILE))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    for number, (_, message) in enumerate(HOSTILE.values(), start=2):
        assert f"eval_sets/hostile.jsonl:{number}: {message}" in out, message
    no_traceback(result)
    metrics = latest_metrics(pytester.path)
    assert metrics["complete"] is True and metrics["invalid_lines"] == len(HOSTILE) and metrics["passed"] == 3


# --------------------------------------------------------------------------- ids

BAD_IDS = {
    "newline": ("a\nb", "U+000A (a control character)"),
    "tab": ("a\tb", "U+0009 (a control character)"),
    "nul": ("a\x00b", "U+0000 (a control character)"),
    "esc": ("a\x1b[2Jb", "U+001B (a control character)"),
    "del": ("a\x7fb", "U+007F (a control character)"),
    "c1": ("a\x85b", "U+0085 (a control character)"),
    "bidi": ("a\u202eb", "U+202E (a format character)"),
    "leading space": (" a", "must not start or end with whitespace"),
    "trailing space": ("a ", "must not start or end with whitespace"),
    "colons": ("a::b", "must not contain '::'"),
    "bracket": ("a[1]", "must not contain '[' or ']'"),
    "error item name": ("line1", "'line1' is reserved"),
}


def test_unsafe_ids_are_one_error_each_and_cannot_collide_with_error_items(pytester: pytest.Pytester) -> None:
    # Line 1 is broken, so its error item is `line1`; an id "line1" further down must not take that name.
    lines: list[Any] = ['{"id": "broken", ']
    lines += [{"id": case_id, "question": "q?"} for case_id, _ in BAD_IDS.values()]
    lines += ['{"id": "a\\ud800", "question": "q?"}', *GOOD]
    project(pytester, lines)
    result = run(pytester)
    result.assert_outcomes(passed=len(GOOD), errors=len(BAD_IDS) + 2)
    out = result.stdout.str()
    for number, (_, problem) in enumerate(BAD_IDS.values(), start=2):
        assert f"eval_sets/s.jsonl:{number}: field 'id': " in out and problem in out, problem
    assert f"eval_sets/s.jsonl:{len(BAD_IDS) + 2}: field 'id': a lone surrogate (\\ud800)" in out
    assert "\x1b[2J" not in out and "\x00" not in out
    no_traceback(result)
    metrics = latest_metrics(pytester.path)
    assert (
        metrics["invalid_lines"] == len(BAD_IDS) + 2 and metrics["passed"] == len(GOOD) and metrics["complete"] is True
    )


# --------------------------------------------------------------------------- repeat


def test_repeat_is_capped_at_100(pytester: pytest.Pytester) -> None:
    # 101, not 10**8: without the cap this test must fail, not run a hundred million times.
    project(
        pytester,
        [{"id": "many", "question": "q?", "repeat": 101}, {"id": "hundred", "question": "q?", "repeat": 100}, *GOOD],
    )
    result = run(pytester)
    result.assert_outcomes(passed=len(GOOD) + 1, errors=1)
    result.stdout.fnmatch_lines(["*eval_sets/s.jsonl:1: field 'repeat': Input should be less than or equal to 100*"])
    no_traceback(result)


# --------------------------------------------------------------------------- symlinks


@pytest.mark.parametrize("args", [[], ["-n", "2"], ["eval_sets"]], ids=["globs", "globs-xdist", "folder-argument"])
def test_dangling_symlink_and_loop_are_one_error_item_each(pytester: pytest.Pytester, args: list[str]) -> None:
    project(pytester, GOOD)
    sets = pytester.path / "eval_sets"
    os.symlink(pytester.path / "missing" / "gone.jsonl", sets / "dangling.jsonl")
    os.symlink("loop.jsonl", sets / "loop.jsonl")
    result = run(pytester, *args)
    if args == ["eval_sets"] and int(pytest.__version__.split(".")[0]) < 8:
        # pytest 7 has no pytest_collect_directory: a folder's broken links are skipped silently, as pytest does
        result.assert_outcomes(passed=len(GOOD))
        no_traceback(result)
        return
    result.assert_outcomes(passed=len(GOOD), errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "*eval_sets/dangling.jsonl:0: cannot read eval set: broken symlink to *gone.jsonl* (No such file or directory)*",
            "*eval_sets/loop.jsonl:0: cannot read eval set: broken symlink to 'loop.jsonl' (Too many levels of symbolic links)*",
        ]
    )
    no_traceback(result)
    assert latest_metrics(pytester.path)["invalid_lines"] == 2


# --------------------------------------------------------------------------- baselines


@pytest.mark.parametrize(
    ("value", "shown"),
    [('"0.9"', '"0.9"'), ("NaN", "NaN"), ("true", "true"), ('{"x": 1}', '{"x": 1}'), ("Infinity", "Infinity")],
    ids=["string", "nan", "bool", "object", "infinity"],
)
def test_baseline_with_a_non_number_gated_value_is_refused(pytester: pytest.Pytester, value: str, shown: str) -> None:
    project(pytester, GOOD)
    run(pytester, "--rageval-baseline=base/metrics.json", "--rageval-update-baseline").assert_outcomes(passed=len(GOOD))
    base = pytester.path / "base" / "metrics.json"
    data = json.loads(base.read_text())
    assert isinstance(data["aggregate_metrics"]["mrr_avg"], float)
    text = json.dumps(data).replace(
        f'"mrr_avg": {json.dumps(data["aggregate_metrics"]["mrr_avg"])}', f'"mrr_avg": {value}'
    )
    base.write_text(text)
    result = run(pytester, "--rageval-baseline=base/metrics.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"*baseline refused: {base}: mrr_avg is {shown}, not a number*"])
    no_traceback(result)


def test_null_on_one_side_is_said_not_silent(pytester: pytest.Pytester) -> None:
    project(pytester, GOOD)
    run(pytester, "--rageval-baseline=base/metrics.json", "--rageval-update-baseline").assert_outcomes(passed=len(GOOD))
    base = pytester.path / "base" / "metrics.json"
    data = json.loads(base.read_text())
    data["aggregate_metrics"]["mrr_avg"] = None
    base.write_text(json.dumps(data))
    result = run(pytester, "--rageval-baseline=base/metrics.json")
    assert result.ret == 0  # documented: a metric null on one side is not gated, and does not fail the gate
    result.stdout.fnmatch_lines(["*not compared: mrr_avg (null in the baseline, 1.000 in this run)*"])


# --------------------------------------------------------------------------- history


def test_history_shows_a_non_number_aggregate_as_unknown(tmp_path: Path) -> None:
    for name, mrr in (("r1", '"high"'), ("r2", "0.5"), ("r3", "1" + "0" * 400)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(
            f'{{"run_id": "{name}", "timestamp": "{name}", "aggregate_metrics": {{"mrr_avg": {mrr}}}}}'
        )
    result = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "history", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[2] for line in lines[2:4]] == ["?", "0.500"]
    assert f"? {tmp_path / 'r1' / 'metrics.json'}: mrr_avg not a number" in lines
    # a number beyond float range is no value at all: the run is left out, with a note
    assert (
        f"note: an older run left out of the history: {tmp_path / 'r3' / 'metrics.json'}: "
        "aggregate_metrics.mrr_avg: a number beyond float range" in lines
    )


def test_history_shows_control_characters_escaped(tmp_path: Path) -> None:
    (tmp_path / "r1").mkdir()
    hostile = json.dumps("r1\x1b[2J\x1b]0;pwned\x07")
    (tmp_path / "r1" / "metrics.json").write_text(
        f'{{"run_id": {hostile}, "timestamp": "t", "aggregate_metrics": {{"mrr_avg": 0.5}}}}'
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "history", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "r1\\x1b[2J\\x1b]0;pwned\\x07" in result.stdout


# --------------------------------------------------------------------------- judge cache


def _garbage(db: Path) -> None:
    db.write_bytes(b"\x00\xffnot sqlite at all" * 300)


def _truncated(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TABLE verdicts (key TEXT PRIMARY KEY, verdict TEXT NOT NULL, model TEXT, metric TEXT, prompt_version TEXT, created_at TEXT)"
    )
    conn.executemany(
        "INSERT INTO verdicts VALUES (?, ?, 'm', 'g', '1', 't')", [(str(i), "x" * 300) for i in range(400)]
    )
    conn.commit()
    conn.close()
    with open(db, "r+b") as fh:
        fh.truncate(db.stat().st_size // 2)


def _other_shape(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE verdicts (id INTEGER)")
    conn.commit()
    conn.close()


def _unreadable(db: Path) -> None:
    db.mkdir()  # a folder where the file should be: sqlite cannot open it (a chmod 000 file would not stop root)


CORRUPT = {"garbage": _garbage, "truncated": _truncated, "other-shape": _other_shape, "unreadable": _unreadable}


@pytest.fixture
def judged(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("RAGEVAL_JUDGE_API_KEY", "sk-test-cache")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    project(pytester, [{**case, "reference_answer": "The fee is 5."} for case in GOOD])
    (pytester.path / ".rageval_cache").mkdir()
    return pytester


def run_judged(pytester: pytest.Pytester, url: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--rageval",
        "--rageval-target=rag:ask",
        "--rageval-judge=openai",
        "--rageval-judge-model=m",
        f"--rageval-judge-base-url={url}",
        "-p",
        "no:cacheprovider",
        *extra,
    )


@pytest.mark.parametrize(
    ("fault", "xdist"),
    [*[(name, []) for name in CORRUPT], ("garbage", ["-n", "2"])],
    ids=[*CORRUPT, "garbage-xdist"],
)
def test_corrupt_judge_cache_is_one_usage_error_with_the_fix(
    judged: pytest.Pytester, fault: str, xdist: list[str]
) -> None:
    db = judged.path / ".rageval_cache" / DB_NAME
    CORRUPT[fault](db)
    with OpenAIServer(verdicts()) as server:
        result = run_judged(judged, server.base_url, *xdist)
        assert not server.requests  # stopped before any case
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"pytest-rageval: judge cache {db} is corrupt or unreadable" in err and "--rageval-clear-cache" in err
    assert err.count("judge cache") == 1
    no_traceback(result)
    with OpenAIServer(verdicts()) as server:  # the fix the message names works
        run_judged(judged, server.base_url, "--rageval-clear-cache", *xdist).assert_outcomes(passed=len(GOOD))


def test_wrong_type_cache_entry_is_a_miss(judged: pytest.Pytester) -> None:
    with OpenAIServer(verdicts()) as server:
        run_judged(judged, server.base_url).assert_outcomes(passed=len(GOOD))
    db = judged.path / ".rageval_cache" / DB_NAME
    conn = sqlite3.connect(db)
    conn.execute("UPDATE verdicts SET verdict = 42")
    conn.commit()
    conn.close()
    with OpenAIServer(verdicts()) as server:
        result = run_judged(judged, server.base_url)
        assert server.requests  # every entry missed and was asked again
    result.assert_outcomes(passed=len(GOOD))
    no_traceback(result)
