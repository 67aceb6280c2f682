"""The ``[tool.rageval]`` table of pyproject.toml: one checked model, and where a key of it sits in the file.

Pure logic (layer 1) plus reading the file; no pytest. :class:`RagevalConfig`
lists every table and key the plugin reads (``extra="forbid"``, strict types):
anything else is a mistake that :func:`table_problems` words with a
did-you-mean, in the eval-set loader's style (``pyproject.toml:3:
[tool.rageval.judge]: unknown key 'modle' (did you mean 'model'?)``).
:func:`read_config` reads a file into the model or raises one
:class:`ConfigError` naming the file, line, key path and problem of every
mistake, in file order. Values whose rules live with the code that reads them
(threshold and gate metric names, judge metrics, prices) are checked by a
``value_problems`` callable the caller hands in (settings.py), so their
messages join the same list. A key left out is ``None`` (or empty): the
defaults themselves are in defaults.py, applied by settings.py after the ini
keys and the environment had their say. :func:`find_pyproject` is the one rule
that finds the file, for the plugin and the ``rageval`` command alike.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_rageval.errors import ConfigError
from pytest_rageval.evaluation.evalset import json_kind
from pytest_rageval.suggest import closest

from .table import ini_keys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "ConfigError",
    "JudgeConfig",
    "RagevalConfig",
    "find_pyproject",
    "key_line",
    "read_config",
    "table_name",
    "table_problems",
]

#: (key path below ``[tool.rageval]``, problem): one mistake in the table.
Problem = tuple[tuple[str, ...], str]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class JudgeConfig(_Table):
    """``[tool.rageval.judge]``: model, endpoint and mode pyproject-side (ini and CLI win), metrics, prices."""

    metrics: Any = None  # list of judge metric names (checked with the judge scales, settings.py)
    prices: dict[str, Any] = Field(default_factory=dict)  # model = [USD per 1M prompt, per 1M completion tokens]
    model: str | None = Field(default=None, min_length=1)
    base_url: str | None = Field(default=None, min_length=1)
    json_mode: Literal["json_schema", "json_object", "text"] | None = None


class RagevalConfig(_Table):
    """``[tool.rageval]``."""

    thresholds: dict[str, Any] = Field(default_factory=dict)  # metric = value, or <category> = {metric = value}
    gate: dict[str, Any] = Field(default_factory=dict)  # aggregate = tolerance, min_judge_coverage
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    matrix: dict[str, Any] = Field(default_factory=dict)  # axis = [values], exclude = [{...}], slice_k (matrix.py)
    marks: dict[str, Any] = Field(default_factory=dict)  # marker = [tags or categories whose cases it marks]
    docs_root: str | None = Field(default=None, min_length=1)  # the folder gold rel_paths are relative to


def find_pyproject(folder: Path, inifile: Path | None = None) -> Path | None:
    """The project's pyproject.toml: pytest's configuration file when it is one, else the pyproject.toml of
    ``folder`` (pytest's rootdir, or the current folder for the ``rageval`` command) or of the nearest folder
    above it; None when there is none."""
    if inifile is not None and inifile.name == "pyproject.toml":
        return inifile
    return next((d / "pyproject.toml" for d in (folder, *folder.parents) if (d / "pyproject.toml").is_file()), None)


def read_config(
    path: Path | None, value_problems: Callable[[Mapping[str, Any]], Iterable[Problem]] = lambda table: ()
) -> RagevalConfig:
    """The checked ``[tool.rageval]`` table of a pyproject.toml; the empty model when there is none.

    ``value_problems`` adds the mistakes in the values of a structurally valid
    table. ConfigError names every mistake, ``<file>:<line>: <problem>``, in
    file order, joined by "; ".
    """
    if path is None or not path.is_file():
        return RagevalConfig()
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read [tool.rageval]: {exc}") from None
    tool = data.get("tool", {})
    table = tool.get("rageval", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.rageval] must be a table")
    problems = table_problems(table)
    problems.extend(value_problems(table))
    if problems:
        display = _display(path)
        located = sorted((key_line(text, keys) or 0, message) for keys, message in problems)
        raise ConfigError("; ".join(f"{display}{f':{line}' if line else ''}: {message}" for line, message in located))
    return RagevalConfig.model_validate(table)


def read_tool_tables(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``[tool.pytest.ini_options]`` and ``[tool.rageval]`` of a pyproject.toml, unchecked (each {} when missing or
    no table), as the ``rageval`` command reads the project's settings; ConfigError when the file cannot be read."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    tool = data.get("tool")
    tool = tool if isinstance(tool, dict) else {}
    pytest_table = tool.get("pytest")
    ini = pytest_table.get("ini_options") if isinstance(pytest_table, dict) else None
    rageval = tool.get("rageval")
    return (dict(ini) if isinstance(ini, dict) else {}), (dict(rageval) if isinstance(rageval, dict) else {})


def _display(path: Path) -> str:
    """``path`` relative to the current folder when it lies below it (shorter messages)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (OSError, ValueError):
        return str(path)


def table_name(path: tuple[str, ...]) -> str:
    """``("judge", "prices")`` -> ``[tool.rageval.judge.prices]``; a part that is no bare TOML key is quoted as
    TOML writes it (``"x\\u001b[31m"``), so no control character of a table name reaches the terminal."""
    return "[" + ".".join(part if _BARE.fullmatch(part) else _quoted(part) for part in ("tool", "rageval", *path)) + "]"


_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _quoted(part: str) -> str:
    """``part`` as a TOML basic string (JSON's escapes are TOML's; non-ASCII escaped too: no bidi control shows)."""
    return json.dumps(part, ensure_ascii=True)


def table_problems(table: Mapping[str, Any]) -> list[Problem]:
    """(key path below ``[tool.rageval]``, problem) for every unknown or mistyped table or key."""
    try:
        RagevalConfig.model_validate(dict(table))
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False)
        return [(tuple(str(p) for p in err["loc"]), _problem(err)) for err in errors]
    return []


def _model_at(path: tuple[str, ...]) -> type[BaseModel]:
    model: type[BaseModel] = RagevalConfig
    for part in path:
        annotation = model.model_fields[part].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            break
        model = annotation
    return model


def _problem(err: Mapping[str, Any]) -> str:
    loc = tuple(str(p) for p in err["loc"])
    parent, key = loc[:-1], loc[-1] if loc else ""
    if err["type"] == "extra_forbidden":
        if isinstance(err.get("input"), Mapping):
            return f"unknown table {table_name(loc)}{_hint(parent, key, as_table=True)}"
        return f"{table_name(parent)}: unknown key {key!r}{_hint(parent, key, as_table=False)}"
    if err["type"] in ("dict_type", "model_type", "model_attributes_type"):
        return f"{table_name(loc)} must be a table, got {json_kind(err.get('input'))}"
    return f"{table_name(parent)} {key}: {err['msg']}"


def _hint(parent: tuple[str, ...], key: str, *, as_table: bool) -> str:
    if not parent and not as_table and f"rageval_{key}" in ini_keys():
        return f" (rageval_{key} is an ini key: set it under [tool.pytest.ini_options])"
    match = closest(key, _model_at(parent).model_fields)
    if match is None:
        return ""
    return f" (did you mean {table_name((*parent, match)) if as_table else repr(match)}?)"


# --------------------------------------------------------------------------- locating keys

_HEADER = re.compile(r"^\s*\[\[?(?P<name>[^\[\]]+)\]\]?\s*(?:#.*)?$")
_KEY = re.compile(
    r"""^\s*(?P<key>(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)
_PART = re.compile(r"""[A-Za-z0-9_-]+|"([^"]*)"|'([^']*)'""")


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(
        _unescaped(m.group(1)) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(0)
        for m in _PART.finditer(dotted)
    )


def _unescaped(basic: str) -> str:
    """The text of a TOML basic string's inside (``x\\u001b`` -> ``x\\x1b``); as written when JSON cannot read it."""
    try:
        value = json.loads(f'"{basic}"')
    except ValueError:
        return basic
    return value if isinstance(value, str) else basic


def key_line(text: str, path: tuple[str, ...]) -> int | None:
    """The 1-based line that sets ``tool.rageval.<path>`` (or opens that table).

    Without an exact match, the line of the deepest enclosing table or key
    (e.g. an inline table holding the key); None when even ``[tool.rageval]``
    is not found. Multi-line strings are not parsed, so this is a best effort
    for messages, never for reading values.
    """
    wanted = ("tool", "rageval", *path)
    table: tuple[str, ...] = ()
    best: tuple[int, int | None] = (1, None)  # (depth matched, line): [tool.rageval] itself counts
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _parts(header.group("name"))
            full = table
        else:
            key = _KEY.match(line)
            if not key:
                continue
            full = table + _parts(key.group("key"))
        if full[: len(wanted)] == wanted:
            return number
        depth = len(full)
        if depth > best[0] and wanted[:depth] == full:
            best = (depth, number)
    return best[1]
