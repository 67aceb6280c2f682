"""The lines of a labelled set (``rageval calibrate``'s and the lexical judge's agreement sets): one JSON object a
line, ``//`` lines and blank lines skipped, read as strict, bounded JSON (no NaN, no lone surrogate, no key given
twice). Each problem is one ``error`` naming the file and the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_rageval import safejson


def labelled_lines(path: Path, error: type[Exception] = ValueError) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` of each line of ``path``, ``where`` being ``path:line``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read the labelled set: {exc}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        where = f"{path}:{number}"
        try:
            data, _ = safejson.loads(line, surrogates="refuse", duplicate_keys="refuse")
        except json.JSONDecodeError as exc:
            raise error(f"{where}: invalid JSON: {exc.msg}") from None
        except ValueError as exc:  # safejson's limits: depth, number length, NaN, a lone surrogate, a repeated key
            raise error(f"{where}: {exc}") from None
        if not isinstance(data, dict):
            raise error(f"{where}: a line must be a JSON object")
        yield where, data
