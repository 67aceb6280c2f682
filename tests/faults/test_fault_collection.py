"""Eval-set collection over folder links and broken links: each real eval set once, each bad link one error item.

pytester runs with a callable target (``rag:ask``) that appends a line to ``calls.txt`` per RAG call, so a case
collected twice shows as two calls. A folder link back up (``eval_sets/self -> .``) is one error item naming the
link and every case runs once; collection with two such links ends (a subprocess with a timeout, so a regression
fails instead of hanging). A dangling link beside an eval set named on the command line plays no part in that
run; one the globs match is one error item, outside ``eval_set_hash``. Serial and ``-n 2`` runs agree.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_rageval.cli import main as rageval_main

RAG = (
    "import os\n"
    "CALLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'calls.txt')\n"
    "def ask(question, params):\n"
    "    with open(CALLS, 'a', encoding='utf-8') as f:\n"
    "        f.write(question + '\\n')\n"
    "    return {'answer': 'The fee is 5.', 'retrieved_chunks': [{'rel_path': 'a.md', 'text': 'The fee is 5.'}]}\n"
)
FOLDER_ARG = pytest.mark.parametrize("args", [[], ["eval_sets"]], ids=["globs", "folder-argument"])


def cases(prefix: str, count: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i}", "question": f"What is {prefix} {i}?", "gold_supports": [{"rel_path": "a.md"}]}
        for i in range(count)
    ]


def write_set(root: Path, name: str, lines: list[dict[str, Any]]) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def project(pytester: pytest.Pytester) -> Path:
    """``eval_sets/ids.jsonl`` (3 cases) and ``eval_sets/sub/more.jsonl`` (1 case)."""
    pytester.makepyfile(rag=RAG)
    write_set(pytester.path, "eval_sets/ids.jsonl", cases("ids", 3))
    write_set(pytester.path, "eval_sets/sub/more.jsonl", cases("more", 1))
    return pytester.path / "eval_sets"


OPTIONS = ("--rageval", "--rageval-judge=none", "--rageval-target=rag:ask", "-p", "no:cacheprovider")


def run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(*OPTIONS, *extra)


def calls(root: Path) -> list[str]:
    """The questions the RAG was asked, one per call, in no particular order."""
    path = root / "calls.txt"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return sorted(lines)


def latest(root: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    run_id = (root / "results" / "latest").read_text().strip()
    folder = root / "results" / run_id
    records = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]
    return json.loads((folder / "metrics.json").read_text()), records


def no_traceback(result: pytest.RunResult) -> None:
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]


ALL_QUESTIONS = sorted(c["question"] for c in cases("ids", 3) + cases("more", 1))


# --------------------------------------------------------------------------- folder links back up


@FOLDER_ARG
def test_a_folder_link_back_up_is_one_error_item_and_every_case_runs_once(
    pytester: pytest.Pytester, xdist: list[str], args: list[str]
) -> None:
    sets = project(pytester)
    os.symlink(".", sets / "self")
    result = run(pytester, *xdist, *args)
    result.assert_outcomes(passed=4, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*eval_sets/self: a link back to a folder already collected (eval_sets); not followed*"]
    )
    no_traceback(result)
    assert calls(pytester.path) == ALL_QUESTIONS  # once each, not once per trip round the loop
    metrics, records = latest(pytester.path)
    assert metrics["passed"] == 4 and metrics["invalid_lines"] == 1 and metrics["cases_in_eval_set"] == 4
    assert sorted(metrics["eval_set_files"]) == ["eval_sets/ids.jsonl", "eval_sets/sub/more.jsonl"]
    assert sorted(r["key"] for r in records if not r.get("invalid_line")) == [
        "eval_sets/ids.jsonl::ids0",
        "eval_sets/ids.jsonl::ids1",
        "eval_sets/ids.jsonl::ids2",
        "eval_sets/sub/more.jsonl::more0",
    ]


@FOLDER_ARG
def test_collection_with_two_links_back_up_ends(pytester: pytest.Pytester, args: list[str]) -> None:
    # Each link doubles the paths of a walk that follows links: 2**40 of them without a guard.
    sets = project(pytester)
    os.symlink(".", sets / "self")
    os.symlink("..", sets / "sub" / "up")
    result = pytester.runpytest_subprocess(*OPTIONS, *args, timeout=60)
    result.assert_outcomes(passed=4, errors=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines_random(
        [
            "*eval_sets/self: a link back to a folder already collected (eval_sets); not followed*",
            "*eval_sets/sub/up: a link back to a folder already collected (eval_sets); not followed*",
        ]
    )
    no_traceback(result)
    assert calls(pytester.path) == ALL_QUESTIONS


@FOLDER_ARG
def test_a_link_to_a_folder_outside_is_followed_and_a_file_reached_twice_runs_once(
    pytester: pytest.Pytester, args: list[str]
) -> None:
    sets = project(pytester)
    write_set(pytester.path, "shared/x.jsonl", cases("x", 2))
    os.symlink(pytester.path / "shared", sets / "ext")  # eval_sets/ext/x.jsonl
    os.symlink(pytester.path / "shared" / "x.jsonl", sets / "x_again.jsonl")  # the same file, a second way
    result = run(pytester, *args)
    result.assert_outcomes(passed=6)
    assert result.ret == pytest.ExitCode.OK
    no_traceback(result)
    assert calls(pytester.path) == sorted(ALL_QUESTIONS + [c["question"] for c in cases("x", 2)])
    metrics, records = latest(pytester.path)
    # the file runs once, under the path met first: pytest 8 walks folders and files in one name order,
    # pytest 7 a folder's files before its subfolders
    first = "eval_sets/ext/x.jsonl" if hasattr(pytest, "Dir") or not args else "eval_sets/x_again.jsonl"
    assert sorted(metrics["eval_set_files"]) == sorted([first, "eval_sets/ids.jsonl", "eval_sets/sub/more.jsonl"])
    assert sorted(r["key"] for r in records if "::x" in r["key"]) == [f"{first}::x0", f"{first}::x1"]


# --------------------------------------------------------------------------- dangling links


def test_a_dangling_sibling_plays_no_part_in_a_run_of_named_files(
    pytester: pytest.Pytester, xdist: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    sets = project(pytester)
    run(pytester, "eval_sets/ids.jsonl").assert_outcomes(passed=3)
    clean_hash = latest(pytester.path)[0]["eval_set_hash"]
    calls(pytester.path)
    os.symlink("gone.jsonl", sets / "old.jsonl")
    result = run(pytester, *xdist, "eval_sets/ids.jsonl")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.OK
    assert "old.jsonl" not in result.stdout.str()
    no_traceback(result)
    assert calls(pytester.path) == sorted(c["question"] for c in cases("ids", 3))
    metrics, records = latest(pytester.path)
    assert metrics["eval_set_hash"] == clean_hash and list(metrics["eval_set_files"]) == ["eval_sets/ids.jsonl"]
    assert metrics["invalid_lines"] == 0 and len(records) == 3
    capsys.readouterr()
    assert rageval_main(["history", str(pytester.path / "results")]) == 0
    history = capsys.readouterr().out
    assert f"eval set {clean_hash[:12]} (eval_sets/ids.jsonl): 2 runs" in history and "old.jsonl" not in history


def test_a_dangling_link_the_globs_match_is_one_error_item_outside_the_eval_set_hash(pytester: pytest.Pytester) -> None:
    sets = project(pytester)
    run(pytester).assert_outcomes(passed=4)
    clean_hash = latest(pytester.path)[0]["eval_set_hash"]
    calls(pytester.path)
    os.symlink("gone.jsonl", sets / "old.jsonl")
    seen = []
    for extra in ([], ["-n", "2"]):
        result = run(pytester, *extra)
        result.assert_outcomes(passed=4, errors=1)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.stdout.fnmatch_lines(
            [
                "*eval_sets/old.jsonl:0: cannot read eval set: broken symlink to 'gone.jsonl' (No such file or directory)*"
            ]
        )
        no_traceback(result)
        assert calls(pytester.path) == ALL_QUESTIONS
        metrics, records = latest(pytester.path)
        assert metrics["eval_set_hash"] == clean_hash, extra
        assert sorted(metrics["eval_set_files"]) == ["eval_sets/ids.jsonl", "eval_sets/sub/more.jsonl"]
        assert metrics["invalid_lines"] == 1 and metrics["cases_in_eval_set"] == 4
        seen.append(sorted(r["key"] for r in records))
    assert seen[0] == seen[1] and "eval_sets/old.jsonl::line0" in seen[0]


# --------------------------------------------------------------------------- the globs


GLOBS = [
    "eval_sets/**/*.jsonl",
    "eval_sets/*.jsonl",
    "eval_sets/*/*.jsonl",
    "eval_sets/**",
    "**/*.jsonl",
    "eval_sets/.hidden/*.jsonl",
    "eval_sets/.*",
    "eval_sets/[ab]?.jsonl",
    "eval_sets/sub/deep/x.jsonl",
    "eval_sets/nothing/*.jsonl",
    "eval_sets/**/deep/*.jsonl",
]


@pytest.mark.parametrize("pattern", GLOBS)
def test_without_links_the_globs_match_what_glob_matches(tmp_path: Path, pattern: str) -> None:
    import glob

    from pytest_rageval.evaluation.evalpaths import expand_globs

    for name in [
        "a1.jsonl",
        "b2.jsonl",
        "c.jsonl",
        ".dot.jsonl",
        "notes.txt",
        "sub/x.jsonl",
        "sub/deep/x.jsonl",
        ".hidden/h.jsonl",
        "sub/.hidden/h.jsonl",
        "top.jsonl",
    ]:
        where = tmp_path / ("" if name == "top.jsonl" else "eval_sets") / name
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text("{}\n")
    expected = [Path(p) for p in sorted(glob.glob(str(tmp_path / pattern), recursive=True)) if not p.endswith(os.sep)]
    assert expand_globs(tmp_path, [pattern]).paths == expected
