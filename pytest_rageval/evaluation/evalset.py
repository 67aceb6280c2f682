"""Read an eval-set ``.jsonl`` file into good cases and bad lines.

One JSON object per line; blank lines and lines starting with ``//`` are
skipped. Each other line becomes either a :class:`LoadedCase` or a
:class:`BadLine` whose one-line message names the file, the line, the field
and the problem (an unknown key also names the closest known key). A bad line
never stops the others. Apart from reading the file this module is pure: no
pytest import.

``python -m pytest_rageval.evaluation.evalset`` rewrites ``eval_case.schema.json`` from
:func:`line_json_schema`.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import gc
import json
import types
import typing
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from pydantic import BaseModel, ValidationError

from pytest_rageval import safejson
from pytest_rageval.suggest import closest

from .schema import EvalCase, id_problem

__all__ = [
    "BadLine",
    "EvalFile",
    "LoadedCase",
    "gc_paused",
    "iter_eval_file",
    "line_json_schema",
    "load_eval_file",
    "parse_line",
]

#: The JSON Schema file shipped at the package's top level (kept equal to line_json_schema() by a test).
SCHEMA_PATH = Path(__file__).parents[1] / "eval_case.schema.json"


@dataclass(frozen=True)
class LoadedCase:
    """A line that validated: the case, its 1-based line number and the line as read (``source``:
    :func:`parse_line` makes the case of it again, for a caller that keeps the line rather than the case)."""

    case: EvalCase
    line: int
    source: bytes = b""


def parse_line(source: bytes) -> EvalCase:
    """The case of a line that validated when its file was loaded (``LoadedCase.source``), parsed again."""
    obj, _ = safejson.loads(source.decode("utf-8"), surrogates="refuse", duplicate_keys="refuse")
    return EvalCase.model_validate(obj)


@dataclass(frozen=True)
class BadLine:
    """A line that did not validate.

    ``message`` is one line, ``<display>:<line>: <problems joined by "; ">``.
    ``case_id`` is the line's ``"id"`` when it was a valid id that no
    earlier line of the file used, else None (so it is safe as a node-id part).
    ``line`` is 0 when the file could not be read at all.
    """

    line: int
    message: str
    case_id: str | None


@dataclass(frozen=True)
class EvalFile:
    """One loaded eval-set file: good cases and bad lines, each in file order."""

    display: str
    cases: list[LoadedCase]
    bad: list[BadLine]


def load_eval_file(path: Path, display: str | None = None) -> EvalFile:
    """Load one eval-set file; ``display`` is the path shown in messages (default ``str(path)``)."""
    display = str(path) if display is None else display
    # The loop allocates many objects and frees none of them, which makes the cyclic
    # garbage collector rescan an ever larger heap (about 2/3 of the time on 50,000
    # lines). Nothing here creates reference cycles, so pause it for the loop.
    with gc_paused():
        return _listed(display, iter_eval_file(path, display))


def _load_lines(data: bytes, display: str) -> EvalFile:
    """The cases and bad lines of an eval set's bytes."""
    return _listed(display, _iter_lines(data, display))


def _listed(display: str, entries: Iterator[LoadedCase | BadLine]) -> EvalFile:
    cases: list[LoadedCase] = []
    bad: list[BadLine] = []
    for entry in entries:
        if isinstance(entry, LoadedCase):
            cases.append(entry)
        else:
            bad.append(entry)
    return EvalFile(display, cases, bad)


def iter_eval_file(path: Path, display: str | None = None) -> Iterator[LoadedCase | BadLine]:
    """The good cases and bad lines of one eval-set file in file order, each made as its line is read (what
    :func:`load_eval_file` lists), so a caller that keeps only what it needs of each case holds one at a time."""
    display = str(path) if display is None else display
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        yield BadLine(0, f"{display}:0: cannot read eval set: {reason}", None)
        return
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    yield from _iter_lines(data, display)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (as it was before, after it)."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc_was_enabled:
            gc.enable()


def same_id(case_id: str) -> str:
    """What two ids must share to be one case: their NFKC form. Ids that look alike, one composed and one
    decomposed (NFC, NFD) or one with a compatibility character (the Kelvin sign for K), are one id: the later
    line is a duplicate. Case is kept (``A`` and ``a`` are two ids)."""
    return unicodedata.normalize("NFKC", case_id)


def _iter_lines(data: bytes, display: str) -> Iterator[LoadedCase | BadLine]:
    """Split, decode, parse and validate each line; ids are claimed by the first line using them."""
    first_line_of_id: dict[str, tuple[int, str]] = {}  # an id's NFKC form -> (line, the id as that line wrote it)
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield BadLine(lineno, f"{display}:{lineno}: {_decode_problem(exc)}", None)
            continue
        stripped = text.strip()
        if not stripped or stripped.startswith("//"):
            continue
        try:
            obj, _ = safejson.loads(text, surrogates="refuse", duplicate_keys="refuse")
        except json.JSONDecodeError as exc:
            yield BadLine(lineno, f"{display}:{lineno}: invalid JSON: {exc.msg} (column {exc.colno})", None)
            continue
        except safejson.JsonLimitError as exc:
            yield BadLine(lineno, f"{display}:{lineno}: {_limit_problem(exc)}", None)
            continue
        if not isinstance(obj, dict):
            message = f"{display}:{lineno}: expected a JSON object, got {json_kind(obj)}"
            yield BadLine(lineno, message, None)
            continue

        problems: list[str] = []
        case_id = obj.get("id")
        if not isinstance(case_id, str) or not case_id or id_problem(case_id) is not None:
            case_id = None
        elif same_id(case_id) in first_line_of_id:
            first, earlier = first_line_of_id[same_id(case_id)]
            alike = "" if earlier == case_id else f", as {earlier!r} once Unicode-normalised (NFKC)"
            problems.append(f"field 'id': duplicate id {case_id!r} (first used on line {first}{alike})")
            case_id = None
        else:
            first_line_of_id[same_id(case_id)] = (lineno, case_id)

        try:
            case = EvalCase.model_validate(obj)
        except ValidationError as exc:
            problems.extend(_validation_problems(exc))
        else:
            if not problems:
                yield LoadedCase(case, lineno, raw)
                continue
        yield BadLine(lineno, f"{display}:{lineno}: " + "; ".join(problems), case_id)


def line_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one eval-set line.

    It lists the canonical field names only: the input aliases that the loader
    accepts (``query``, ``referenceAnswer``, ``expectedProposalIds``,
    ``expected_doc_ids``) are absent, and since unknown keys are forbidden the
    schema rejects lines that use them. Checks made in code (blank question,
    ``required_support_groups`` indices, ``recency_conflict_rule`` needing
    ``gold_supports``, unique ids) are not expressed in the schema.
    """
    schema = EvalCase.model_json_schema()
    for field in ("metadata", "params"):  # pydantic >= 2.7 adds the default `additionalProperties: true`; 2.5 does not
        schema["properties"][field].pop("additionalProperties", None)
    # a line asks one question, or holds a conversation's turns instead (never both)
    schema["required"] = [name for name in schema["required"] if name != "question"]
    schema["oneOf"] = [{"required": ["question"]}, {"required": ["turns"]}]
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pytest-rageval eval-set line"
    schema["description"] = (
        "One line of a pytest-rageval eval set (.jsonl): one JSON object per line; "
        "blank lines and lines starting with // are skipped. This schema uses the canonical "
        "field names; the loader also accepts the aliases query (question), referenceAnswer "
        "(reference_answer), expectedProposalIds and expected_doc_ids (gold_doc_ids), "
        "which this schema does not list."
    )
    return schema


def _schema_text() -> str:
    """The committed form of :func:`line_json_schema`: pretty-printed, sorted keys, trailing newline."""
    return json.dumps(line_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --- turning pydantic errors into one-line messages -------------------------------------------


#: How many segments of a JSON path a message shows (a too-deep path is cut with "...").
_SHOWN_PATH = 6


def _limit_problem(exc: safejson.JsonLimitError) -> str:
    """A bound the line's JSON broke, worded like a field problem: ``field 'metadata.k[1]': ...``."""
    if not exc.path:
        return f"invalid JSON: {exc.problem}"
    path = ""
    for part in exc.path[:_SHOWN_PATH]:
        path = path + f"[{part}]" if isinstance(part, int) else _join(path, str(part))
    if len(exc.path) > _SHOWN_PATH:
        path += "..."
    return f"field {path!r}: {exc.problem}"


def _decode_problem(exc: UnicodeDecodeError) -> str:
    byte = exc.object[exc.start : exc.start + 1].hex()
    return f"not valid UTF-8: byte 0x{byte} at byte column {exc.start + 1} ({exc.reason})"


def json_kind(value: Any) -> str:
    """How a JSON (or TOML) value reads in a message: "a string", "a list", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


@functools.cache
def _known_keys(model: type[BaseModel]) -> tuple[str, ...]:
    """Field names and validation aliases of a model, canonical names first."""
    names: list[str] = list(model.model_fields)
    for field in model.model_fields.values():
        names.extend(str(a) for a in _aliases(field) if str(a) not in names)
    return tuple(names)


@functools.cache
def _alias_owner(model: type[BaseModel]) -> dict[str, str]:
    """Map every accepted input key of a model to its field name."""
    owner: dict[str, str] = {}
    for name, field in model.model_fields.items():
        owner[name] = name
        for alias in _aliases(field):
            owner[str(alias)] = name
    return owner


def _aliases(field: Any) -> list[str]:
    alias = field.validation_alias
    if alias is None:
        return [field.alias] if field.alias else []
    if isinstance(alias, str):
        return [alias]
    choices = getattr(alias, "choices", None)
    if choices is None:
        return []
    return [c for c in choices if isinstance(c, str)]


@functools.cache
def _nested_homes(model: type[BaseModel]) -> dict[str, str]:
    """Keys of models nested in ``model`` (e.g. GoldSupport's ``rel_path``) -> the field that holds them."""
    homes: dict[str, str] = {}
    for name, field in model.model_fields.items():
        for nested in _models_in(field.annotation):
            for key in _known_keys(nested):
                if key not in _alias_owner(model):
                    homes.setdefault(key, name)
    return homes


def _models_in(tp: Any) -> list[type[BaseModel]]:
    if _is_model(tp):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models_in(arg)]


@functools.lru_cache(maxsize=4096)
def _suggest(key: str, model: type[BaseModel]) -> str | None:
    """The closest known key of ``model`` (case-insensitive), memoised: a typo tends to repeat."""
    return closest(key, _known_keys(model))


_UNION_TYPES: tuple[Any, ...] = (Union, types.UnionType)


def _unwrap_optional(tp: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]`` (a constrained list, such as ``turns``)."""
    if typing.get_origin(tp) in _UNION_TYPES:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            tp = args[0]
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _tag_of(tp: Any) -> str:
    """The tag pydantic puts into an error ``loc`` for a member of a union."""
    if typing.get_origin(tp) is None and isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")


def _is_model(tp: Any) -> bool:
    # On Python 3.10 isinstance(list[str], type) is True: rule generic aliases out first.
    return typing.get_origin(tp) is None and isinstance(tp, type) and issubclass(tp, BaseModel)


@dataclass(frozen=True)
class _Walked:
    path: str  # "gold_supports[0].heading_path"
    parent: Any  # the type that holds the last loc element (a model for extra keys)
    union_path: str | None  # path of the first union the loc went through
    union_tag: str | None  # the member tag taken at that union
    union_root: bool  # the error is about the union member itself, not something inside it


@functools.lru_cache(maxsize=4096)
def _walk(loc: tuple[Any, ...]) -> _Walked:
    """Follow ``loc`` through EvalCase's types: a readable path, minus pydantic's union tags.

    Memoised: the same mistake tends to repeat across the lines of a file.
    """
    tp: Any = EvalCase
    path = ""
    parent: Any = None
    union_path: str | None = None
    union_tag: str | None = None
    union_root = False
    for i, elem in enumerate(loc):
        tp = _unwrap_optional(tp)
        parent = tp
        origin = typing.get_origin(tp)
        if _is_model(tp) and isinstance(elem, str):
            owner = _alias_owner(tp).get(elem)
            tp = tp.model_fields[owner].annotation if owner else None
            path = _join(path, elem)
        elif origin in _UNION_TYPES and isinstance(elem, str):
            if union_path is None:
                union_path, union_tag, union_root = path, elem, i == len(loc) - 1
            tp = next((a for a in typing.get_args(tp) if _tag_of(a) == elem), None)
        elif origin is list and isinstance(elem, int):
            path += f"[{elem}]"
            tp = typing.get_args(tp)[0] if typing.get_args(tp) else None
        elif origin is dict:
            path = _join(path, str(elem))
            args = typing.get_args(tp)
            tp = args[1] if len(args) == 2 else None
        else:
            path = path + f"[{elem}]" if isinstance(elem, int) else _join(path, str(elem))
            tp = None
    return _Walked(path, parent, union_path, union_tag, union_root)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _clean_msg(msg: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg


def _validation_problems(exc: ValidationError) -> list[str]:
    """One readable problem per pydantic error (union alternatives merged), in pydantic's order."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    walked = [_walk(tuple(err["loc"])) for err in errors]

    # For each union, keep the members that failed *inside* (the input had their shape);
    # when every member failed at its root, merge their messages into one.
    deep_members: dict[str, set[str]] = {}
    for w in walked:
        if w.union_path is not None and not w.union_root:
            deep_members.setdefault(w.union_path, set()).add(w.union_tag or "")
    merged: dict[str, list[str]] = {}
    order: list[tuple[str, Any]] = []  # ("msg", text) or ("union", path)
    for err, w in zip(errors, walked):
        if w.union_path is not None:
            if w.union_path in deep_members:
                if w.union_tag not in deep_members[w.union_path]:
                    continue
            else:
                if w.union_path not in merged:
                    merged[w.union_path] = []
                    order.append(("union", w.union_path))
                merged[w.union_path].append(_clean_msg(err["msg"]))
                continue
        order.append(("msg", _problem(err, w)))

    problems: list[str] = []
    for kind, value in order:
        if kind == "union":
            problems.append(f"field {value!r}: {_merge_union_msgs(merged[value])}")
        elif value not in problems:
            problems.append(value)
    return problems


def _merge_union_msgs(msgs: list[str]) -> str:
    """["Input should be a valid string", "Input should be a valid list"] -> "... string or a valid list"."""
    head = "Input should be "
    if all(m.startswith(head) for m in msgs):
        parts: list[str] = []
        for m in msgs:
            part = m[len(head) :].split(", ", 1)[0]
            if part not in parts:
                parts.append(part)
        return head + " or ".join(parts)
    return " or ".join(dict.fromkeys(msgs))


def _problem(err: Any, w: _Walked) -> str:
    kind = err["type"]
    loc = tuple(err["loc"])
    if kind == "missing":
        return f"field {w.path!r}: required field is missing"
    if kind == "extra_forbidden" and loc and isinstance(loc[-1], str):
        return _unknown_key_problem(str(loc[-1]), w.parent, _walk(loc[:-1]).path)
    msg = _clean_msg(err["msg"])
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        msg = "Input should be a JSON object"
    if not loc:
        return _model_level_problem(msg)
    return f"field {w.path!r}: {msg}"


def _unknown_key_problem(key: str, parent: Any, where: str) -> str:
    """An ``extra_forbidden`` key, with the closest known key of the same object level."""
    where_text = f" in {where!r}" if where else ""
    model = parent if _is_model(parent) else None
    if model is not None:
        owner = _alias_owner(model).get(key)
        if owner is not None:
            # A known alias rejected as extra: another spelling of the same field was used too.
            return f"key {key!r}{where_text} is another name for {owner!r}, which this line also sets; keep only one of them"
        home = _nested_homes(model).get(key)
        if home is not None:
            return f"unknown key {key!r}{where_text} (it belongs inside a {home!r} entry)"
        suggestion = _suggest(key, model)
        if suggestion is not None:
            return f"unknown key {key!r}{where_text} (did you mean {suggestion!r}?)"
    return f"unknown key {key!r}{where_text}"


def _model_level_problem(msg: str) -> str:
    """A model validator's message, e.g. "required_support_groups: index 3 is ..." or "params.k: reserved: ...",
    as a field problem."""
    for name in EvalCase.model_fields:
        if msg.startswith((name + ".", name + "[")) and ": " in msg:
            path, _, problem = msg.partition(": ")
            return f"field {path!r}: {problem}"
        if msg.startswith(name + ": "):
            return f"field {name!r}: {msg[len(name) + 2 :]}"
        if msg.startswith(name + " "):
            return f"field {name!r}: {msg[len(name) + 1 :]}"
    return msg


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    SCHEMA_PATH.write_text(_schema_text(), encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}")
