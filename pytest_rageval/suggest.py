"""Did-you-mean hints for configuration mistakes (pure, no pytest)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``name`` (compared case-insensitively), or None when none is close."""
    lower: dict[str, str] = {}
    for choice in choices:
        lower.setdefault(choice.lower(), choice)
    match = difflib.get_close_matches(name.lower(), list(lower), n=1)
    return lower[match[0]] if match else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` naming the closest choice, or "" when none is close."""
    match = closest(name, choices)
    return f" (did you mean {match!r}?)" if match else ""
