"""Running a page's blocks in a folder of its own, and comparing the output a page shows with what ran.

Shown output matches when its lines appear in what ran, in order: a line ``...`` stands for any lines (the
beginning and the end of the output may be left out without one), ``...`` inside a line for any text. The parts
that differ on every run are compared as placeholders: run ids (``20261126-163504-c062a1``), durations
(``in 0.86s``, ``p50 1 ms``), the width of pytest's ``=====`` rules, and the page's folder (shown as the page
says: ``/tmp/tut``, ``<clone>``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from . import ci_script, json_subset, workflow
from .pages import Block

#: Parts of an output that differ on every run, and what they are compared as.
VARIABLE = (
    (re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b"), "<run_id>"),
    (re.compile(r"\bin \d+(?:\.\d+)?s\b( \(\d+:\d\d:\d\d\))?"), "in <time>"),
    (re.compile(r"\b(p50|p95) [\d,]+ ms\b"), r"\1 <ms>"),
    (re.compile(r"^([=_-])\1+ (.*?) \1+$"), r"\1\1 \2 \1\1"),
)
#: Environment variables of the job itself that a reader's shell does not have (under ``CI`` or ``BUILD_NUMBER``
#: pytest prints the short summary's lines whole, where the pages show a terminal's, cut to its width).
DROPPED = (
    "PYTEST_ADDOPTS",
    "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "GITHUB_STEP_SUMMARY",
    "CI",
    "BUILD_NUMBER",
)
TIMEOUT = 600
#: What a page's ``replace`` marker writes for a wheel of this repository (see ``Workspace.wheel``).
WHEEL = "{wheel}"


def normalise(line: str) -> str:
    """A line of output with its variable parts as placeholders and no trailing space."""
    line = line.rstrip()
    for pattern, placeholder in VARIABLE:
        line = pattern.sub(placeholder, line)
    return line


def _line_matches(shown: str, actual: str) -> bool:
    """Whether ``actual`` is ``shown``, each ``...`` in it standing for any text (found piece by piece, left to right:
    no regular expression, so a line of progress dots costs no backtracking)."""
    if shown == actual or "..." not in shown:
        return shown == actual
    first, *middle, last = shown.split("...")
    if not actual.startswith(first):
        return False
    position = len(first)
    for piece in middle:
        found = actual.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return len(actual) - len(last) >= position and actual.endswith(last)


def mismatch(shown: str, actual: str) -> str | None:
    """None when ``shown`` matches ``actual`` (see the module's docstring), else what was not found."""
    have = [normalise(line) for line in actual.splitlines()]
    chunks: list[list[str]] = [[]]
    for line in shown.splitlines():
        if line.strip() == "...":
            chunks.append([])
        else:
            chunks[-1].append(normalise(line))
    position = 0
    for chunk in (chunk for chunk in chunks if chunk):
        for start in range(position, len(have) - len(chunk) + 1):
            if all(_line_matches(want, have[start + offset]) for offset, want in enumerate(chunk)):
                position = start + len(chunk)
                break
        else:
            best = _longest_prefix(chunk, have, position)
            return (
                f"these shown lines are not in the output (after its line {position}):\n  "
                + "\n  ".join(chunk)
                + f"\nthe first that differs: {chunk[best]!r}\nthe output (normalised):\n  "
                + "\n  ".join(have)
            )
    return None


def _longest_prefix(chunk: list[str], have: list[str], position: int) -> int:
    """How many of ``chunk``'s first lines match consecutive output lines somewhere after ``position``."""
    best = 0
    for start in range(position, len(have)):
        count = 0
        while count < len(chunk) and start + count < len(have) and _line_matches(chunk[count], have[start + count]):
            count += 1
        best = max(best, count)
    return min(best, len(chunk) - 1)


def execute(command: list[str], cwd: Path, env: dict[str, str], stdin: str = "") -> tuple[int, str]:
    """Run ``command`` in a session of its own: its exit status and output (stdout, then stderr). Whatever it
    leaves running (a server a page starts with ``&``) is ended with it, so no page waits on a process it started."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=out, stderr=err, start_new_session=True
        )
        try:
            process.communicate(stdin.encode(), timeout=TIMEOUT)
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
        out.seek(0)
        err.seek(0)
        return process.returncode, (out.read() + err.read()).decode(errors="replace")


def shims(folder: Path) -> Path:
    """A folder of ``pytest``, ``rageval`` and ``python`` commands that run this interpreter's installed packages."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, how in (("pytest", "-m pytest"), ("rageval", "-m pytest_rageval.cli"), ("python", ""), ("python3", "")):
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {how} "$@"\n', encoding="utf-8")
        shim.chmod(0o755)
    return folder


class Workspace:
    """The folder and environment a page's blocks run in, and what its last command printed."""

    def __init__(self, base: Path, repository: Path, bin_folder: Path) -> None:
        self.base, self.repository = base, repository
        self.env = {name: value for name, value in os.environ.items() if name not in DROPPED}
        self.env.update(
            {"PATH": f"{bin_folder}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "80", "NO_COLOR": "1"}
        )
        self.folder = base / "project"
        self.folder.mkdir(parents=True)
        self.shown_as: str | None = None
        self.last_output: str | None = None
        self.last_file: Path | None = None

    def enter(self, block: Block) -> None:
        """Take the folder and environment markers before ``block``."""
        if block.folder is not None:
            shown, options = block.folder
            self.folder = self.repository if "repository" in options else self.base / f"folder-{block.line}"
            self.folder.mkdir(exist_ok="repository" in options)
            self.shown_as = shown
            if "venv" in options:
                self.env.update(self._venv(self.base / f"venv-{block.line}"))
            if "clone" in options:
                shutil.copy(self.repository / "pyproject.toml", self.folder / "pyproject.toml")
                shutil.copytree(self.repository / "eval_sets", self.folder / "eval_sets")
                (self.folder / "tests").mkdir()  # what testpaths names (the suite itself is not needed)
        for source, destination in block.copies:
            if (self.repository / source).is_dir():
                shutil.copytree(self.repository / source, self.folder / destination, dirs_exist_ok=True)
            else:
                (self.folder / destination).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(self.repository / source, self.folder / destination)
        for path in block.touches:
            (self.folder / path).parent.mkdir(parents=True, exist_ok=True)
            (self.folder / path).touch()
        self.env.update(block.env)

    def _venv(self, where: Path) -> dict[str, str]:
        """A virtual environment that sees this interpreter's packages (its venv's too), first on PATH."""
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(where)], check=True
        )
        site_packages = next(where.glob("lib/python*/site-packages"))
        seen = [path for path in sys.path if path.endswith("site-packages")]
        # a .pth line that starts with import runs: this interpreter's package folders, first on sys.path
        (site_packages / "docs_run_parent.pth").write_text(
            f"import site, sys; n = len(sys.path); any(map(site.addsitedir, {seen!r})); sys.path[:] = sys.path[n:] + sys.path[:n]\n",
            encoding="utf-8",
        )
        bin_folder = where / "bin"
        for name, how in (("pytest", "-m pytest"), ("rageval", "-m pytest_rageval.cli"), ("pip", "-m pip")):
            (bin_folder / name).write_text(f'#!/bin/sh\nexec "{bin_folder / "python"}" {how} "$@"\n', encoding="utf-8")
            (bin_folder / name).chmod(0o755)
        return {"PATH": f"{bin_folder}{os.pathsep}{self.env['PATH']}", "VIRTUAL_ENV": str(where)}

    def wheel(self) -> str:
        """A wheel of this repository, built once for the job's process (what ``{wheel}`` in a page stands for), from
        a copy of what the build reads: a build in the repository itself would share its ``build/`` folder with the
        page that installs the plugin from the clone, on the other worker."""
        folder = self.base.parent / "wheel"
        if not any(folder.glob("*.whl")):
            source = self.base.parent / "wheel-source"
            shutil.rmtree(source, ignore_errors=True)
            shutil.copytree(self.repository / "pytest_rageval", source / "pytest_rageval")
            for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
                shutil.copy(self.repository / name, source / name)
            command = [sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "-q", "--no-deps"]
            code, output = execute([*command, "-w", str(folder), str(source)], self.base, self.env)
            assert code == 0, f"pip cannot build a wheel of {self.repository}:\n{output}"
        return str(next(folder.glob("*.whl")))

    def run(self, block: Block) -> None:
        """Do what ``block`` says; an AssertionError says what went wrong."""
        self.enter(block)
        if WHEEL in block.source:
            block.source = block.source.replace(WHEEL, self.wheel())
        if block.kind in ("file", "append"):
            self.last_file = self.folder / block.path
            self.last_file.parent.mkdir(parents=True, exist_ok=True)
            with self.last_file.open("a" if block.kind == "append" else "w", encoding="utf-8") as handle:
                handle.write(block.source)
        elif block.kind == "alt":
            self._check_alternative(block)
        elif block.kind == "ci":
            self._check_ci(block)
        elif block.kind == "subset":
            self._check_subset(block)
        elif block.kind == "workflow":
            self._run_workflow(block)
        elif block.kind == "run":
            command = ["python", "-"] if block.language == "python" else ["bash", "-e", "-o", "pipefail", "-s"]
            self.last_output = self._run(block, command, block.source)
        elif block.kind == "output":
            assert self.last_output is not None
            self._compare(block, block.source, self.last_output)
        elif block.kind == "commands":
            for number, step in enumerate(block.commands, 1):
                expected = block.exit_code if number == len(block.commands) else 0
                output = self._run(
                    block, ["bash", "-e", "-o", "pipefail", "-c", step.command], None, expected, step.command
                )
                if step.shown.strip():
                    self._compare(block, step.shown, output)

    def _run(
        self, block: Block, command: list[str], stdin: str | None, expected: int | None = None, what: str = ""
    ) -> str:
        expected = block.exit_code if expected is None else expected
        code, output = execute(command, self.folder, self.env, stdin or "")
        if code != expected:
            raise AssertionError(
                f"{block.page}:{block.line}: {what or block.language + ' block'} exited {code}, "
                f"the page expects {expected}; its output:\n{self._shown(output)}"
            )
        return self._shown(output)

    def _check_ci(self, block: Block) -> None:
        """Each command of the block is one that the CI script it names runs."""
        script = self.repository / block.path
        assert script.is_file(), f"{block.page}:{block.line}: no CI script {block.path}"
        missing = ci_script.missing(block.source, script.read_text(encoding="utf-8"))
        assert not missing, f"{block.page}:{block.line}: commands that {block.path} does not run: {missing}"

    def _check_subset(self, block: Block) -> None:
        """The JSON fragment is part of the file the page's blocks wrote."""
        path = block.path
        if "<latest>" in path:
            head = path.split("<latest>")[0]
            latest = self.folder / head / "latest"
            assert latest.is_file(), f"{block.page}:{block.line}: no {head}latest: no run wrote one"
            path = path.replace("<latest>", latest.read_text(encoding="utf-8").strip())
        file = self.folder / path
        assert file.is_file(), f"{block.page}:{block.line}: no file {path} in the page's folder"
        try:
            shown = json_subset.read_fragment(block.source)
        except ValueError as error:
            raise AssertionError(f"{block.page}:{block.line}: the JSON shown does not read: {error}") from None
        problems = json_subset.differences(shown, json.loads(file.read_text(encoding="utf-8")))
        assert not problems, f"{block.page}:{block.line}: the JSON shown is not in {path}:\n  " + "\n  ".join(problems)

    def _run_workflow(self, block: Block) -> None:
        """The workflow's jobs, in copies of the page's folder, in a virtual environment of their own."""
        where = self.base / f"workflow-{block.line}"
        where.mkdir()
        env = {**self.env, **self._venv(where / "venv")}

        def runner(script: str, folder: Path, step_env: dict[str, str]) -> tuple[int, str]:
            code, output = execute(["bash", "-e", "-o", "pipefail", "-s"], folder, step_env, script)
            return code, output.replace(str(folder), self.shown_as or str(folder))

        try:
            workflow.run(block.source, self.folder, where, env, runner, block.missing_artifact)
        except workflow.WorkflowError as error:
            raise AssertionError(f"{block.page}:{block.line}: {error}") from None

    def _shown(self, output: str) -> str:
        """``output`` with the page's folder written as the page shows it."""
        if self.shown_as is None:
            return output
        return output.replace(str(self.folder.resolve()), self.shown_as).replace(str(self.folder), self.shown_as)

    def _compare(self, block: Block, shown: str, output: str) -> None:
        problem = mismatch(shown, output)
        if problem is not None:
            raise AssertionError(f"{block.page}:{block.line}: the output shown differs from the output: {problem}")

    def _check_alternative(self, block: Block) -> None:
        """Another form of the last file written (if any): pytest reads it, in a copy of the folder, without a complaint."""
        copy = self.base / f"alt-{block.line}"
        shutil.copytree(self.folder, copy)
        if self.last_file is not None:
            (copy / self.last_file.relative_to(self.folder)).unlink()
        (copy / block.path).write_text(block.source, encoding="utf-8")
        command = [
            sys.executable,
            "-m",
            "pytest",
            "--rageval",
            "--collect-only",
            "-q",
            "-W",
            "error::pytest.PytestConfigWarning",
        ]
        code, output = execute(command, copy, self.env)
        if code != 0:
            raise AssertionError(
                f"{block.page}:{block.line}: pytest does not take {block.path} (exit {code}):\n{output}"
            )
