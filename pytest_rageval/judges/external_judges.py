"""Judges from outside the package: what the ``pytest_rageval_judges`` hook hands over, checked, and kept by name
for the session that chose one with ``--rageval-judge NAME`` (or ini ``rageval_judge``).

A hook implementation returns a mapping of judge names to factories: a :class:`~.base.Judge` subclass, or any
callable taking no argument that returns a Judge. The plugin checks every returned value (:func:`checked`), then
keeps the session's judges with :func:`use`, which replaces what an earlier session in the same process kept. A
process that judges calls the chosen factory once (:func:`make`). Every mistake is one :class:`JudgePluginError`
line naming the conftest.py or plugin that made it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pytest_rageval import defaults
from pytest_rageval.errors import ConfigError
from pytest_rageval.sanitize import error_message

from .base import Judge

__all__ = ["JudgeFactory", "JudgePluginError", "PluginJudge", "checked", "make", "names", "use"]

#: What a judge name is made of: what an option value and an ini line can carry unquoted.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

#: A factory: a Judge subclass, or any callable taking no argument that returns a Judge.
JudgeFactory = Callable[[], Judge]


class JudgePluginError(ConfigError):
    """A judge from a conftest.py or plugin cannot be used; the message is one line naming where it came from."""


@dataclass(frozen=True)
class PluginJudge:
    """A judge handed over by a hook implementation: its name, where it came from, how to make it."""

    name: str
    source: str
    factory: JudgeFactory


#: The judges of the running session, by name (:func:`use` replaces them all).
_IN_USE: dict[str, PluginJudge] = {}


def _described(value: object) -> str:
    shown = repr(value)
    return f"{shown[:60]}... ({type(value).__name__})" if len(shown) > 60 else f"{shown} ({type(value).__name__})"


def checked(source: str, returned: object) -> tuple[PluginJudge, ...]:
    """What one hook implementation returned (a mapping of names to factories, or None), checked; ``source`` names
    the implementation in a :class:`JudgePluginError`."""
    if returned is None:
        return ()
    if not isinstance(returned, Mapping):
        raise JudgePluginError(
            f"{source}: expected a mapping of judge names to Judge classes or factories, got {_described(returned)}"
        )
    found = []
    for name, factory in returned.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise JudgePluginError(
                f"{source}: a judge name is letters, digits, '_', '.' and '-' (at most 64), got {_described(name)}"
            )
        if name in defaults.JUDGE_CHOICES:
            raise JudgePluginError(f"{source}: the judge name {name!r} is the built-in judge of that name")
        if not callable(factory):
            raise JudgePluginError(
                f"{source}: judge {name!r}: expected a Judge class or a callable returning a Judge, got {_described(factory)}"
            )
        found.append(PluginJudge(name, source, factory))
    return tuple(found)


def use(judges: Iterable[PluginJudge]) -> None:
    """Keep ``judges`` as the session's (two with one name are a :class:`JudgePluginError` naming both sources)."""
    kept: dict[str, PluginJudge] = {}
    for judge in judges:
        if judge.name in kept:
            raise JudgePluginError(
                f"{judge.source}: the judge name {judge.name!r} is taken by {kept[judge.name].source}"
            )
        kept[judge.name] = judge
    _IN_USE.clear()
    _IN_USE.update(kept)


def names() -> tuple[str, ...]:
    """The names of the session's judges from hooks, sorted."""
    return tuple(sorted(_IN_USE))


def make(name: str) -> Judge:
    """A new judge of the session's factory ``name`` (a :class:`JudgePluginError` when there is none, when the
    factory raises, or when it makes anything but a Judge of that name)."""
    judge = _IN_USE.get(name)
    if judge is None:
        raise JudgePluginError(
            f"no judge named {name!r}: the judges of the pytest_rageval_judges hook are {', '.join(names()) or 'none'}"
        )
    label = f"{judge.source}: judge {name!r}"
    try:
        made = judge.factory()
    except Exception as exc:  # the user's factory failed: one line naming it
        raise JudgePluginError(f"{label}: making it raised {error_message(exc)}") from None
    if not isinstance(made, Judge):
        raise JudgePluginError(f"{label}: expected a pytest_rageval.Judge, got {_described(made)}")
    if made.name != name:
        raise JudgePluginError(
            f"{label}: the judge it made is named {made.name!r}; give the name it is registered under"
        )
    return made
