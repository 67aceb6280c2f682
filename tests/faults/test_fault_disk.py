"""A file system that refuses a write (a full disk, a file-size limit): the run line names what was not written."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e  # the tests here run pytest or the rageval command in processes of their own

RAG = "def ask(question, params):\n    return {'answer': 'The fee is 5.', 'retrieved_chunks': [{'rel_path': 'a.md', 'text': 'The fee is 5.'}]}\n"


def _small_files() -> None:
    """In the child: writes past 10 kB fail with EFBIG (as on a full disk) instead of killing it."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000))


def test_the_run_line_names_the_files_a_full_disk_kept_from_being_written(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(rag=RAG)
    (pytester.path / "eval_sets").mkdir()
    line = {"id": "a", "question": "What is the fee?", "gold_supports": [{"rel_path": "a.md"}]}
    (pytester.path / "eval_sets" / "s.jsonl").write_text(json.dumps(line) + "\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--rageval",
            "--rageval-judge=none",
            "--rageval-target=rag:ask",
            "-p",
            "no:cacheprovider",
        ],
        cwd=pytester.path,
        preexec_fn=_small_files,
        capture_output=True,
        text=True,
        timeout=300,
    )
    run = pytester.path / "results" / sorted(p.name for p in (pytester.path / "results").iterdir() if p.is_dir())[-1]
    assert (run / "metrics.json").is_file() and not (run / "report.html").exists()  # report.html is the one over 10 kB
    assert f"run: {run} (metrics.json, results.jsonl written; not written: report.html)" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
