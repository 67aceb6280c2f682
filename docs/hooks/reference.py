"""The reference pages' tables, generated from the code's own definitions and committed as Markdown.

A page holds each table between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->`` (HTML
comments: a code host shows the table alone). ``python docs/hooks/reference.py`` rewrites the tables of every
page in :data:`PAGES`; ``--check`` only says which are stale (``tests/test_reference_pages.py`` fails then).
As an MkDocs hook, :func:`on_page_markdown` fills the tables of the page being built the same way.

- ``options``, ``ini``: every command-line option and ini key of the settings table
  (``pytest_rageval/config/table.py``), by group;
- ``eval-fields``: every field of an eval-set line, from ``pytest_rageval/eval_case.schema.json``;
- ``cli``: every command of ``rageval`` and each of its arguments, from its argparse parser;
- ``artifact-record``, ``artifact-chunk``, ``artifact-metrics``, ``artifact-config``, ``artifact-calibration``:
  every field of a results.jsonl record, a stored chunk, metrics.json, config.json and calibration.json, from
  the shapes the readers check (``pytest_rageval/runs/readback.py``).

The build documents the checkout it runs in: the repository root goes first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path[:1]:
    sys.path.insert(0, str(ROOT))

SCHEMA_PATH = ROOT / "pytest_rageval" / "eval_case.schema.json"
MARKER = re.compile(r"<!--\s*generated:\s*([\w-]+)\s*-->\n?(?:(.*?)<!--\s*end generated:\s*\1\s*-->)?", re.S)
#: the pages that hold generated tables
PAGES = tuple(
    ROOT / "docs" / "reference" / name for name in ("options.md", "ini.md", "eval-lines.md", "cli.md", "artifacts.md")
)
#: the command that rewrites them
REGENERATE = "python docs/hooks/reference.py"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: outside `code spans`, characters Markdown would read are escaped."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(part if part.startswith("`") else _escape(part) for part in parts)


def _escape(text: str) -> str:
    """Plain text that Markdown shows as written: emphasis, link and table characters escaped, ``<`` as an entity."""
    text = re.sub(r"([\\*_|\[\]])", r"\\\1", text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """``text`` as a code span (Python-Markdown's tables leave a pipe inside one alone)."""
    return "`" + text + "`"


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """A Markdown table of ``rows`` under ``header``."""
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _default(value: Any) -> str:
    """A default as a code span; "" when there is none."""
    return _code(str(value)) if value not in (None, "", [], False) else ""


def _setting_table() -> Any:
    from pytest_rageval.config import table

    return table


def _also(setting: Any, skip: str) -> str:
    """Where else a setting is set: its option, ini key, ``[tool.rageval]`` key, environment variable."""
    parts = []
    if setting.option and skip != "option":
        parts.append(_code(setting.option))
    if setting.ini and skip != "ini":
        parts.append("ini " + _code(setting.ini))
    if setting.table_key:
        parts.append(_code(setting.table_key))
    if setting.env:
        parts.append("env " + _code(setting.env))
    return ", ".join(parts)


def _option_usage(setting: Any) -> str:
    """``--rageval-k K``: the option and the value it takes."""
    if setting.kind == "flag":
        return str(setting.option)
    value = "{" + ",".join(setting.choices) + "}" if setting.choices else setting.option_attrs()["metavar"]
    return f"{setting.option} {value.replace('|', '/')}"  # a code host splits a table cell at any pipe


def _grouped(rows_of: Callable[[Any], list[str] | None], header: tuple[str, ...]) -> str:
    """One table a group of settings, under a ``###`` heading, in the settings table's order."""
    table = _setting_table()
    parts = []
    for group in table.GROUPS:
        rows = [row for s in table.SETTINGS if s.group == group and (row := rows_of(s)) is not None]
        if rows:
            parts.append(f"### {group}\n\n" + _table(header, rows))
    return "\n".join(parts)


def _option_row(setting: Any) -> list[str] | None:
    if not setting.option:
        return None
    return [_code(_option_usage(setting)), _default(setting.default), _cell(setting.help), _also(setting, "option")]


def _ini_row(setting: Any) -> list[str] | None:
    if not setting.ini:
        return None
    return [_code(setting.ini), setting.ini_type, _default(setting.default), _cell(setting.help), _also(setting, "ini")]


def options_markdown() -> str:
    """The Markdown tables of every command-line option of the plugin, by group."""
    return _grouped(_option_row, ("option", "default", "meaning", "also set by"))


def ini_markdown() -> str:
    """The Markdown tables of every ini key of the plugin (``[pytest]`` / ``[tool.pytest.ini_options]``), by group."""
    return _grouped(_ini_row, ("ini key", "type", "default", "meaning", "also set by"))


def _schema_type(spec: dict[str, Any], defs: dict[str, Any]) -> str:
    """A JSON Schema type as a reader says it: ``list of string``, ``string or null``, ..."""
    if "$ref" in spec:
        target = defs[spec["$ref"].rsplit("/", 1)[-1]]
        required = set(target.get("required", ()))
        return "{" + ", ".join(key if key in required else key + "?" for key in target["properties"]) + "}"
    if "anyOf" in spec:
        return " or ".join(_schema_type(choice, defs) for choice in spec["anyOf"])
    if "enum" in spec:
        return " / ".join(str(choice) for choice in spec["enum"])
    kind = spec.get("type", "any")
    if kind == "array":
        return "list of " + _schema_type(spec.get("items", {}), defs)
    if kind == "integer" and "minimum" in spec and "maximum" in spec:
        return f"integer, {spec['minimum']} to {spec['maximum']}"
    if kind == "object" and isinstance(spec.get("additionalProperties"), dict):
        return "object of " + _schema_type(spec["additionalProperties"], defs)
    return str(kind)


def eval_schema() -> dict[str, Any]:
    """The JSON Schema of an eval-set line, as shipped with the package."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def eval_field_rows(schema: dict[str, Any] | None = None) -> list[tuple[str, str, str, str, str]]:
    """(field, type, required, default, description) of every field; required fields first, then those of which
    one is required (a question or a conversation's turns), then by name."""
    defs = eval_schema().get("$defs", {})
    schema = eval_schema() if schema is None else schema
    required = schema.get("required", [])
    either = [name for alternative in schema.get("oneOf", []) for name in alternative.get("required", [])]
    names = list(required) + either
    names += sorted(name for name in schema["properties"] if name not in names)
    rows = []
    for name in names:
        spec = schema["properties"][name]
        meaning = spec.get("description", "")
        if not meaning:
            raise ValueError(
                f"eval-set field {name} has no description: give it one in pytest_rageval/evaluation/schema.py"
            )
        if name in required or name in either:
            default = ""
        elif "default" in spec:
            default = _code(json.dumps(spec["default"]))
        else:  # a list or an object, empty unless given
            default = _code("[]" if spec.get("type") == "array" else "{}")
        needed = "yes" if name in required else ("one of " + ", ".join(map(_code, either))) if name in either else ""
        rows.append((_code(name), _cell(_schema_type(spec, defs)), needed, default, _cell(meaning)))
    return rows


def eval_fields_markdown() -> str:
    """The schema's own description of a line, then the Markdown table of its fields."""
    schema = eval_schema()
    table = _table(("field", "type", "required", "default", "meaning"), eval_field_rows())
    return _cell(schema.get("description", "")) + "\n\n" + table


def turn_fields_markdown() -> str:
    """The Markdown table of the fields of one entry of ``turns`` (a conversation's turn)."""
    turn = eval_schema()["$defs"]["Turn"]
    return _table(("field", "type", "required", "default", "meaning"), eval_field_rows(turn))


def _argument(action: argparse.Action) -> str:
    """``--max-cases N`` or ``RUN...``: an argument as a usage line writes it."""
    if not action.option_strings:
        name = str(action.metavar or action.dest).upper()
        return name + ("..." if action.nargs in ("+", "*") else "")
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    if action.choices:
        value = "{" + ",".join(str(c) for c in action.choices) + "}"
    else:
        value = str(action.metavar or action.dest.upper())
    return ", ".join(f"{name} {value}" for name in action.option_strings) + (
        " ..." if action.nargs in ("+", "*") else ""
    )


def _commands() -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(name, parser, summary) of every command of ``rageval``, in ``rageval --help`` order."""
    from pytest_rageval.cli.parser import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {choice.dest: str(choice.help or "") for choice in sub._choices_actions}
    return [(name, command, summaries.get(name, "")) for name, command in sub.choices.items()]


def command_rows(parser: argparse.ArgumentParser) -> list[list[str]]:
    """(argument, default, meaning) of each argument of one command (``--help`` left out)."""
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        help_text = str(action.help or "").replace("%%", "%")
        if not help_text.strip():
            raise ValueError(
                f"rageval {parser.prog.split()[-1]}: {_argument(action)} has no help text: give it one in its add_argument"
            )
        default = (
            ""
            if action.default in (None, False, [], argparse.SUPPRESS) or not action.option_strings
            else _code(str(action.default))
        )
        rows.append([_code(_argument(action)), default, _cell(help_text)])
    return rows


def cli_markdown() -> str:
    """A section for each command of ``rageval``: what it does, then each of its arguments."""
    parts = []
    for name, parser, summary in _commands():
        rows = command_rows(parser)
        body = (
            _cell(summary) + "\n\n" + (_table(("argument", "default", "meaning"), rows) if rows else "No arguments.\n")
        )
        parts.append(f"### rageval {name}\n\n{body}")
    return "\n".join(parts)


def _artifact(shape_name: str) -> Callable[[], str]:
    def markdown() -> str:
        from pytest_rageval.runs import readback

        rows = [[_code(path), _cell(kind)] for path, kind in readback.fields(getattr(readback, shape_name))]
        return _table(("field", "type"), rows)

    return markdown


GENERATORS: dict[str, Callable[[], str]] = {
    "options": options_markdown,
    "ini": ini_markdown,
    "eval-fields": eval_fields_markdown,
    "turn-fields": turn_fields_markdown,
    "cli": cli_markdown,
    "artifact-record": _artifact("RECORD"),
    "artifact-chunk": _artifact("CHUNK"),
    "artifact-metrics": _artifact("METRICS"),
    "artifact-config": _artifact("CONFIG"),
    "artifact-calibration": _artifact("CALIBRATION"),
}


def render(markdown: str, where: str = "", *, markers: bool = True) -> str:
    """``markdown`` with the table of every ``<!-- generated: NAME -->`` block made anew (a lone start marker
    gets its table and end marker); without ``markers``, the tables alone (the built site)."""

    def table(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{where}: unknown generated table {name!r} (known: {', '.join(GENERATORS)})")
        if not markers:
            return GENERATORS[name]()
        return f"<!-- generated: {name} -->\n\n{GENERATORS[name]()}\n<!-- end generated: {name} -->"

    return MARKER.sub(table, markdown)


def stale_pages() -> list[Path]:
    """The pages of :data:`PAGES` whose generated tables are not what the code defines now."""
    return [
        page
        for page in PAGES
        if render(page.read_text(encoding="utf-8"), page.name) != page.read_text(encoding="utf-8")
    ]


def write_pages() -> list[Path]:
    """Rewrite the generated tables of every page; the pages that changed."""
    changed = stale_pages()
    for page in changed:
        page.write_text(render(page.read_text(encoding="utf-8"), page.name), encoding="utf-8")
    return changed


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: fill the generated tables of a page."""
    if MARKER.search(markdown) is None:
        return markdown
    from mkdocs.exceptions import PluginError

    try:
        return render(markdown, page.file.src_uri, markers=False)
    except ValueError as exc:
        raise PluginError(str(exc)) from None


def _shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def main(argv: list[str]) -> int:
    """Rewrite the reference pages (or, with ``--check``, list the stale ones and exit 1)."""
    if "--check" in argv:
        stale = stale_pages()
        for page in stale:
            print(f"{_shown(page)}: stale; run {REGENERATE}")
        return 1 if stale else 0
    for page in write_pages():
        print(f"wrote {_shown(page)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
