"""Write docs/reference/api.md, the API and hooks reference, from the package's own docstrings and signatures.

    python docs/hooks/api_page.py           # write the page
    python docs/hooks/api_page.py --check   # exit 1 when the committed page is stale

The page documents every name ``pytest_rageval`` exports (``__all__``), grouped by what a reader does with it,
and every hook of ``pytest_rageval/plugin/hookspecs.py``. It is committed, so it reads on a code host too;
``tests/test_api_reference.py`` fails when it differs from what this script writes. The output depends only on
the code: no clock, no memory address, no set order.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path[:1]:
    sys.path.insert(0, str(ROOT))

PAGE = ROOT / "docs" / "reference" / "api.md"
COMMAND = "python docs/hooks/api_page.py"

#: The exported names by section, in reading order; a name exported but not listed here goes under "Other names".
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Metrics and judges of your own",
        "What the `pytest_rageval_metrics` and `pytest_rageval_judges` hooks hand over, and what a judge is given and gives back.",
        ("Metric", "ScoreContext", "Judge", "JudgeInput", "Verdict", "JudgeError"),
    ),
    (
        "Hand-written tests",
        "The assertions and the client of the `rageval_client` fixture, for tests written by hand.",
        (
            "assert_metrics",
            "assert_answered",
            "assert_abstained",
            "assert_cites",
            "SessionClient",
            "CaseResult",
            "EvaluateError",
        ),
    ),
    (
        "Eval cases and responses",
        "An eval-set line and what the system under test answers, as the plugin reads them.",
        ("EvalCase", "GoldSupport", "Chunk", "RagResponse"),
    ),
    ("Clients", "The clients that ask the system under test.", ("HttpClient", "CallableClient", "RagCallError")),
    (
        "Errors and warnings",
        "Every error the plugin raises derives from `RagevalError`.",
        ("RagevalError", "ConfigError", "DataError", "BaselineError", "RagevalWarning"),
    ),
)

_ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):`~?([^`]+)`")
_QUALIFIED = re.compile(
    r"\b(?:pytest_rageval|_pytest|typing|collections\.abc|pathlib|pydantic\.main)\.(?:\w+\.)*(?=\w)"
)
_PARAM = re.compile(r"^:param (\w+):\s*(.*)$")


def _plain(text: str) -> str:
    """A docstring as Markdown: reST roles and double backticks become code spans, ``:param x:`` a list item,
    and ``<`` outside code is escaped (it would start HTML)."""
    text = _ROLE.sub(lambda m: f"``{m.group(1).rpartition('.')[2] if m.group(0).count('~') else m.group(1)}``", text)
    lines = []
    for line in text.splitlines():
        match = _PARAM.match(line.strip())
        lines.append(f"- `{match.group(1)}`: {match.group(2)}" if match else line)
    parts = re.split(r"(``.+?``)", "\n".join(lines), flags=re.DOTALL)
    return "".join(f"`{part[2:-2]}`" if part.startswith("``") else part.replace("<", "&lt;") for part in parts).strip()


def _doc(obj: object) -> str:
    return _plain(inspect.getdoc(obj) or "")


def _annotation(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return _QUALIFIED.sub("", text).replace("NoneType", "None")


def _default(value: Any) -> str:
    if isinstance(value, _Factory):
        return repr(value)
    if dataclasses.is_dataclass(value) or callable(value) or " at 0x" in repr(value):
        return "..."
    return repr(value)


def _parameters(signature: inspect.Signature) -> list[str]:
    """One line per parameter, with a bare ``*`` or ``/`` where keyword-only or positional-only ones begin."""
    lines: list[str] = []
    starred = False
    params = list(signature.parameters.values())
    for index, param in enumerate(params):
        if param.name == "self" and index == 0:
            continue
        if param.kind is param.KEYWORD_ONLY and not starred:
            lines.append("*")
            starred = True
        if param.kind is param.VAR_POSITIONAL:
            starred = True
        text = (
            "*" if param.kind is param.VAR_POSITIONAL else "**" if param.kind is param.VAR_KEYWORD else ""
        ) + param.name
        if param.annotation is not param.empty:
            text += f": {_annotation(param.annotation)}"
        if param.default is not param.empty:
            text += (
                f" = {_default(param.default)}"
                if param.annotation is not param.empty
                else f"={_default(param.default)}"
            )
        lines.append(text)
        if param.kind is param.POSITIONAL_ONLY and (
            index + 1 == len(params) or params[index + 1].kind is not param.POSITIONAL_ONLY
        ):
            lines.append("/")
    return lines


def _signature(prefix: str, name: str, signature: inspect.Signature | None, returns: bool) -> str:
    if signature is None:
        return f"{prefix}{name}"
    params = _parameters(signature)
    tail = (
        f" -> {_annotation(signature.return_annotation)}"
        if returns and signature.return_annotation is not signature.empty
        else ""
    )
    one_line = f"{prefix}{name}({', '.join(params)}){tail}"
    if len(one_line) <= 100:
        return one_line
    return f"{prefix}{name}(\n" + "".join(f"    {p},\n" for p in params) + f"){tail}"


def _safe_signature(obj: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def _is_exception(obj: object) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseException)


class _Factory:
    """A default made by a factory, shown as dataclasses show it."""

    def __repr__(self) -> str:
        return "<factory>"


def _pydantic_signature(cls: type) -> inspect.Signature | None:
    """A pydantic model's constructor from its fields (names, defaults), keyword-only: the same whatever pydantic
    version builds the model's own signature."""
    fields = getattr(cls, "model_fields", None)
    if not isinstance(fields, dict):
        return None
    params = []
    for name, info in fields.items():
        default = (
            inspect.Parameter.empty
            if info.is_required()
            else _Factory()
            if info.default_factory is not None
            else info.default
        )
        params.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=info.annotation)
        )
    if getattr(cls, "model_config", {}).get("extra") == "allow":
        params.append(inspect.Parameter("extra", inspect.Parameter.VAR_KEYWORD, annotation="Any"))
    return inspect.Signature(params)


def _class_signature(cls: type) -> inspect.Signature | None:
    """The constructor's signature, each parameter annotated as the class's source writes it (a string under
    postponed annotations), so the page does not depend on how a pydantic or Python version prints a type."""
    if _is_exception(cls) and "__init__" not in vars(cls):
        return None
    signature = _pydantic_signature(cls) or _safe_signature(cls)
    if signature is None:
        return None
    written: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        written.update(vars(klass).get("__annotations__", {}))
    params = [
        p.replace(annotation=written[p.name]) if isinstance(written.get(p.name), str) else p
        for p in signature.parameters.values()
    ]
    return signature.replace(parameters=params)


def _members(cls: type) -> Iterable[tuple[str, str, str]]:
    """(heading, signature, doc) of the public methods and properties the class itself defines, in source order."""
    for name, member in vars(cls).items():
        if name.startswith(("_", "model_")):
            continue
        if isinstance(member, property):
            yield name, f"{name}  # property", _doc(member)
        elif isinstance(member, (staticmethod, classmethod)):
            function = member.__func__
            yield (
                name,
                _signature(
                    "async def " if inspect.iscoroutinefunction(function) else "def ",
                    name,
                    _safe_signature(function),
                    True,
                ),
                _doc(function),
            )
        elif inspect.isfunction(member):
            prefix = "async def " if inspect.iscoroutinefunction(member) else "def "
            yield name, _signature(prefix, name, _safe_signature(member), True), _doc(member)


def _entry(name: str, obj: Any) -> list[str]:
    """The Markdown of one exported name."""
    lines = [f"### {name}", ""]
    if isinstance(obj, type):
        bases = [base.__name__ for base in obj.__bases__ if base is not object]
        kind = "exception" if _is_exception(obj) else "warning" if issubclass(obj, Warning) else "class"
        lines += [
            "```python",
            _signature("class ", name, _class_signature(obj), False)
            + (f"  # {kind} (bases: {', '.join(bases)})" if bases else ""),
            "```",
            "",
        ]
        if obj.__doc__:
            lines += [_doc(obj), ""]
        for member, signature, doc in _members(obj):
            lines += [f"#### {name}.{member}", "", "```python", signature, "```", ""]
            if doc:
                lines += [doc, ""]
    elif callable(obj):
        prefix = "async def " if inspect.iscoroutinefunction(obj) else "def "
        lines += ["```python", _signature(prefix, name, _safe_signature(obj), True), "```", "", _doc(obj), ""]
    else:
        lines += ["```python", f"{name} = {obj!r}", "```", ""]
    return lines


def _hooks() -> list[str]:
    from pytest_rageval.plugin import hookspecs

    lines = ["## Hooks", "", _doc(hookspecs), ""]
    for name, function in vars(hookspecs).items():
        if name.startswith("pytest_rageval_") and inspect.isfunction(function):
            lines += [
                f"### {name}",
                "",
                "```python",
                _signature("def ", name, inspect.signature(function), True),
                "```",
                "",
                _doc(function),
                "",
            ]
    return lines


def render() -> str:
    """The whole page."""
    import pytest_rageval

    exported = [name for name in pytest_rageval.__all__ if not name.startswith("_")]
    lines = [
        "# API and hooks reference",
        "",
        f"<!-- Generated from the package's docstrings by `{COMMAND}`: edit the docstrings, then run it. -->",
        "",
        "What `pytest_rageval` exports (`from pytest_rageval import Metric, Judge, Verdict`) and the hooks a",
        "`conftest.py` or a plugin implements. Every constructor of the extension names takes its arguments by keyword.",
        "",
        *_hooks(),
    ]
    listed: set[str] = set()
    for title, intro, names in GROUPS:
        lines += [f"## {title}", "", intro, ""]
        for name in names:
            if name in exported:
                lines += _entry(name, getattr(pytest_rageval, name))
                listed.add(name)
    rest = sorted(name for name in exported if name not in listed)
    if rest:
        lines += ["## Other names", ""]
        for name in rest:
            lines += _entry(name, getattr(pytest_rageval, name))
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
