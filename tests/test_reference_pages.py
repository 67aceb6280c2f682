"""The reference pages are committed as generated Markdown, complete, and never stale.

``docs/hooks/reference.py`` generates the tables of options, ini keys, eval-set fields, ``rageval`` commands
and run artifacts from the code's own definitions; the committed pages must hold what it generates now. The
run artifacts' fields come from the shapes the readers check, which must declare every field a real run writes.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_rageval.cli.parser import build_parser
from pytest_rageval.runs import readback
from pytest_rageval.runs.folder import RunFolder, read_records

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_pages_are_what_the_code_generates() -> None:
    hook = _hook()
    stale = [str(page.relative_to(ROOT)) for page in hook.stale_pages()]
    assert stale == [], f"stale reference pages {stale}: run `{hook.REGENERATE}` and commit them"


def test_an_edited_table_is_stale_and_regenerating_restores_it(tmp_path: Path) -> None:
    hook = _hook()
    page = tmp_path / "options.md"
    text = (REFERENCE / "options.md").read_text(encoding="utf-8")
    edited = text.replace("`--rageval-k K`", "`--rageval-depth K`")
    assert edited != text
    page.write_text(edited, encoding="utf-8")
    setattr(hook, "PAGES", (page,))  # noqa: B010 (the hook module is loaded from its file: no attribute types)
    assert hook.stale_pages() == [page]
    assert hook.main(["--check"]) == 1
    assert hook.main([]) == 0
    assert page.read_text(encoding="utf-8") == text


def test_no_page_is_an_empty_generated_stub() -> None:
    """On a code host the page shows its tables: every generated block holds one."""
    hook = _hook()
    for page in hook.PAGES:
        text = page.read_text(encoding="utf-8")
        blocks = list(hook.MARKER.finditer(text))
        assert blocks, f"{page.name}: no generated table"
        assert all(block.group(2) and "|---|" in block.group(2) for block in blocks), (
            f"{page.name}: a generated marker without its table"
        )


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_the_cli_page_lists_every_command_and_each_of_its_flags() -> None:
    page = (REFERENCE / "cli.md").read_text(encoding="utf-8")
    section = page.split("## Every command and argument", 1)[1]
    for name, command in _subparsers(build_parser()).items():
        assert f"### rageval {name}\n" in section
        own = section.split(f"### rageval {name}\n", 1)[1].split("\n### ", 1)[0]
        for action in command._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in own or f", {flag}" in own, f"rageval {name} {flag} is missing from cli.md"
    for flag in ("--ignore-invariants", "--significance", "--max-cases", "--json-mode", "--metrics"):
        assert f"`{flag}" in section


@pytest.mark.parametrize("shape", ["RECORD", "CHUNK", "METRICS", "CONFIG", "CALIBRATION"])
def test_every_field_of_each_artifact_is_on_the_artifacts_page(shape: str) -> None:
    page = (REFERENCE / "artifacts.md").read_text(encoding="utf-8")
    for path, _ in readback.fields(getattr(readback, shape)):
        assert f"| `{path}` |" in page, f"{shape} field {path} is missing from artifacts.md"
    for key in (
        "repeats",
        "repeats.flaky_cases[].key",
        "session",
        "judge_input.context_chunk_ids",
        "retrieval_metrics",
    ):
        assert f"| `{key}` |" in page


def test_a_field_added_to_a_shape_appears_in_the_generated_page(monkeypatch: pytest.MonkeyPatch) -> None:
    hook = _hook()
    monkeypatch.setitem(readback.RECORD, "answer_language", readback.TEXT)
    monkeypatch.setitem(readback.METRICS["repeats"], "worst_case", readback.TEXT)
    assert "| `answer_language` | a string |" in hook.GENERATORS["artifact-record"]()
    assert "| `repeats.worst_case` | a string |" in hook.GENERATORS["artifact-metrics"]()
    assert "| `answer_language` |" not in (REFERENCE / "artifacts.md").read_text(encoding="utf-8")


def test_a_field_no_shape_declares_is_found() -> None:
    record = {"key": "a.jsonl::q", "metrics": {"mrr": 1.0}, "misses": [{"metric": "mrr", "colour": "red"}], "extra": 1}
    assert list(readback.undeclared(record, readback.RECORD)) == ["misses[0].colour", "extra"]


def _checked(run: Path) -> list[str]:
    """Each field a run folder's files hold that the readers' shapes do not declare."""
    folder = RunFolder(run)
    found = [
        f"metrics.json: {p}"
        for p in readback.undeclared(json.loads(folder.metrics_path.read_text(encoding="utf-8")), readback.METRICS)
    ]
    found += [
        f"config.json: {p}"
        for p in readback.undeclared(json.loads(folder.config_path.read_text(encoding="utf-8")), readback.CONFIG)
    ]
    for record in read_records(run):
        found += [f"results.jsonl: {p}" for p in readback.undeclared(record, readback.RECORD)]
    return found


@pytest.mark.slow
def test_what_real_runs_write_is_what_the_readers_shapes_declare(pytester: pytest.Pytester) -> None:
    """The writers and the readers share one declaration: a plain run, a repeated run gated on a baseline with a
    judge canary and full chunk text, and a config matrix write no field the shapes lack."""
    pytester.makepyprojecttoml(
        '[tool.pytest.ini_options]\nrageval_target = "pytest_rageval.demo:ask"\n'
        "[tool.rageval.thresholds]\nrecall_at_k = 1.0\n[tool.rageval.gate]\nrecall_at_k_avg = 0.0\n"
    )
    (pytester.path / "eval_sets").mkdir()
    shutil.copy(ROOT / "eval_sets" / "demo.jsonl", pytester.path / "eval_sets" / "demo.jsonl")
    runs = [
        ("first", []),
        (
            "second",
            [
                "--rageval-baseline=first",
                "--rageval-repeat=2",
                "-o",
                "rageval_judge_canary=2",
                "--rageval-store-full-text",
            ],
        ),
        ("matrix", ["--rageval-matrix=top_k=3,5"]),
    ]
    for output, args in runs:
        result = pytester.runpytest_subprocess(
            "--rageval", "-p", "no:randomly", "-p", "no:xdist", f"--rageval-output={output}", *args
        )
        assert result.ret in (0, 1), result.stdout.str()
    folders = [run for output, _ in runs for run in (pytester.path / output).iterdir() if run.is_dir()]
    assert len(folders) == 3
    assert [problem for run in folders for problem in _checked(run)] == []


@pytest.mark.slow
@pytest.mark.e2e
def test_what_rageval_calibrate_writes_is_what_the_calibration_shape_declares(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "calibrate", "--judge", "lexical", "-o", "out", "--invariance"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    (written,) = (tmp_path / "out").rglob("calibration.json")
    data = json.loads(written.read_text(encoding="utf-8"))
    assert data["invariance"] and data["metrics"]
    assert list(readback.undeclared(data, readback.CALIBRATION)) == []
    assert readback.problems(data, readback.CALIBRATION) == []


def test_the_run_folder_file_names_are_spelled_only_in_runs() -> None:
    """Everywhere else names a run folder's files through ``RunFolder`` (``config_path``, ``metrics_path``, ...)."""
    names = {RunFolder.RESULTS, RunFolder.METRICS, RunFolder.CONFIG, RunFolder.REPORT, RunFolder.LATEST}
    package = ROOT / "pytest_rageval"
    spelled = [
        f"{path.relative_to(package)}:{node.lineno}: {node.value}"
        for path in sorted(package.rglob("*.py"))
        if path.parent.name != "runs"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in names
    ]
    assert spelled == []


def test_the_record_shape_has_every_key_of_the_type_records_are_built_as() -> None:
    """The runner builds a record as a ``CaseRecord``; the readers check it by ``RECORD``: the same keys."""
    from typing import get_type_hints

    from pytest_rageval.evaluation.record import CaseRecord

    assert set(readback.RECORD) == set(get_type_hints(CaseRecord)) - {"spot_input"}
