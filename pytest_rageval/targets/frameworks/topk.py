"""A framework object whose retrievers return ``k`` results, made without rebuilding any index.

The object is walked through its attributes (a few levels down); each retriever
found is shallow-copied with its k set, and every object on the way to it is
shallow-copied to hold the copy. The user's object is never changed, so calls
with other k (another config of the matrix) may run at the same time.
"""

from __future__ import annotations

import copy
import threading
import types
from collections.abc import Callable
from typing import Any

__all__ = ["TopKVariants"]

_DEPTH = 5  # attribute levels searched below the target
_LONGEST = 64  # longer lists and dicts are data, not parts of a pipeline: not searched
_LEAVES = (
    str,
    bytes,
    int,
    float,
    bool,
    type(None),
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    type,
)

SetK = Callable[[Any, int], Any | None]  # a copy of the retriever with k set, or None when it is not a retriever


class TopKVariants:
    """The variants of one object by k, each made once (thread-safe)."""

    def __init__(self, obj: Any, set_k: SetK) -> None:
        self.obj = obj
        self._set_k = set_k
        self._made: dict[int, tuple[Any, int]] = {}
        self._lock = threading.Lock()

    def get(self, k: int) -> tuple[Any, int]:
        """The object with its retrievers at ``k``, and how many retrievers were set (0: the object itself)."""
        with self._lock:
            if k not in self._made:
                self._made[k] = _rebuild(self.obj, k, self._set_k, _DEPTH, set())
            return self._made[k]


def _rebuild(value: Any, k: int, set_k: SetK, depth: int, seen: set[int]) -> tuple[Any, int]:
    if isinstance(value, _LEAVES) or id(value) in seen:
        return value, 0
    seen.add(id(value))
    made = set_k(value, k)
    if made is not None:
        return made, 1
    if depth == 0:
        return value, 0
    if isinstance(value, (list, tuple)) and len(value) <= _LONGEST:
        items = [_rebuild(item, k, set_k, depth - 1, seen) for item in value]
        count = sum(n for _, n in items)
        if not count:
            return value, 0
        rebuilt = [item for item, _ in items]
        return (rebuilt if isinstance(value, list) else _tuple_like(value, rebuilt)), count
    if isinstance(value, dict):
        if len(value) > _LONGEST:
            return value, 0
        entries = {key: _rebuild(item, k, set_k, depth - 1, seen) for key, item in value.items()}
        count = sum(n for _, n in entries.values())
        return ({key: item for key, (item, _) in entries.items()} if count else value), count
    attributes = getattr(value, "__dict__", None)
    if not isinstance(attributes, dict):
        return value, 0
    changes: dict[str, Any] = {}
    count = 0
    for name, item in list(attributes.items()):
        rebuilt_item, n = _rebuild(item, k, set_k, depth - 1, seen)
        if n:
            changes[name], count = rebuilt_item, count + n
    if not count:
        return value, 0
    try:
        clone = copy.copy(value)
        clone.__dict__.update(changes)
    except Exception:
        return value, 0
    return clone, count


def _tuple_like(value: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
