"""The project's client settings as the ``rageval`` commands that ask the target read them (label, inspect):
the ini keys of ``[tool.pytest.ini_options]`` in the project's pyproject.toml."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rageval.engine.label import LabelError

__all__ = ["CLIENT_KEYS", "ProjectClient", "project_client"]


#: The ini keys of the system under test that ``rageval label`` reads from ``[tool.pytest.ini_options]``.
CLIENT_KEYS = (
    "rageval_target",
    "rageval_headers",
    "rageval_request_map",
    "rageval_response_map",
    "rageval_timeout",
    "rageval_docs_root",
    "rageval_params_hook",
    "rageval_stream_format",
)


@dataclass(frozen=True)
class ProjectClient:
    """How the project's pytest configuration reaches its system (ini keys of ``[tool.pytest.ini_options]``)."""

    path: Path | None = None  # the pyproject.toml read (None: none found)
    target: str | None = None
    headers: str = ""
    request_map: str = ""
    response_map: str = ""
    timeout: float | None = None
    docs_root: Path | None = None  # rageval_docs_root or [tool.rageval] docs_root, relative to the file's folder
    params_hook: str = ""
    stream_format: str = ""  # rageval_stream_format: where a streamed answer's text is

    @property
    def docs_root_or_folder(self) -> Path:
        """The folder gold rel_paths are relative to: docs_root, else the project's folder (the current one without a project)."""
        return self.docs_root or (self.path.parent if self.path else Path.cwd())


def _lines(value: Any) -> str:
    return "\n".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value or "")


def project_client(path: Path | None) -> ProjectClient:
    """The client keys (CLIENT_KEYS) of ``[tool.pytest.ini_options]`` in the pyproject.toml at ``path``, as the
    plugin reads them; LabelError for a file that cannot be read or a timeout that is not a number."""
    if path is None:
        return ProjectClient()
    from pytest_rageval.config.pyproject import read_tool_tables
    from pytest_rageval.errors import ConfigError

    try:
        ini, table = read_tool_tables(path)
    except ConfigError as exc:
        raise LabelError(str(exc).replace("cannot read:", "cannot read [tool.pytest.ini_options]:")) from None
    timeout = ini.get("rageval_timeout")
    try:
        seconds = float(timeout) if timeout not in (None, "") else None
    except (TypeError, ValueError):
        raise LabelError(f"{path}: rageval_timeout: must be a number of seconds, got {timeout!r}") from None
    docs_root = ini.get("rageval_docs_root") or table.get("docs_root")
    stream_format = str(ini.get("rageval_stream_format") or "").strip()
    if stream_format:
        from pytest_rageval.targets.stream import parse_stream_format

        try:
            parse_stream_format(stream_format)
        except ValueError as exc:
            raise LabelError(f"{path}: {exc}") from None
    return ProjectClient(
        path,
        str(ini.get("rageval_target") or "") or None,
        _lines(ini.get("rageval_headers")),
        _lines(ini.get("rageval_request_map")),
        _lines(ini.get("rageval_response_map")),
        seconds,
        (path.parent / str(docs_root)).resolve() if docs_root else None,
        str(ini.get("rageval_params_hook") or "").strip(),
        stream_format,
    )
