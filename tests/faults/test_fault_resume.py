"""Resume is exact or refused; an unwritable output folder stops the run before any case (issue 8).

Real subprocesses against the loopback ask server: a run is made, then damaged
as a crash or a full disk leaves it, then resumed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk
from needs import missing

CASES = 6


def respond(body: dict[str, Any]) -> Any:
    return answer("A.", [chunk("docs/a.md", "# A", 1)])


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    rows = [
        json.dumps(
            {
                "id": f"c{i:03d}",
                "question": f"q{i}",
                "gold_supports": [{"rel_path": "docs/a.md", "heading_path": "# A"}],
            }
        )
        for i in range(CASES)
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(rows) + "\n"})
    return pytester


def rageval(pytester: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--rageval", "--rageval-judge=none", f"--rageval-target={url}", "-p", "no:cacheprovider", *args, timeout=60
    )


def made_run(pytester: pytest.Pytester, url: str) -> Path:
    """A complete run of every case; its folder."""
    rageval(pytester, url).assert_outcomes(passed=CASES)
    (run_dir,) = [p for p in (pytester.path / "results").iterdir() if p.is_dir()]
    return run_dir


def lines(run_dir: Path) -> list[str]:
    return (run_dir / "results.jsonl").read_text().splitlines()


def clean(result: pytest.RunResult) -> str:
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    return output


def usage_error(result: pytest.RunResult) -> str:
    """The one ``ERROR: pytest-rageval: ...`` line of a run that stopped at start-up with exit status 4."""
    output = clean(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    (line,) = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert line.startswith("ERROR: pytest-rageval: "), line
    return line


@pytest.mark.parametrize(
    ("damage", "xdist"),
    [
        ("torn", []),
        ("torn", ["-n", "2"]),
        ("no-newline", []),
        ("garbage-line", []),
    ],
    ids=["torn-serial", "torn-xdist", "no-newline", "garbage-line"],
)
def test_resume_after_a_torn_last_line_is_exact(project: pytest.Pytester, xdist: list[str], damage: str) -> None:
    with AskServer(respond) as server:
        run_dir = made_run(project, server.url)
        results = run_dir / "results.jsonl"
        data = results.read_bytes()
        last = data.rstrip(b"\n").rsplit(b"\n", 1)[1]
        if damage == "torn":  # the last write cut short (kill -9, disk full): half a record, no newline
            results.write_bytes(data[: len(data) - len(last) // 2 - 1])
        elif damage == "no-newline":  # the whole record, only its newline lost: it counts
            results.write_bytes(data[:-1])
        else:  # a last line of zeros, as a crash can leave
            results.write_bytes(data[: len(data) - len(last) - 1] + b"\0" * 40 + b"\n")
        asked = len(server.requests)
        result = rageval(project, server.url, f"--rageval-resume={run_dir}", *xdist)
        output = clean(result)
        rerun = 0 if damage == "no-newline" else 1
        assert len(server.requests) - asked == rerun
    result.assert_outcomes(passed=rerun)
    records = [json.loads(line) for line in lines(run_dir)]
    assert sorted(r["test_case_id"] for r in records) == [f"c{i:03d}" for i in range(CASES)]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["complete"] is True and metrics["total_tests"] == metrics["passed"] == CASES
    if rerun:
        assert "results.jsonl ended in a torn line" in output and f"{CASES - 1} records kept" in output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["-k", "c001 or c002"], "-k: none in the run, 'c001 or c002' now"),
        (["-m", "judge"], "-m: none in the run, 'judge' now"),
        (["--rageval-k=3"], "k: 5 in the run, 3 now"),
        (["--rageval-judge=lexical"], "judge: 'none' in the run, 'lexical' now"),
    ],
    ids=["keyword", "marks", "k", "judge"],
)
def test_resume_with_another_configuration_is_refused(project: pytest.Pytester, args: list[str], named: str) -> None:
    with AskServer(respond) as server:
        run_dir = made_run(project, server.url)
        before = (run_dir / "results.jsonl").read_bytes()
        (run_dir / "results.jsonl").write_bytes(before.rsplit(b"\n", 2)[0] + b"\n")  # the last case is still to run
        asked = len(server.requests)
        line = usage_error(rageval(project, server.url, f"--rageval-resume={run_dir}", *args))
        assert len(server.requests) == asked
    assert "was made with another configuration" in line and named in line, line
    assert len(lines(run_dir)) == CASES - 1


def test_resume_of_a_killed_run_without_config_json_compares_its_records(project: pytest.Pytester) -> None:
    with AskServer(respond) as server:
        run_dir = made_run(project, server.url)
        (run_dir / "config.json").unlink()
        line = usage_error(rageval(project, server.url, f"--rageval-resume={run_dir}", "--rageval-k=4"))
    assert "k: 5 in the run, 4 now" in line


def test_a_second_resume_of_the_same_run_is_refused(project: pytest.Pytester) -> None:
    hold, release = threading.Event(), threading.Event()

    def held(
        body: dict[str, Any],
    ) -> Any:  # once the run is made, the first resume's one case waits for the second resume
        if hold.is_set() and body["question"] == f"q{CASES - 1}":
            release.wait(30)
        return respond(body)

    with AskServer(held) as server:
        run_dir = made_run(project, server.url)
        hold.set()
        data = (run_dir / "results.jsonl").read_bytes()
        (run_dir / "results.jsonl").write_bytes(data.rsplit(b"\n", 2)[0] + b"\n")
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "-p",
            "no:cacheprovider",
            f"--rageval-resume={run_dir}",
        ]
        first = subprocess.Popen(cmd, cwd=project.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 60
            while server.questions().count(f"q{CASES - 1}") < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            line = usage_error(rageval(project, server.url, f"--rageval-resume={run_dir}"))
        finally:
            release.set()
            output = first.communicate(timeout=60)[0]
    assert f"{run_dir} is being resumed by process {first.pid}" in line, line
    assert first.returncode == 0, output
    assert len(lines(run_dir)) == CASES
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["complete"] is True and metrics["total_tests"] == CASES
    assert not (run_dir / ".rageval-resume.lock").exists()


def test_a_lock_left_by_a_killed_session_does_not_block_a_resume(project: pytest.Pytester) -> None:
    with AskServer(respond) as server:
        run_dir = made_run(project, server.url)
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                (
                    "import sys, time; from pathlib import Path; from pytest_rageval.runs.folder import RunLock\n"
                    f"RunLock(Path({str(run_dir)!r})).acquire(); print('locked', flush=True); time.sleep(600)"
                ),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        assert (run_dir / ".rageval-resume.lock").exists()  # left behind, but no process holds it
        (run_dir / "results.jsonl").write_bytes((run_dir / "results.jsonl").read_bytes().rsplit(b"\n", 2)[0] + b"\n")
        result = rageval(project, server.url, f"--rageval-resume={run_dir}")
    clean(result)
    result.assert_outcomes(passed=1)
    assert not (run_dir / ".rageval-resume.lock").exists()


def _immutable_dir_works() -> bool:
    """chattr +i stops writes (even root's) on this file system, and we may set it."""
    probe = Path(tempfile.mkdtemp())
    try:
        if subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode != 0:
            return False
        try:
            (probe / "x").touch()
        except OSError:
            return True
        return False
    except OSError:
        return False
    finally:
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
        for child in probe.iterdir():
            child.unlink()
        probe.rmdir()


def test_an_output_folder_under_a_file_is_a_usage_error_before_any_case(project: pytest.Pytester) -> None:
    (project.path / "blocker").write_text("a file, not a folder\n")
    with AskServer(respond) as server:
        line = usage_error(rageval(project, server.url, "--rageval-output=blocker/results"))
        assert server.requests == []
    assert "--rageval-output:" in line and "blocker is not a folder" in line, line


def test_an_unwritable_output_folder_is_a_usage_error_before_any_case(project: pytest.Pytester) -> None:
    if not _immutable_dir_works():
        missing("chattr +i is not available here (needs root and a file system that supports it)")
    out = project.path / "results"
    out.mkdir()
    subprocess.run(["chattr", "+i", str(out)], check=True)
    try:
        with AskServer(respond) as server:
            line = usage_error(rageval(project, server.url))
            assert server.requests == []
        assert list(out.iterdir()) == []
    finally:
        subprocess.run(["chattr", "-i", str(out)], check=True)
    assert "--rageval-output: cannot write in" in line and "Operation not permitted" in line, line


def test_an_unwritable_run_folder_is_refused_before_resuming(project: pytest.Pytester) -> None:
    if not _immutable_dir_works():
        missing("chattr +i is not available here (needs root and a file system that supports it)")
    with AskServer(respond) as server:
        run_dir = made_run(project, server.url)
        (run_dir / "results.jsonl").write_bytes((run_dir / "results.jsonl").read_bytes().rsplit(b"\n", 2)[0] + b"\n")
        asked = len(server.requests)
        subprocess.run(["chattr", "+i", str(run_dir)], check=True)
        try:
            line = usage_error(rageval(project, server.url, f"--rageval-resume={run_dir}"))
            assert len(server.requests) == asked
        finally:
            subprocess.run(["chattr", "-i", str(run_dir)], check=True)
    assert "--rageval-resume:" in line and "cannot write in" in line, line


def test_a_disk_that_fills_mid_run_stops_it_cleanly_and_the_resume_is_exact(project: pytest.Pytester) -> None:
    """A file-size limit (RLIMIT_FSIZE, as a full disk does) cuts results.jsonl mid-record: no INTERNALERROR,
    the session stops with the reason, and a resume once there is room completes the run exactly."""
    import resource

    def small_files() -> None:
        resource.setrlimit(
            resource.RLIMIT_FSIZE, (3000, 3000)
        )  # config.json fits; results.jsonl holds 2 records and a half

    with AskServer(respond) as server:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "-p",
            "no:cacheprovider",
        ]
        full = subprocess.run(cmd, cwd=project.path, preexec_fn=small_files, capture_output=True, text=True, timeout=60)
        output = full.stdout + full.stderr
        assert "INTERNALERROR" not in output and "Traceback" not in output, output
        assert "results.jsonl: File too large; the run stops here" in output, output
        (run_dir,) = [p for p in (project.path / "results").iterdir() if p.is_dir()]
        assert not (run_dir / "results.jsonl").read_bytes().endswith(b"\n")  # the last record is torn
        result = rageval(project, server.url, f"--rageval-resume={run_dir}")
    clean(result)
    assert result.ret == 0
    records = [json.loads(line) for line in lines(run_dir)]
    assert sorted(r["test_case_id"] for r in records) == [f"c{i:03d}" for i in range(CASES)]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["complete"] is True and metrics["total_tests"] == CASES
