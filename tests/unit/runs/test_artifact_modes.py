"""Run artifacts get the mode of any new file (0666 less the umask), not mkstemp's 0600 (issue 7)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_rageval.runs.folder import write_json_atomic, write_text_atomic

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


@pytest.fixture
def umask() -> Iterator[Callable[[int], int]]:
    """0o022 for the test (``umask(0o027)`` sets another); the process umask is restored afterwards."""
    saved = os.umask(0o022)
    yield os.umask
    os.umask(saved)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_atomic_writes_follow_the_umask(tmp_path: Path, umask: Callable[[int], int], mask: int, expected: int) -> None:
    umask(mask)
    write_text_atomic(tmp_path / "latest", "run\n")
    write_json_atomic(tmp_path / "sub" / "metrics.json", {"a": 1})
    write_text_atomic(tmp_path / "latest", "run2\n")  # replacing keeps the mode too
    assert mode(tmp_path / "latest") == expected and mode(tmp_path / "sub" / "metrics.json") == expected
    assert (tmp_path / "latest").read_text() == "run2\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["latest", "metrics.json", "sub"]  # no temp file left


def test_every_artifact_of_a_run_is_0644(pytester: pytest.Pytester, umask: Callable[[int], int]) -> None:
    pytester.makefile(
        ".jsonl", **{"eval_sets/s": json.dumps({"id": "a", "question": "q", "gold_supports": [{"rel_path": "a.md"}]})}
    )
    # A callable target: this file runs before test_client.py, whose tests need httpx's first use outside pytester.
    pytester.makepyfile(
        rag="def ask(question, params):\n    return {'answer': 'A.', 'debug': {'retrieved_chunks': [{'rel_path': 'a.md'}]}}\n"
    )
    result = pytester.runpytest(
        "--rageval",
        "--rageval-judge=none",
        "--rageval-target=rag:ask",
        "--rageval-baseline=baseline/metrics.json",
        "--rageval-update-baseline",
    )
    result.assert_outcomes(passed=1)
    results = pytester.path / "results"
    run_dir = results / (results / "latest").read_text().strip()
    files = [results / "latest", pytester.path / "baseline" / "metrics.json"]
    files += [run_dir / name for name in ("metrics.json", "config.json", "results.jsonl", "report.html")]
    assert {str(p.relative_to(pytester.path)): oct(mode(p)) for p in files} == {
        str(p.relative_to(pytester.path)): oct(0o644) for p in files
    }
