"""A stored run's user section: the fields conftest.py files and plugins add to metrics.json and config.json
through the ``pytest_rageval_run_fields`` hook, kept under one ``user`` key so they never meet the run's own.

What a hook returns is checked here (:func:`checked`: a mapping of field names to JSON values), the returns of
several implementations joined (:func:`joined`: a field named twice is refused, naming both), and a stored run's
section read back for the commands that write a run from another (:func:`carried`: ``rageval merge``,
``rescore`` and ``judge`` keep it as it is). Every mistake is one :class:`UserFieldsError` line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_rageval.errors import ConfigError

__all__ = ["MAX_BYTES", "USER_KEY", "UserFieldsError", "carried", "checked", "joined"]

#: The key of the user section in metrics.json and config.json.
USER_KEY = "user"
#: The most bytes the user section may take as JSON.
MAX_BYTES = 65_536
#: The deepest nesting of lists and objects in a field's value.
MAX_DEPTH = 16


class UserFieldsError(ConfigError):
    """What a hook returned cannot be stored; the message is one line naming the hook implementation."""


def _described(value: object) -> str:
    shown = repr(value)
    return f"{shown[:60]}... ({type(value).__name__})" if len(shown) > 60 else f"{shown} ({type(value).__name__})"


def _plain(value: object, where: str, depth: int) -> Any:
    """``value`` as plain JSON data (lists and dicts), or a UserFieldsError naming ``where`` it is not JSON."""
    if depth > MAX_DEPTH:
        raise UserFieldsError(f"field {where}: nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UserFieldsError(f"field {where}: {value} is not a finite number (JSON has none)")
        return value
    if isinstance(value, Mapping):
        plain: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise UserFieldsError(f"field {where}: keys must be strings, got {_described(key)}")
            plain[key] = _plain(item, f"{where}.{key}", depth + 1)
        return plain
    if isinstance(value, (list, tuple)):
        return [_plain(item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value)]
    raise UserFieldsError(
        f"field {where}: expected a JSON value (string, number, true/false, null, list or mapping), got {_described(value)}"
    )


def checked(source: str, returned: object) -> dict[str, Any]:
    """What one hook implementation returned (a mapping of field names to JSON values, or None for none) as plain
    JSON data; ``source`` names the implementation in a :class:`UserFieldsError`."""
    if returned is None:
        return {}
    if not isinstance(returned, Mapping):
        raise UserFieldsError(f"{source}: expected a mapping of field names to JSON values, got {_described(returned)}")
    fields: dict[str, Any] = {}
    for name, value in returned.items():
        if not isinstance(name, str) or not name:
            raise UserFieldsError(f"{source}: a field name must be a non-empty string, got {_described(name)}")
        try:
            fields[name] = _plain(value, repr(name), 1)
        except UserFieldsError as exc:
            raise UserFieldsError(f"{source}: {exc}") from None
    return fields


def joined(parts: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The user section of several implementations' fields ((source, fields) pairs, in call order), keys sorted; a
    field two implementations return, or a section over :data:`MAX_BYTES`, is a :class:`UserFieldsError`."""
    section: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for source, fields in parts:
        for name, value in fields.items():
            if name in owner:
                raise UserFieldsError(f"{source}: field {name!r} is returned by {owner[name]} too")
            owner[name] = source
            section[name] = value
        size = len(json.dumps(section, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > MAX_BYTES:
            raise UserFieldsError(
                f"{source}: the fields take {size} bytes as JSON, more than the {MAX_BYTES} a run keeps"
            )
    return dict(sorted(section.items()))


def carried(stored: Mapping[str, Any]) -> dict[str, Any]:
    """``{"user": ...}`` of a stored metrics.json or config.json to carry into a run written from it (empty when
    it has no user section, or one that is not an object)."""
    section = stored.get(USER_KEY)
    return {USER_KEY: section} if isinstance(section, dict) else {}
