"""What several ``rageval`` commands share: printing, the usage error, a stored run's metrics.json, the project's
pyproject.toml and gate table, the earlier runs of an output folder, and the target that label and inspect ask.

Light to import (the standard library only at the top): each helper imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any


def say(text: Any = "", *, file: Any = None) -> None:
    """``print`` for what comes from run folders (ids, messages, run ids): control characters shown escaped."""
    from pytest_rageval.sanitize import terminal_safe

    print(terminal_safe(text), file=file)


def usage_error(message: str) -> SystemExit:
    """Exit status 2 (like argparse): what was asked cannot be done, which is not a regression."""
    say(f"rageval: {message}", file=sys.stderr)
    return SystemExit(2)


def load_metrics(path: str) -> dict[str, Any]:
    """The metrics.json of ``path`` (the file or its run folder); a usage error when it is missing or unreadable."""
    from pytest_rageval.gate.baseline_file import load_baseline

    try:
        data = load_baseline(Path(path))
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    if data is None:
        raise usage_error(f"no metrics.json at {path}")
    return data


def nearest_pyproject() -> Path | None:
    """The pyproject.toml of the current folder or the nearest folder above it, or None."""
    from pytest_rageval.config.pyproject import find_pyproject

    return find_pyproject(Path.cwd())


def gate_table(pyproject: str | None) -> dict[str, float]:
    """``[tool.rageval.gate]`` of ``pyproject`` or of the nearest pyproject.toml above the current folder."""
    from pytest_rageval.config.settings import SettingsError, parse_gate, read_pyproject_table

    path: Path | None
    if pyproject is not None:
        path = Path(pyproject)
        if not path.is_file():
            raise usage_error(f"--pyproject {pyproject}: no such file")
    else:
        path = nearest_pyproject()
    try:
        return parse_gate(read_pyproject_table(path).gate, "[tool.rageval.gate]")
    except SettingsError as exc:
        raise usage_error(str(exc)) from None


def earlier_runs(output_dir: Path, run_id: Any, metrics: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The runs in ``output_dir`` but ``run_id``, as a rebuilt report charts them, each linked to the run before it
    (gate/lineage.py; ``metrics``, the run's own metrics.json, gets its link too); each one left out is a note."""
    from pytest_rageval.gate.lineage import LINK, linked_history
    from pytest_rageval.report.trends import trend_metrics

    skipped: list[str] = []
    known = {str(run_id): metrics} if metrics is not None else None
    linked = linked_history(output_dir, trend_metrics(), skipped=skipped, known=known)
    own = next((m for m in linked if m.get("run_id") == run_id), None)
    if metrics is not None and own is not None and LINK in own:
        metrics[LINK] = own[LINK]
    history = [m for m in linked if m.get("run_id") != run_id]
    for note in skipped:
        say(f"note: {note}")
    return history


def project_target(args: argparse.Namespace, command: str) -> tuple[Any, Any]:
    """The project's settings (project.ProjectClient) and a client of the target that ``args`` and the project
    name, as the plugin would make it: the command line, then the project's ini keys, then the environment."""
    import os

    from pytest_rageval.engine.label import LabelError
    from pytest_rageval.targets.maps import parse_request_map, parse_response_map
    from pytest_rageval.targets.protocol import RagConfigError
    from pytest_rageval.targets.resolve import load_target

    from .project import project_client

    if args.pyproject is not None and not Path(args.pyproject).is_file():
        raise usage_error(f"{command}: --pyproject {args.pyproject}: no such file")
    try:
        project = project_client(Path(args.pyproject) if args.pyproject else nearest_pyproject())
    except LabelError as exc:
        raise usage_error(f"{command}: {exc}") from None
    if getattr(args, "docs_root", None):
        project = dataclasses.replace(project, docs_root=Path(args.docs_root).resolve())
    target = args.target or project.target or os.environ.get("RAGEVAL_TARGET")
    if not target:
        raise usage_error(
            f"{command}: --target URL or module:function is needed (or rageval_target in [tool.pytest.ini_options], or env RAGEVAL_TARGET)"
        )
    folders = [os.getcwd(), *([str(project.path.parent)] if project.path else [])]
    try:
        client = load_target(
            target,
            folders=folders,
            headers=_headers(project, getattr(args, "header", None) or [], os.environ),
            timeout=args.timeout or project.timeout or 60.0,
            request_map=parse_request_map(
                "\n".join(args.request_map) if getattr(args, "request_map", None) else project.request_map
            ),
            response_map=parse_response_map(
                "\n".join(args.response_map) if getattr(args, "response_map", None) else project.response_map
            ),
            docs_root=project.docs_root_or_folder,
            params_hook=project.params_hook,
            stream_format=project.stream_format or None,
        )
    except RagConfigError as exc:
        given = {
            "rageval_target": args.target,
            "rageval_request_map": getattr(args, "request_map", None),
            "rageval_response_map": getattr(args, "response_map", None),
            "rageval_timeout": args.timeout,
        }
        key = str(exc).split(" ", 1)[0].rstrip(":")
        where = f"{project.path}: " if project.path and key.startswith("rageval_") and not given.get(key) else ""
        raise usage_error(f"{command}: {where}{exc}") from None
    origin = "--target" if args.target else (str(project.path) if project.target else "env RAGEVAL_TARGET")
    described = client.describe()
    say(f"target: {described.get('url') or described.get('callable')} (from {origin}), k={args.k}")
    return project, client


def _headers(project: Any, lines: list[str], environ: Any) -> dict[str, str]:
    """The project's rageval_headers, then each --header (a later one replaces a header of the same name)."""
    from pytest_rageval.targets.headers import parse_headers
    from pytest_rageval.targets.protocol import RagConfigError

    headers = parse_headers(project.headers, environ)
    for number, line in enumerate(lines, start=1):
        try:
            extra = parse_headers(line, environ)
        except RagConfigError as exc:  # the line may hold a secret: named by its number only
            raise RagConfigError(
                str(exc)
                .replace("rageval_headers line 1", f"--header number {number}")
                .replace("rageval_headers", f"--header number {number}")
            ) from None
        for name, value in extra.items():
            headers = {n: v for n, v in headers.items() if n.lower() != name.lower()}
            headers[name] = value
    return headers
