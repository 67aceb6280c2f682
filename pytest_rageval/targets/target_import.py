"""A target named ``package.module:attr.path`` (ini ``rageval_target``): the spec checked and the object imported,
with the project's folders tried on ``sys.path``."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Sequence
from typing import Any

from pytest_rageval.redact import scrub_urls
from pytest_rageval.suggest import did_you_mean

from .protocol import RagConfigError

# --------------------------------------------------------------------------- targets


def _import_module(module_name: str, spec: str, folders: Sequence[str], setting: str = "rageval_target") -> Any:
    """The target's module; RagConfigError saying whether it is missing or failed while importing."""
    try:
        return _import_from(module_name, folders)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            raise RagConfigError(f"{setting} {spec!r}: cannot import module {module_name!r} ({exc})") from exc
        raise RagConfigError(
            f"{setting} {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        message = " ".join(str(exc).split())
        raise RagConfigError(
            f"{setting} {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {message}"
        ) from exc


def _import_from(module_name: str, folders: Sequence[str]) -> Any:
    """Import as is, else with each of ``folders`` first on sys.path (plain ``pytest`` puts neither cwd nor rootdir there)."""
    top = module_name.split(".")[0]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != top:
            raise
        not_found = exc
    for folder in dict.fromkeys(folders):
        if folder in sys.path:
            continue
        sys.path.insert(0, folder)
        try:
            return importlib.import_module(module_name)  # found here: the folder stays on sys.path
        except ModuleNotFoundError as exc:
            sys.path.remove(folder)
            if exc.name != top:
                raise
        except BaseException:
            sys.path.remove(folder)
            raise
    raise not_found


_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def check_target(spec: str) -> str:
    """``spec`` stripped if it is an http(s):// URL or 'package.module:callable'; RagConfigError otherwise."""
    spec = (spec or "").strip()
    if spec.lower().startswith(("http://", "https://")):
        return spec
    module_name, colon, attr_path = spec.partition(":")
    if "://" in spec or not colon or not _DOTTED.match(module_name) or not _DOTTED.match(attr_path):
        raise RagConfigError(
            f"rageval_target {scrub_urls(spec)!r}: expected an http(s):// URL or 'package.module:callable'"
        )
    return spec


def resolve(spec: str, folders: Sequence[str], setting: str = "rageval_target") -> Any:
    """The object ``package.module:attr.path`` names; RagConfigError naming what is missing."""
    module_name, colon, attr_path = spec.partition(":")
    if not colon or not _DOTTED.match(module_name) or not _DOTTED.match(attr_path):
        raise RagConfigError(f"{setting} {spec!r}: expected 'package.module:name'")
    module = _import_module(module_name, spec, folders, setting)
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            names = [n for n in dir(target) if not n.startswith("_")]
            raise RagConfigError(
                f"{setting} {spec!r}: module {module_name!r} has no attribute {attr_path!r}{did_you_mean(part, names)}"
            )
        target = getattr(target, part)
    return target
