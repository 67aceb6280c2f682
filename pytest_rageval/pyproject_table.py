"""The shape of pyproject.toml's ``[tool.rageval]`` table, and where a key of it sits in the file.

Pure: no pytest. :class:`RagevalTable` lists every table and key the plugin
reads (``extra="forbid"``): anything else is a mistake that
:func:`table_problems` turns into a message with a did-you-mean. The values
of thresholds, gate tolerances, judge metrics and prices are checked by the
code that reads them (settings.py), which already words those messages.
:func:`key_line` finds the line of a key, so each message can name it.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .evalset import json_kind
from .suggest import closest

__all__ = ["JudgeTable", "RagevalTable", "key_line", "table_name", "table_problems"]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class JudgeTable(_Table):
    """``[tool.rageval.judge]``: model, endpoint and mode pyproject-side (ini and CLI win), metrics, prices."""

    metrics: Any = None  # list of judge metric names
    prices: dict[str, Any] = Field(default_factory=dict)  # model = [USD per 1M prompt, per 1M completion tokens]
    model: Optional[str] = Field(default=None, min_length=1)
    base_url: Optional[str] = Field(default=None, min_length=1)
    json_mode: Optional[Literal["json_schema", "json_object", "text"]] = None


class RagevalTable(_Table):
    """``[tool.rageval]``."""

    thresholds: dict[str, Any] = Field(default_factory=dict)  # metric = value, or <category> = {metric = value}
    gate: dict[str, Any] = Field(default_factory=dict)  # aggregate = tolerance, min_judge_coverage
    judge: JudgeTable = Field(default_factory=JudgeTable)


#: Tables SPEC names that this version does not read yet: a clear word instead of a did-you-mean.
NOT_BUILT = {"matrix": "config matrices are not built in this version of pytest-rageval"}


def table_name(path: tuple[str, ...]) -> str:
    """``("judge", "prices")`` -> ``[tool.rageval.judge.prices]``."""
    return "[" + ".".join(("tool", "rageval", *path)) + "]"


def table_problems(table: Mapping[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """(key path below ``[tool.rageval]``, problem) for every unknown or mistyped table or key."""
    try:
        RagevalTable.model_validate(dict(table))
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False)
        return [(tuple(str(p) for p in err["loc"]), _problem(err)) for err in errors]
    return []


def _model_at(path: tuple[str, ...]) -> type[BaseModel]:
    model: type[BaseModel] = RagevalTable
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
    if not parent and key in NOT_BUILT:
        return f" ({NOT_BUILT[key]})"
    if not parent and not as_table:
        from .plugin import INI_KEYS  # the pytest surface imports nothing heavy

        if f"rageval_{key}" in {name for name, *_ in INI_KEYS}:
            return f" (rageval_{key} is an ini key: set it under [tool.pytest.ini_options])"
    match = closest(key, _model_at(parent).model_fields)
    if match is None:
        return ""
    return f" (did you mean {table_name((*parent, match)) if as_table else repr(match)}?)"


# --------------------------------------------------------------------------- locating keys

_HEADER = re.compile(r"^\s*\[\[?(?P<name>[^\[\]]+)\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*(?P<key>(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=""")
_PART = re.compile(r"""[A-Za-z0-9_-]+|"([^"]*)"|'([^']*)'""")


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(0)
                 for m in _PART.finditer(dotted))


def key_line(text: str, path: tuple[str, ...]) -> Optional[int]:
    """The 1-based line that sets ``tool.rageval.<path>`` (or opens that table).

    Without an exact match, the line of the deepest enclosing table or key
    (e.g. an inline table holding the key); None when even ``[tool.rageval]``
    is not found. Multi-line strings are not parsed, so this is a best effort
    for messages, never for reading values.
    """
    wanted = ("tool", "rageval", *path)
    table: tuple[str, ...] = ()
    best: tuple[int, Optional[int]] = (1, None)  # (depth matched, line): [tool.rageval] itself counts
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
