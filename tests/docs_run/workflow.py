"""A GitHub Actions workflow of a page, run here: a block marked ``<!-- workflow -->``.

Each job runs after the jobs it ``needs``, once per combination of its ``strategy.matrix`` (``${{ matrix.NAME }}``
is that combination's value), in a fresh copy of the page's folder (what ``actions/checkout`` gives: the project as
the page made it). Its ``run:`` steps run in order as ``bash -e`` scripts, with the workflow's, the job's and the
step's ``env:`` and a ``GITHUB_STEP_SUMMARY`` file of the job's own; the first step that fails fails the job.
``actions/setup-python`` is the interpreter the commands already run (its packages, in a virtual environment of
the workflow's own, where ``pip install`` goes); ``actions/upload-artifact`` keeps its ``path`` under the
artifact's ``name`` and ``actions/download-artifact`` puts every kept artifact in ``path/NAME`` (or the one it
names in ``path``). Any other action, or another ``${{ }}`` expression, is refused: the page would run otherwise.
"""

from __future__ import annotations

import itertools
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information (mkdocs and the dev extra install it)

#: Runs a script in a folder with an environment: its exit status and output.
Runner = Callable[[str, Path, dict[str, str]], tuple[int, str]]
EXPRESSION = re.compile(r"\$\{\{\s*(?P<expression>.*?)\s*\}\}")
KNOWN_ACTIONS = ("actions/checkout", "actions/setup-python", "actions/upload-artifact", "actions/download-artifact")


class WorkflowError(AssertionError):
    """A workflow that cannot run here, or a job of it that failed."""


@dataclass
class JobRun:
    """One job of one matrix combination: its name, whether a step failed, and the output of its steps."""

    name: str
    failed: bool
    output: str


def read(source: str) -> dict[str, dict[str, Any]]:
    """The workflow's jobs by name, in the order they run (each after the jobs it needs)."""
    workflow = yaml.safe_load(source)
    if not isinstance(workflow, dict) or not isinstance(workflow.get("jobs"), dict):
        raise WorkflowError("a workflow has a 'jobs' mapping")
    jobs: dict[str, dict[str, Any]] = workflow["jobs"]
    ordered: dict[str, dict[str, Any]] = {}
    while len(ordered) < len(jobs):
        ready = [name for name, job in jobs.items() if name not in ordered and set(_needs(job)) <= set(ordered)]
        if not ready:
            raise WorkflowError(f"jobs whose needs never run: {sorted(set(jobs) - set(ordered))}")
        ordered[ready[0]] = jobs[ready[0]]
    for job in ordered.values():
        job["env"] = {**workflow.get("env", {}), **job.get("env", {})}
    return ordered


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs", [])
    return [needs] if isinstance(needs, str) else list(needs)


def _combinations(job: dict[str, Any]) -> Iterator[dict[str, Any]]:
    matrix = job.get("strategy", {}).get("matrix", {})
    names = list(matrix)
    for values in itertools.product(*(matrix[name] for name in names)):
        yield dict(zip(names, values))


def _expand(value: Any, matrix: dict[str, Any]) -> Any:
    """``value`` (a string, or the strings of a mapping) with its ``${{ matrix.NAME }}`` expressions replaced."""
    if isinstance(value, dict):
        return {key: _expand(item, matrix) for key, item in value.items()}
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        name = match.group("expression").removeprefix("matrix.")
        if not match.group("expression").startswith("matrix.") or name not in matrix:
            raise WorkflowError(f"an expression this runner does not know: {match.group(0)}")
        return str(matrix[name])

    return EXPRESSION.sub(replace, value)


class Artifacts:
    """The artifacts the jobs uploaded, each a folder under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def upload(self, name: str, paths: list[str], folder: Path) -> None:
        target = self.root / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        existing = [folder / path for path in paths if (folder / path).exists()]
        if len(existing) == 1 and existing[0].is_dir():
            shutil.copytree(existing[0], target, dirs_exist_ok=True)
            return
        for path in existing:
            destination = target / path.relative_to(folder)
            if path.is_dir():
                shutil.copytree(path, destination, dirs_exist_ok=True)
            else:
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, destination)

    def download(self, name: str | None, into: Path, leave_out: str) -> None:
        names = [name] if name else sorted(path.name for path in self.root.iterdir() if path.name != leave_out)
        for each in names:
            shutil.copytree(self.root / each, into if name else into / each, dirs_exist_ok=True)


def run_job(
    name: str,
    job: dict[str, Any],
    matrix: dict[str, Any],
    folder: Path,
    env: dict[str, str],
    artifacts: Artifacts,
    runner: Runner,
    leave_out: str = "",
) -> JobRun:
    """One job in ``folder`` (a copy of the project): its steps in order until one fails."""
    label = name + (f" ({', '.join(f'{key}={value}' for key, value in matrix.items())})" if matrix else "")
    summary = folder.parent / f"{folder.name}-step-summary.md"
    summary.touch()
    job_env = {**env, **{key: str(value) for key, value in _expand(job["env"], matrix).items()}}
    job_env["GITHUB_STEP_SUMMARY"] = str(summary)
    outputs: list[str] = []
    for step in job.get("steps", []):
        if "run" in step:
            step_env = {**job_env, **{key: str(value) for key, value in _expand(step.get("env", {}), matrix).items()}}
            code, output = runner(_expand(step["run"], matrix), folder, step_env)
            outputs.append(f"$ {step['run'].strip()}\n{output}")
            if code != 0:
                return JobRun(label, True, "\n".join(outputs) + f"\n(exit {code})")
            continue
        action = str(step.get("uses", "")).split("@")[0]
        with_ = _expand(step.get("with", {}), matrix)
        if action not in KNOWN_ACTIONS:
            raise WorkflowError(f"job {label}: an action this runner does not know: {step.get('uses')!r}")
        if action == "actions/upload-artifact":
            artifacts.upload(str(with_.get("name", "artifact")), str(with_["path"]).split(), folder)
        elif action == "actions/download-artifact":
            artifacts.download(with_.get("name"), folder / str(with_.get("path", ".")), leave_out)
    return JobRun(label, False, "\n".join(outputs))


def run(
    source: str, project: Path, base: Path, env: dict[str, str], runner: Runner, missing_artifact: str = ""
) -> list[JobRun]:
    """Every job of the workflow ``source`` (see the module's docstring); a failed job raises WorkflowError. With
    ``missing_artifact``, the jobs that download artifacts then run again without that one, and must fail."""
    jobs = read(source)
    artifacts = Artifacts(base / "artifacts")
    runs: list[JobRun] = []
    for index, (name, job) in enumerate(jobs.items()):
        for number, matrix in enumerate(_combinations(job)):
            folder = base / f"job-{index}-{number}"
            shutil.copytree(project, folder)
            done = run_job(name, job, matrix, folder, env, artifacts, runner)
            if done.failed:
                raise WorkflowError(f"job {done.name} failed:\n{done.output}")
            runs.append(done)
    if missing_artifact:
        if not (artifacts.root / missing_artifact).is_dir():
            raise WorkflowError(f"no job uploads an artifact named {missing_artifact!r}")
        downloading = {
            name: job
            for name, job in jobs.items()
            if any(str(step.get("uses", "")).startswith("actions/download-artifact") for step in job.get("steps", []))
        }
        for index, (name, job) in enumerate(downloading.items()):
            folder = base / f"without-{index}"
            shutil.copytree(project, folder)
            done = run_job(name, job, {}, folder, env, artifacts, runner, leave_out=missing_artifact)
            if not done.failed:
                raise WorkflowError(f"job {done.name} passed without the artifact {missing_artifact}:\n{done.output}")
            runs.append(done)
    return runs
