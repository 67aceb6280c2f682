"""MkDocs hook: the reference tables generated from the plugin's own definitions, so they cannot drift.

A page holds a marker such as ``<!-- generated: options -->``; at build time :func:`on_page_markdown`
replaces it with the table of that name:

- ``options``: every command-line option ``pytest_rageval.plugin.pytest_addoption`` registers on a real
  pytest ``Parser`` (the object pytest itself passes), with its value, default and help;
- ``ini``: every ini key it registers with ``parser.addini``, with its type, default and help;
- ``eval-fields``: every field of an eval-set line, from ``pytest_rageval/eval_case.schema.json``.

The rendering functions are importable on their own (``tests/test_docs.py`` calls them). The build documents
the checkout it runs in: the repository root goes first on ``sys.path``.
"""

from __future__ import annotations

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
MARKER = re.compile(r"<!--\s*generated:\s*([\w-]+)\s*-->")

#: What each eval-line field means, for the fields whose schema carries no description of its own (a schema
#: description wins). tests/test_docs.py checks that every field of the schema is described one way or the other.
FIELD_MEANINGS = {
    "question": "the question sent to the RAG (alias `query`)",
    "answerable": "false: the system must abstain",
    "reference_answer": "for correctness judging (alias `referenceAnswer`)",
    "expected_key_facts": "facts a correct answer contains",
    "gold_supports": "anchors of supporting content",
    "gold_doc_ids": "id-based gold: matches a chunk's doc_id (aliases `expectedProposalIds`, `expected_doc_ids`)",
    "tags": "free tags, usable with `-k`",
    "category": "factual, reasoning, multi_hop, recency/conflict, general, adversarial, ...",
    "difficulty": "easy / medium / hard",
    "vaults": "scope of the question (carried into results)",
    "folders": "scope of the question (carried into results)",
    "thresholds": "per-case threshold overrides, `{metric: value}`",
    "flaky": "run `repeat` times (3 when `repeat` is not given), pass on majority, report as flaky",
    "repeat": "runs of this case, 1 to 100 (1; 3 when flaky)",
    "skip": "reason: pytest skip; nothing is sent for a skipped case",
    "xfail": "reason: pytest xfail",
    "metadata": "free-form, carried into results",
}


def _parser() -> Any:
    """A real pytest ``Parser`` with the plugin's options and ini keys registered, as pytest does at start-up."""
    from _pytest.config.argparsing import Parser  # pytest.Parser is the same class, not meant to be built by plugins

    from pytest_rageval.plugin import pytest_addoption

    parser = Parser(_ispytest=True)
    pytest_addoption(parser)
    return parser


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


def _takes_value(attrs: dict[str, Any]) -> bool:
    """Whether the option takes a value (pytest 7 keeps the ``action`` name, later pytest argparse's ``nargs``)."""
    action = attrs.get("action")
    if isinstance(action, str):
        return action not in ("store_true", "store_false", "store_const", "count", "append_const")
    return attrs.get("nargs") != 0


def _option_usage(names: list[str], attrs: dict[str, Any]) -> str:
    """``--rageval-k K``: the option's names and the value it takes."""
    value = ""
    if _takes_value(attrs):
        if attrs.get("choices"):
            value = " {" + ",".join(str(c) for c in attrs["choices"]) + "}"
        else:
            value = " " + (attrs.get("metavar") or str(attrs.get("dest", "value")).upper())
    return ", ".join(name + value for name in names)


def _default(value: Any) -> str:
    """A default as code spans, one a line for a list; "" when there is none (None, "", [])."""
    if value is None or value == "" or value == []:
        return ""
    if isinstance(value, list):
        return "<br>".join(_code(str(item)) for item in value)
    return _code(json.dumps(value) if isinstance(value, bool) else str(value))


def option_rows() -> list[tuple[str, str, str]]:
    """(usage, default, help) of every option in the plugin's option group, in registration order."""
    rows = []
    for option in _parser().getgroup("rageval").options:
        attrs = option.attrs()
        help_text = str(attrs.get("help") or "").replace("%%", "%")
        if not help_text.strip():
            raise ValueError(f"option {option.names()[0]} has no help text: give it one in pytest_addoption")
        default = attrs.get("default")
        shown = "" if default is False else _default(default)  # a flag's False says nothing
        rows.append((_code(_option_usage(option.names(), attrs)), shown, _cell(help_text)))
    return rows


def options_markdown() -> str:
    """The Markdown table of every command-line option of the plugin."""
    return _table(("option", "default", "meaning"), option_rows())


def ini_rows() -> list[tuple[str, str, str, str]]:
    """(name, type, default, help) of every ini key, in registration order."""
    rows = []
    for name, (help_text, kind, default) in _parser()._inidict.items():  # pytest has no public reader of ini keys
        if not str(help_text or "").strip():
            raise ValueError(f"ini key {name} has no help text: give it one in pytest_rageval/defaults.py INI_KEYS")
        shown = _default(default)
        rows.append((_code(name), str(kind or "string"), shown, _cell(str(help_text))))
    return rows


def ini_markdown() -> str:
    """The Markdown table of every ini key of the plugin (``[pytest]`` / ``[tool.pytest.ini_options]``)."""
    return _table(("ini key", "type", "default", "meaning"), ini_rows())


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


def eval_field_rows() -> list[tuple[str, str, str, str, str]]:
    """(field, type, required, default, description) of every field; required fields first, then by name."""
    schema = eval_schema()
    required = schema.get("required", [])
    defs = schema.get("$defs", {})
    names = list(required) + sorted(name for name in schema["properties"] if name not in required)
    rows = []
    for name in names:
        spec = schema["properties"][name]
        meaning = spec.get("description") or FIELD_MEANINGS.get(name, "")
        if not meaning:
            raise ValueError(f"eval-set field {name} has no description: add one to docs/hooks/reference.py FIELD_MEANINGS")
        if name in required:
            default = ""
        elif "default" in spec:
            default = _code(json.dumps(spec["default"]))
        else:  # a list or an object, empty unless given
            default = _code("[]" if spec.get("type") == "array" else "{}")
        rows.append((_code(name), _cell(_schema_type(spec, defs)), "yes" if name in required else "", default, _cell(meaning)))
    return rows


def eval_fields_markdown() -> str:
    """The schema's own description of a line, then the Markdown table of its fields."""
    schema = eval_schema()
    table = _table(("field", "type", "required", "default", "meaning"), eval_field_rows())
    return _cell(schema.get("description", "")) + "\n\n" + table


GENERATORS: dict[str, Callable[[], str]] = {
    "options": options_markdown,
    "ini": ini_markdown,
    "eval-fields": eval_fields_markdown,
}


def render(markdown: str, where: str = "") -> str:
    """``markdown`` with every ``<!-- generated: NAME -->`` marker replaced by its table."""

    def table(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{where}: unknown generated table {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(table, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: fill the generated tables of a page."""
    if MARKER.search(markdown) is None:
        return markdown
    from mkdocs.exceptions import PluginError

    try:
        return render(markdown, page.file.src_uri)
    except ValueError as exc:
        raise PluginError(str(exc)) from None
