"""Whether a JSON fragment a page shows is part of a JSON file a run wrote: a block marked ``<!-- subset: PATH -->``.

A page shows a part of a file: some of its keys (``"repeats": {...}``, without the braces around it), objects with
keys left out, lists cut at their end, numbers rounded. The fragment is read as JSON after two steps: members
without their braces get them, and a bare ``...`` (``{...}``, ``, ...}``) is dropped. It matches the file when every
key it shows is in the file with a matching value: a string ``"..."`` matches any value, an object matches when its
keys do (the file may have more), a list when its items match the file's first items, and a number when the file's
value rounded to the decimals shown is that number (``0.333`` for 1/3); anything else must be equal.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

ANY = "..."


def read_fragment(text: str) -> Any:
    """The fragment as JSON (see the module's docstring); ValueError says why it is none."""
    text = re.sub(r"\{\s*\.\.\.\s*\}", "{}", text.strip())
    text = re.sub(r",\s*\.\.\.(?=\s*[}\]])", "", text)
    if not text.startswith(("{", "[")):
        text = "{" + text + "}"
    return json.loads(text, parse_float=Decimal, parse_int=Decimal)


def _text(value: Any) -> str:
    return json.dumps(value, default=str)


def differences(shown: Any, actual: Any, path: str = "") -> list[str]:
    """Where ``actual`` does not hold ``shown``, each as ``path: why``."""
    where = path or "the top"
    if shown == ANY:
        return []
    if isinstance(shown, dict):
        if not isinstance(actual, dict):
            return [f"{where}: an object is shown, the file has {_text(actual)}"]
        found: list[str] = []
        for key, value in shown.items():
            if key not in actual:
                found.append(f"{path}.{key}: not in the file" if path else f"{key}: not in the file")
            else:
                found += differences(value, actual[key], f"{path}.{key}" if path else key)
        return found
    if isinstance(shown, list):
        if not isinstance(actual, list) or len(actual) < len(shown):
            return [f"{where}: a list of {len(shown)} items is shown, the file has {_text(actual)}"]
        return [
            problem
            for index, item in enumerate(shown)
            for problem in differences(item, actual[index], f"{path}[{index}]")
        ]
    if isinstance(shown, Decimal) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        exponent = shown.as_tuple().exponent
        places = -exponent if isinstance(exponent, int) and exponent < 0 else 0
        if Decimal(repr(actual)).quantize(Decimal(1).scaleb(-places)) == shown.quantize(Decimal(1).scaleb(-places)):
            return []
        return [f"{where}: {shown} is shown, the file has {actual!r}"]
    if shown != actual or type(shown) is not type(actual):
        return [f"{where}: {_text(shown)} is shown, the file has {_text(actual)}"]
    return []
