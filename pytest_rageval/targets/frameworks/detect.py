"""Which framework an object belongs to, read from its class hierarchy: nothing is imported.

A class is named by its module and name; the frameworks move classes between
modules across releases, so a class matches on its name and the first part of
its module (``llama_index``, ``langchain_core``...), wherever below that it lives.
"""

from __future__ import annotations

from typing import Any

__all__ = ["has_base"]


def has_base(obj: Any, roots: tuple[str, ...], *names: str) -> bool:
    """Whether a class of ``obj``'s hierarchy is called one of ``names`` and lives in a module under one of ``roots``."""
    for cls in type(obj).__mro__:
        module = getattr(cls, "__module__", "") or ""
        if cls.__name__ in names and module.split(".")[0] in roots:
            return True
    return False
