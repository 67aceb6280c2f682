"""JSON from outside, bounded: the one place where untrusted JSON becomes Python values and back.

Python's ``json`` accepts what strict JSON readers reject (``NaN``,
``Infinity``), decodes lone surrogate escapes (``"\\ud800"``) into strings that
cannot be written as UTF-8, recurses until ``RecursionError`` on deep nesting
and raises an untyped ``ValueError`` on integers past 4,300 digits. Here each of
these is either refused with a :class:`JsonLimitError` naming the JSON path, or
repaired with a note saying what was changed, so no value read from an eval
set, a RAG response or a judge can crash a later writer.

Pure: no pytest; the one I/O is :func:`read_file`, the reader of every JSON
artifact (metrics.json, config.json, a baseline).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, BinaryIO, Literal

from pytest_rageval.errors import DataError

__all__ = [
    "MAX_DEPTH",
    "MAX_NUMBER_CHARS",
    "JsonFileError",
    "JsonLimitError",
    "clean",
    "dump",
    "dumps",
    "loads",
    "read_file",
    "read_text",
]

#: Deepest nesting accepted (objects and arrays); eval lines and RAG responses need far less.
MAX_DEPTH = 64
#: Longest number literal accepted (digits, sign, point and exponent).
MAX_NUMBER_CHARS = 100

_NONFINITE_NAMES = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_SURROGATE = re.compile("[\ud800-\udfff]")
#: What a JSON text holding a surrogate must contain: the character itself or a ``\\uD800``-``\\uDFFF`` escape.
_MAYBE_SURROGATE = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")

Policy = Literal["refuse", "repair"]


class JsonLimitError(DataError, ValueError):
    """JSON that is valid text but breaks a bound; ``str()`` is one readable line naming the JSON path.

    ``path`` is the JSON path of the offending value (keys and list indices; empty
    when the problem is at the top level or could not be placed) and ``problem``
    the message without the path, so a caller can word the path its own way;
    ``message`` (when given) is ``str()`` instead of ``"<path>: <problem>"``.
    """

    def __init__(self, problem: str, path: tuple[Any, ...] = (), *, message: str | None = None) -> None:
        super().__init__(message or (f"{_path_text(path)}: {problem}" if path else problem))
        self.problem = problem
        self.path = path


def _path_text(path: tuple[Any, ...]) -> str:
    """``a.b[2].c``; a path deeper than 12 parts shows its first 8 and last 2 around the number left out."""
    if len(path) > 12:
        return f"{_path_text(path[:8])}...({len(path) - 10} more)...{_path_text(path[-2:]).lstrip('.')}"
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def loads(
    text: str | bytes,
    *,
    max_depth: int = MAX_DEPTH,
    nonfinite: Policy = "refuse",
    surrogates: Policy = "repair",
    duplicate_keys: Policy = "repair",
) -> tuple[Any, list[str]]:
    """Parse ``text`` as strict, bounded JSON; returns the value and notes on what was repaired.

    ``nonfinite``: ``NaN``/``Infinity`` (and float literals that overflow to
    infinity) are refused, or repaired to ``null``. ``surrogates``: lone
    surrogates in strings or keys are refused, or replaced with U+FFFD.
    ``duplicate_keys``: a key given twice in one object is refused, or the
    last one wins (Python's behaviour). Nesting deeper than ``max_depth`` and
    number literals longer than :data:`MAX_NUMBER_CHARS` are always refused.
    Syntax errors raise ``json.JSONDecodeError`` as usual.
    """

    nonfinite_seen = False

    def parse_constant(name: str) -> Any:
        nonlocal nonfinite_seen
        if nonfinite == "refuse":
            raise JsonLimitError(f"{name} is not valid JSON")
        nonfinite_seen = True
        return float(name)  # clean() below nulls it with a note naming its path

    def parse_int(literal: str) -> int:
        if len(literal) > MAX_NUMBER_CHARS:
            raise JsonLimitError(f"a number of {len(literal)} characters (at most {MAX_NUMBER_CHARS})")
        return int(literal)

    def parse_float(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            raise JsonLimitError(f"a number of {len(literal)} characters (at most {MAX_NUMBER_CHARS})")
        nonlocal nonfinite_seen
        value = float(literal)
        if not math.isfinite(value):
            if nonfinite == "refuse":
                raise JsonLimitError(f"{literal} is too large for a float (not valid JSON)")
            nonfinite_seen = True
        return value

    def object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs) and duplicate_keys == "refuse":
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise JsonLimitError(f"key {key!r} is given twice in one object")
                seen.add(key)
        return obj

    notes: list[str] = []
    if isinstance(text, bytes):
        text = _decode(text, notes)
    decoder = json.JSONDecoder(
        parse_constant=parse_constant,
        parse_int=parse_int,
        parse_float=parse_float,
        object_pairs_hook=object_pairs if duplicate_keys == "refuse" else None,
    )
    try:
        value = decoder.decode(text)
    except RecursionError:
        raise _placed(JsonLimitError(f"nested deeper than {max_depth} levels"), text, decoder) from None
    except JsonLimitError as exc:
        raise _placed(exc, text, decoder) from None
    if not nonfinite_seen and text.count("[") + text.count("{") <= max_depth and not _MAYBE_SURROGATE.search(text):
        # Fast path: too few brackets to nest past the bound, no surrogate or surrogate escape in the
        # text, no NaN/Infinity to null, and the decoder hooks above already bounded numbers.
        return value, notes
    value, repaired = clean(value, max_depth=max_depth, nonfinite=nonfinite, surrogates=surrogates)
    return value, notes + repaired


def _decode(data: bytes, notes: list[str]) -> str:
    """JSON bytes as text (UTF-8, or UTF-16/32 as ``json`` detects them); invalid bytes become U+FFFD with a note."""
    encoding = json.detect_encoding(data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        notes.append(f"invalid {encoding.upper()} bytes (first at byte {exc.start}) replaced by U+FFFD")
        return data.decode(encoding, "replace")


_WS = re.compile(r"[ \t\n\r]*")
#: How many levels :func:`_placed` descends to name the value at fault.
_PLACE_DEPTH = 8


def _placed(exc: JsonLimitError, text: str, decoder: json.JSONDecoder) -> JsonLimitError:
    """``exc`` (raised while decoding, so without a path) with the JSON path of the value at fault.

    Only run on failure: re-reads the document container by container with the
    same decoder, descending into the member that fails (at most
    ``_PLACE_DEPTH`` levels); a key given twice is its own place. ``exc`` is
    returned as it was when the fault cannot be placed (a syntax error first).
    """
    if exc.path:
        return exc
    try:
        path = _fault_path(text, _skip_ws(text, 0), decoder, _PLACE_DEPTH)
    except ValueError:
        return exc
    return JsonLimitError(exc.problem, path) if path else exc


def _skip_ws(text: str, idx: int) -> int:
    """The index of the first character at or after ``idx`` that is not JSON whitespace."""
    found = _WS.match(text, idx)
    return found.end() if found is not None else idx


_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _fault_path(text: str, idx: int, decoder: json.JSONDecoder, levels: int) -> tuple[Any, ...]:
    """The path, below the value starting at ``idx``, of the member whose decoding fails (``()``: this value)."""
    opener = text[idx : idx + 1]
    if levels <= 0 or opener not in ("{", "["):
        return ()
    seen: set[str] = set()
    idx = _skip_ws(text, idx + 1)
    position = 0
    while text[idx : idx + 1] not in ("", "}", "]"):
        key: Any = position
        if opener == "{":
            key, idx = _scanstring(text, idx + 1)
            if key in seen:
                return (key,)
            seen.add(key)
            idx = _skip_ws(text, idx) + 1  # past the ':'
            idx = _skip_ws(text, idx)
        start = idx
        try:
            _, idx = decoder.raw_decode(text, idx)
        except (JsonLimitError, RecursionError):
            return (key, *_fault_path(text, start, decoder, levels - 1))
        idx = _skip_ws(text, idx)
        if text[idx : idx + 1] == ",":
            idx = _skip_ws(text, idx + 1)
        position += 1
    return ()


def clean(
    value: Any,
    *,
    max_depth: int = MAX_DEPTH,
    nonfinite: Policy = "repair",
    surrogates: Policy = "repair",
) -> tuple[Any, list[str]]:
    """``value`` (already Python: a parsed document or what a callable returned) made safe to write as JSON.

    Walks dicts, lists and tuples without recursion. Refuses (``JsonLimitError``)
    nesting past ``max_depth`` and integers longer than :data:`MAX_NUMBER_CHARS`
    digits; NaN/Infinity floats and lone surrogates in strings and keys are
    refused or repaired by policy. Returns a copy (containers are new, leaves
    shared) and notes naming the JSON paths of what was repaired.
    """
    notes: list[str] = []

    def fix_str(text: str, path: tuple[Any, ...]) -> str:
        found = _SURROGATE.search(text)
        if found is None:
            return text
        if surrogates == "refuse":
            raise JsonLimitError(f"a lone surrogate (\\u{ord(found[0]):04x}) is not valid Unicode text", path)
        notes.append(f"{_path_text(path)}: invalid Unicode (lone surrogate) replaced by U+FFFD")
        return _SURROGATE.sub("\ufffd", text)

    def fix_leaf(leaf: Any, path: tuple[Any, ...]) -> Any:
        if isinstance(leaf, str):
            return fix_str(leaf, path)
        if isinstance(leaf, bool) or leaf is None:
            return leaf
        if isinstance(leaf, int):
            if leaf.bit_length() > MAX_NUMBER_CHARS * 3.33:
                raise JsonLimitError(f"an integer of more than {MAX_NUMBER_CHARS} digits", path)
            return leaf
        if isinstance(leaf, float) and not math.isfinite(leaf):
            if nonfinite == "refuse":
                raise JsonLimitError(f"{_NONFINITE_NAMES[str(leaf)]} is not valid JSON", path)
            notes.append(f"{_path_text(path)}: {_NONFINITE_NAMES[str(leaf)]} replaced by null")
            return None
        return leaf

    def copy(node: Any, path: tuple[Any, ...], depth: int) -> Any:
        # Iterative: an explicit stack of (source, target, path, depth) containers.
        if not isinstance(node, (dict, list, tuple)):
            return fix_leaf(node, path)
        root: Any = {} if isinstance(node, dict) else []
        stack = [(node, root, path, depth)]
        while stack:
            src, dst, where, level = stack.pop()
            if level > max_depth:
                problem = f"nested deeper than {max_depth} levels"
                raise JsonLimitError(problem, where, message=f"{problem} (at {_path_text(where)})")
            items = src.items() if isinstance(src, dict) else enumerate(src)
            nested: list[tuple[Any, Any, tuple[Any, ...], int]] = []
            for key, item in items:
                if isinstance(dst, dict) and isinstance(key, str):
                    key = fix_str(key, (*where, _SURROGATE.sub("�", key)))
                sub = (*where, key)
                if isinstance(item, (dict, list, tuple)):
                    child: Any = {} if isinstance(item, dict) else []
                    nested.append((item, child, sub, level + 1))
                else:
                    child = fix_leaf(item, sub)
                if isinstance(dst, dict):
                    dst[key] = child
                else:
                    dst.append(child)
            stack.extend(reversed(nested))  # the first container is walked first: problems in document order
        return root

    return copy(value, (), 1), notes


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never writes ``NaN`` or an unencodable string.

    The fast path is plain strict ``json.dumps``; only when that fails (a
    non-finite float) is the value cleaned first (NaN/Infinity become null),
    and lone surrogates in the text become U+FFFD. Raises ``JsonLimitError``
    for a value nested past :data:`MAX_DEPTH`. Extra keyword arguments go to
    ``json.dumps``; ``ensure_ascii`` defaults to False and ``default`` to a mapping
    that is no dict written as an object, anything else as its ``str``.
    """
    kwargs.setdefault("ensure_ascii", False)
    kwargs.setdefault("default", _as_dict_or_str)
    try:
        text = json.dumps(value, allow_nan=False, **kwargs)
    except (ValueError, RecursionError):
        value, _ = clean(value)
        text = json.dumps(value, allow_nan=False, **kwargs)
    return _SURROGATE.sub("\ufffd", text)


#: Characters of JSON text :func:`dump` gathers before it writes them.
_DUMP_BUFFER = 1 << 16


def dump(value: Any, fh: BinaryIO, **kwargs: Any) -> None:
    """Write ``dumps(value, **kwargs)`` to ``fh`` (binary, seekable) as UTF-8, a piece at a time.

    The same bytes as ``dumps(value, **kwargs).encode()``, without the whole text in memory at once (a
    metrics.json of 100,000 cases: its text, the pieces it is joined from and its bytes). When the strict
    pass fails (a non-finite float), what it wrote is cut off and the cleaned value written instead.
    """
    kwargs.setdefault("ensure_ascii", False)
    kwargs.setdefault("default", _as_object_or_str)
    start = fh.tell()
    try:
        _write_pieces(fh, json.JSONEncoder(allow_nan=False, **kwargs).iterencode(value))
    except (ValueError, RecursionError):
        fh.seek(start)
        fh.truncate()
        value, _ = clean(value)
        _write_pieces(fh, json.JSONEncoder(allow_nan=False, **kwargs).iterencode(value))


def _as_dict_or_str(value: Any) -> Any:
    """How :func:`dumps` writes a value JSON has no type for: a mapping as an object, anything else as text."""
    return dict(value) if isinstance(value, Mapping) else str(value)


def _as_object_or_str(value: Any) -> Any:
    """How :func:`dump` writes a value JSON has no type for: a mapping as an object whose entries are read one at
    a time as they are written (a table that makes each entry when asked is never whole), anything else as text."""
    return _ItemsAsRead(value) if isinstance(value, Mapping) else str(value)


class _ItemsAsRead(dict):  # type: ignore[type-arg]
    """A mapping that is no dict, as the pure-Python JSON encoder reads a dict (its length, then its items);
    holds no entries of its own. Only :func:`dump` uses it: that encoder is the one it always runs."""

    __slots__ = ("_mapping",)

    def __init__(self, mapping: Mapping[Any, Any]) -> None:
        super().__init__()
        self._mapping = mapping

    def __len__(self) -> int:
        return len(self._mapping)

    def items(self) -> Any:
        return self._mapping.items()


def _write_pieces(fh: BinaryIO, pieces: Iterable[str]) -> None:
    """The JSON text's pieces, lone surrogates replaced as :func:`dumps` does (a surrogate is one character, so
    pieces can be joined anywhere), written in blocks of about :data:`_DUMP_BUFFER` characters."""
    block: list[str] = []
    size = 0
    for piece in pieces:
        block.append(piece)
        size += len(piece)
        if size >= _DUMP_BUFFER:
            fh.write(_SURROGATE.sub("\ufffd", "".join(block)).encode("utf-8"))
            block.clear()
            size = 0
    fh.write(_SURROGATE.sub("\ufffd", "".join(block)).encode("utf-8"))


class JsonFileError(DataError, ValueError):
    """A JSON file that cannot be read (``unreadable``: missing, a folder, not UTF-8) or is not JSON.

    ``detail`` is the cause (the OS error or the parser's message) so a caller
    can word its own message; ``str()`` is ``"<path>: cannot read: <detail>"``
    or ``"<path>: not valid JSON (<detail>)"``.
    """

    def __init__(self, path: str | os.PathLike[str], detail: BaseException, *, unreadable: bool) -> None:
        self.path = os.fspath(path)
        self.detail = detail
        self.unreadable = unreadable
        super().__init__(
            f"{self.path}: cannot read: {detail}" if unreadable else f"{self.path}: not valid JSON ({detail})"
        )


def read_text(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of the file at ``path``; :class:`JsonFileError` (``unreadable``) when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise JsonFileError(path, exc, unreadable=True) from None


def read_file(path: str | os.PathLike[str], *, text: str | None = None) -> Any:
    """The JSON value of the file at ``path``: the one reader of JSON artifacts (metrics.json, config.json, baselines).

    Read as Python's ``json`` reads it (``NaN`` and long integers come through),
    so the caller can name a value that is not a number instead of refusing the
    whole file (readback.py checks the values); raises :class:`JsonFileError` when
    the file cannot be read or parsed. ``text``: the file's text, when the caller
    has read it already (:func:`read_text`).
    """
    if text is None:
        text = read_text(path)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, an integer past Python's digit limit, deep nesting
        raise JsonFileError(path, exc, unreadable=False) from None
