"""runs/folder.py: one run folder written and read through jsonlines; no line it cannot read is dropped or rewritten."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonlines
import pytest

from pytest_rageval import cli, safejson
from pytest_rageval.runs.folder import RunFolder, RunFolderError, UnreadableRecord, read_records, repair_results

RECORDS: list[dict[str, Any]] = [
    {"key": "s.jsonl::a", "test_case_id": "a", "outcome": "passed", "metrics": {"mrr": 1.0}, "answer": "é\u2028ü"},
    {"key": "s.jsonl::b", "test_case_id": "b", "outcome": "failed", "metrics": {"mrr": 0.5}, "error": None},
    {
        "key": "s.jsonl::c",
        "test_case_id": "c",
        "outcome": "error",
        "metrics": {},
        "error": {"kind": "timeout", "message": "timed out after 30 s"},
    },
]


@pytest.fixture
def umask_022() -> Iterator[None]:
    saved = os.umask(0o022)
    yield
    os.umask(saved)


def written(tmp_path: Path, records: list[dict[str, Any]] = RECORDS) -> RunFolder:
    folder = RunFolder.new(tmp_path / "results", "run-1", config=lambda: {"run_id": "run-1"})
    for record in records:
        folder.add(record)
    folder.finish({"run_id": "run-1", "aggregate_metrics": {"mrr_avg": 0.75}}, {"run_id": "run-1", "k": 5})
    return folder


def lines_of(folder: RunFolder) -> list[str]:
    """results.jsonl's lines, newline kept (split on "\\n" only: a record may hold U+2028, which splitlines splits on)."""
    return [line + "\n" for line in folder.results_path.read_text(encoding="utf-8").split("\n")[:-1]]


def test_files_are_written_as_before_and_read_back(tmp_path: Path) -> None:
    folder = written(tmp_path)
    # byte for byte what the writers before RunFolder made: one safejson line a record, JSON files indented by 2,
    # with the format they are written in first
    assert folder.results_path.read_text(encoding="utf-8") == "".join(safejson.dumps(r) + "\n" for r in RECORDS)
    metrics = {"format_version": 1, "run_id": "run-1", "aggregate_metrics": {"mrr_avg": 0.75}}
    assert folder.metrics_path.read_text(encoding="utf-8") == json.dumps(metrics, indent=2) + "\n"
    assert (tmp_path / "results" / "latest").read_text() == "run-1\n"
    assert list(folder.records()) == RECORDS == list(RunFolder(folder.run_dir).records(torn_tail=False))
    assert folder.config() == {"format_version": 1, "run_id": "run-1", "k": 5} and folder.metrics()[
        "aggregate_metrics"
    ] == {"mrr_avg": 0.75}
    with jsonlines.open(folder.results_path) as reader:  # any jsonlines reader reads the file
        assert list(reader) == RECORDS


def test_rewriting_the_records_is_atomic_and_keeps_the_format(tmp_path: Path) -> None:
    folder = written(tmp_path)
    changed = [dict(r, outcome="passed") for r in RECORDS]
    folder.write_records(changed)
    assert folder.results_path.read_text(encoding="utf-8") == "".join(safejson.dumps(r) + "\n" for r in changed)
    assert sorted(p.name for p in folder.run_dir.iterdir()) == ["config.json", "metrics.json", "results.jsonl"]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"key": "cut short\n', "cannot read this record (Unterminated string"),
        ("[1, 2]\n", "a record must be a JSON object"),
        ('{"key": "x", "metrics": {"mrr": NaN}}\n', "cannot read this record (metrics.mrr: NaN is not valid JSON)"),
    ],
    ids=["cut", "not-an-object", "nan"],
)
def test_a_line_that_cannot_be_read_is_named_never_skipped(tmp_path: Path, line: str, problem: str) -> None:
    folder = written(tmp_path)
    text = lines_of(folder)
    folder.results_path.write_text(text[0] + line + "".join(text[1:]), encoding="utf-8")
    for torn_tail in (True, False):
        with pytest.raises(UnreadableRecord) as info:
            list(read_records(folder.run_dir, torn_tail=torn_tail))
        assert str(info.value).startswith(f"{folder.results_path}:2: {problem}")
        assert str(info.value).endswith("; nothing was changed")


def test_a_torn_last_line_is_skipped_only_by_readers_that_show(tmp_path: Path) -> None:
    folder = written(tmp_path)
    with folder.results_path.open("a", encoding="utf-8") as fh:
        fh.write('{"key": "s.jsonl::d", "outc')
    assert list(read_records(folder.run_dir)) == RECORDS
    with pytest.raises(UnreadableRecord, match=r"results\.jsonl:4: cannot read this record"):
        list(read_records(folder.run_dir, torn_tail=False))


@pytest.mark.parametrize(
    ("tail", "cut", "newline_added"),
    [
        ('{"key": "s.jsonl::d", "outc', 27, False),
        ('{"key": "s.jsonl::d", "outc\n', 28, False),
        ('{"key": "s.jsonl::d"}', 0, True),
        ("", 0, False),
    ],
    ids=["torn", "torn-with-newline", "no-newline", "clean"],
)
def test_a_resume_cuts_a_torn_last_line_and_says_how_much(
    tmp_path: Path, tail: str, cut: int, newline_added: bool
) -> None:
    folder = written(tmp_path)
    before = folder.results_path.read_bytes()
    with folder.results_path.open("a", encoding="utf-8") as fh:
        fh.write(tail)
    repair = repair_results(folder.run_dir)
    assert (repair.cut_bytes, repair.newline_added) == (cut, newline_added)
    kept = RECORDS + ([{"key": "s.jsonl::d"}] if newline_added else [])
    assert repair.records == kept
    assert folder.results_path.read_bytes() == (before + tail.encode() + b"\n" if newline_added else before)


def test_a_resume_refuses_a_bad_line_before_the_last_and_a_key_twice(tmp_path: Path) -> None:
    folder = written(tmp_path)
    text = lines_of(folder)
    folder.results_path.write_text(text[0] + "garbage\n" + "".join(text[1:]), encoding="utf-8")
    with pytest.raises(RunFolderError, match="line 2 is not a JSON record; this run cannot be resumed exactly"):
        repair_results(folder.run_dir)
    folder.results_path.write_text("".join(text) + text[0], encoding="utf-8")
    with pytest.raises(RunFolderError, match=r"lines 1 and 4 are two records of s.jsonl::a"):
        repair_results(folder.run_dir)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_rewritten_by_judge_and_made_by_merge_are_0644(
    tmp_path: Path, umask_022: None, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = written(tmp_path)
    os.chmod(folder.results_path, 0o600)  # rewritten files take a new file's mode, not the old one's
    assert cli.main(["judge", str(folder.run_dir), "--judge", "lexical", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert cli.main(["merge", str(folder.run_dir), "-o", str(tmp_path / "merged")]) == 0
    merged = tmp_path / "merged" / (tmp_path / "merged" / "latest").read_text().strip()
    files = [folder.run_dir / n for n in ("results.jsonl", "metrics.json", "config.json", "report.html")]
    files += [merged / n for n in ("results.jsonl", "metrics.json", "config.json", "report.html")]
    files += [tmp_path / "merged" / "latest"]
    assert {str(p): oct(mode(p)) for p in files} == {str(p): oct(0o644) for p in files}
    assert [r["key"] for r in read_records(merged)] == [r["key"] for r in RECORDS]


@pytest.mark.parametrize("command", ["judge", "merge", "report"])
@pytest.mark.parametrize("damage", ["middle", "torn-tail"])
def test_no_command_drops_a_line_it_cannot_read(
    tmp_path: Path, command: str, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through cli.main: judge and merge refuse a torn or corrupt line; report refuses a corrupt one, skips a torn tail."""
    folder = written(tmp_path)
    with folder.results_path.open("a", encoding="utf-8") as fh:
        fh.write('{"key": "s.jsonl::z", "answer": NaN}\n' if damage == "middle" else '{"key": "s.jsonl::z", "ans')
    if damage == "middle":
        with folder.results_path.open("a", encoding="utf-8") as fh:
            fh.write(safejson.dumps(RECORDS[0] | {"key": "s.jsonl::y"}) + "\n")
    before = folder.results_path.read_bytes()
    args = {
        "judge": ["judge", str(folder.run_dir), "--judge", "lexical", "--cache-dir", str(tmp_path / "cache")],
        "report": ["report", str(folder.run_dir)],
        "merge": ["merge", str(folder.run_dir), "-o", str(tmp_path / "m")],
    }
    if command == "report" and damage == "torn-tail":
        assert cli.main(args[command]) == 0
        assert "s.jsonl::a" in (folder.run_dir / "report.html").read_text(encoding="utf-8")
    else:
        with pytest.raises(SystemExit) as info:
            cli.main(args[command])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "results.jsonl:4: cannot read this record" in err, err
        assert not (tmp_path / "m").exists()
    assert folder.results_path.read_bytes() == before


NEWER = "format_version: expected a format this pytest-rageval reads (1 to 1; a newer pytest-rageval wrote this file: upgrade to read it), got 2"


@pytest.mark.parametrize("file", ["metrics.json", "config.json"])
@pytest.mark.parametrize("command", ["judge", "merge", "compare"])
def test_a_file_of_a_newer_format_is_refused_naming_the_field(
    tmp_path: Path, file: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = written(tmp_path)
    path = folder.run_dir / file
    path.write_text(json.dumps(json.loads(path.read_text()) | {"format_version": 2}), encoding="utf-8")
    args = {
        "judge": ["judge", str(folder.run_dir), "--judge", "lexical", "--cache-dir", str(tmp_path / "cache")],
        "merge": ["merge", str(folder.run_dir), "-o", str(tmp_path / "m")],
        "compare": ["compare", str(folder.run_dir), str(folder.run_dir)],
    }
    if command == "compare" and file == "config.json":
        assert cli.main(args[command]) == 0  # compare reads metrics.json only
        return
    with pytest.raises(SystemExit) as info:
        cli.main(args[command])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"{path}: {NEWER}" in err and "Traceback" not in err, err


def test_files_without_a_format_version_are_read_as_format_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs written before the field existed stay readable, and are stamped when a command rewrites them."""
    folder = written(tmp_path)
    for path in (folder.metrics_path, folder.config_path):
        path.write_text(
            json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "format_version"}),
            encoding="utf-8",
        )
    assert folder.metrics()["run_id"] == "run-1" and folder.config()["k"] == 5
    assert cli.main(["judge", str(folder.run_dir), "--judge", "lexical", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert json.loads(folder.metrics_path.read_text())["format_version"] == 1
    assert next(iter(json.loads(folder.config_path.read_text()))) == "format_version"
