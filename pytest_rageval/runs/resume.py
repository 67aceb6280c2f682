"""What a resumed run must share with the run it completes (pure: no pytest, no I/O).

A run folder's config.json holds the configuration snapshot (``Settings.snapshot``)
and the selection (eval-set paths, ``-k``, ``-m``, ``--deselect``, shard) of the
session that made it; a resume with anything else would mix the records of two
configurations into one run, so it is refused with the differences named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

__all__ = ["differences", "selection_of"]

#: Fields of the configuration snapshot kept only when set (Settings.snapshot), so runs without them keep their hash.
OPTIONAL_FIELDS = ("limits", "repeat", "matrix", "docs_root")

#: How each selection field is named in a message.
_SELECTION_NAMES = {
    "paths": "eval-set paths",
    "keyword": "-k",
    "markexpr": "-m",
    "deselect": "--deselect",
    "shard": "--rageval-shard",
}


def selection_of(
    *,
    args: Sequence[str],
    invocation_dir: Path,
    rootdir: Path,
    keyword: str,
    markexpr: str,
    deselect: Sequence[str],
    shard: str | None,
) -> dict[str, Any]:
    """The session's selection as config.json keeps it: paths relative to rootdir, sorted."""

    def relative(arg: str) -> str:
        path, sep, rest = arg.partition("::")
        full = Path(path) if PurePath(path).is_absolute() else invocation_dir / path
        try:
            name = full.resolve().relative_to(rootdir.resolve()).as_posix()
        except ValueError:
            name = full.resolve().as_posix()
        return name + sep + rest

    return {
        "paths": sorted({relative(a) for a in args}),
        "keyword": keyword or "",
        "markexpr": markexpr or "",
        "deselect": sorted({relative(a) for a in deselect}),
        "shard": shard,
    }


def differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``name: <the run's value> in the run, <this session's> now`` for each field that differs.

    ``recorded`` is the run's config.json (or the per-case ``config`` of its
    first record when config.json is missing: then only those fields count),
    ``current`` the same for this session. Fields the run did not record are
    not compared (a run folder written by an older version).
    """
    out: list[str] = []
    old_config, new_config = recorded.get("config"), current.get("config")
    if isinstance(old_config, Mapping) and isinstance(new_config, Mapping):
        for name in new_config:
            if name in old_config and old_config[name] != new_config[name]:
                out.append(f"{name}: {_show(old_config[name])} in the run, {_show(new_config[name])} now")
    hash_differs = recorded.get("config_hash") not in (None, current.get("config_hash"))
    if not out and hash_differs and isinstance(old_config, Mapping) and isinstance(new_config, Mapping):
        # a field the snapshot keeps only when set (--rageval-repeat, a matrix) is on one side only
        for name in [n for n in OPTIONAL_FIELDS if (n in old_config) != (n in new_config)]:
            out.append(f"{name}: {_show(old_config.get(name))} in the run, {_show(new_config.get(name))} now")
    if not out and hash_differs:
        out.append(f"config_hash: {recorded['config_hash']} in the run, {current.get('config_hash')} now")
    old_sel, new_sel = recorded.get("selection"), current.get("selection")
    if isinstance(old_sel, Mapping) and isinstance(new_sel, Mapping):
        for name, label in _SELECTION_NAMES.items():
            if name in old_sel and old_sel[name] != new_sel.get(name):
                out.append(f"{label}: {_show(old_sel[name])} in the run, {_show(new_sel.get(name))} now")
    return out


def _show(value: Any) -> str:
    if value in ("", None, [], {}):
        return "none"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return " ".join(value)
    return repr(value) if isinstance(value, str) else str(value)
