"""Stored judge calibrations (``calibration.json``, written by ``rageval calibrate``) and the run's check of
``rageval_min_judge_agreement`` against them.

A calibration counts for a run when it measured the same judge: name, model, base URL (without credentials)
and prompt version. It is sufficient when its balanced accuracy reaches the minimum on every judge metric
the run gates. The newest sufficient one (by its folder name, a sortable id) is the one a run names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_rageval.atomic import write_bytes_atomic
from pytest_rageval.errors import RagevalError

__all__ = [
    "CALIBRATION_DIR",
    "FILE",
    "CalibrationRefused",
    "judge_identity",
    "required_calibration",
    "write_calibration",
]

#: Below the output folder (``results``): one folder per calibration.
CALIBRATION_DIR = "calibration"
FILE = "calibration.json"


class CalibrationRefused(RagevalError):
    """No stored calibration of the configured judge reaches ``rageval_min_judge_agreement``: why, in one line."""


def judge_identity(describe: Mapping[str, Any], info: Mapping[str, Any]) -> dict[str, Any]:
    """What makes two judges the same judge: ``{kind, model, base_url, prompt_version}`` from a judge's
    ``describe()`` (base URL already without credentials) and ``engine.judge_factory.judge_info``."""
    return {
        "kind": info.get("name"),
        "model": info.get("model"),
        "base_url": describe.get("base_url"),
        "prompt_version": info.get("prompt_version"),
    }


def write_calibration(
    folder: Path,
    identity: Mapping[str, Any],
    set_name: str,
    set_hash: str,
    figures: Mapping[str, Mapping[str, Any]],
    invariance: Mapping[str, Any] | None = None,
) -> Path:
    """``folder/calibration.json``, written whole or not at all (with an ``invariance`` section when measured)."""
    data: dict[str, Any] = {
        "judge": dict(identity),
        "set": set_name,
        "set_hash": set_hash,
        "metrics": {m: dict(f) for m, f in figures.items()},
    }
    if invariance is not None:
        data["invariance"] = dict(invariance)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE
    write_bytes_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return path


def _stored(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every readable calibration.json below ``root/calibration``, newest first (unreadable ones are skipped)."""
    found = []
    for path in sorted((root / CALIBRATION_DIR).glob(f"*/{FILE}"), reverse=True):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("judge"), dict) and isinstance(data.get("metrics"), dict):
            found.append((path, data))
    return found


def _raw_balanced(data: Mapping[str, Any], metric: str) -> Any:
    figures = data["metrics"].get(metric)
    return figures.get("balanced_accuracy") if isinstance(figures, dict) else None


def _balanced(data: Mapping[str, Any], metric: str) -> float | None:
    """The metric's balanced accuracy; None when it has none, or one that is none (NaN, Infinity, 7)."""
    value = _raw_balanced(data, metric)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:  # NaN fails too
        return None
    return float(value)


def _low_end(data: Mapping[str, Any], metric: str) -> float | None:
    """The low end of a metric's balanced-accuracy interval (None: not measured, or a calibration made before
    intervals were stored: it cannot satisfy a floor)."""
    figures = data["metrics"].get(metric)
    value = figures.get("balanced_accuracy_ci") if isinstance(figures, dict) else None
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        return None
    if not 0.0 <= value[0] <= 1.0:  # NaN, Infinity, 7: no interval of a balanced accuracy
        return None
    return float(value[0])


def required_calibration(
    output_dir: Path, identity: Mapping[str, Any], metrics: Sequence[str], minimum: float, rootdir: Path
) -> dict[str, Any]:
    """The newest stored calibration of this judge whose balanced accuracy reaches ``minimum`` on every one of
    ``metrics``, as metrics.json names it; CalibrationRefused saying what is missing otherwise."""
    same = [
        (path, data)
        for path, data in _stored(output_dir)
        if all(data["judge"].get(key) == identity.get(key) for key in identity)
    ]
    for path, data in same:
        scores = {metric: _balanced(data, metric) for metric in metrics}
        lows = {metric: _low_end(data, metric) for metric in metrics}
        if all(low is not None and low >= minimum - 1e-9 for low in lows.values()):
            try:
                shown = path.parent.relative_to(rootdir).as_posix()
            except ValueError:
                shown = str(path.parent)
            return {
                "calibration": shown,
                "set_hash": data.get("set_hash"),
                "balanced_accuracy": scores,
                "balanced_accuracy_low": lows,
                "minimum": minimum,
            }
    judge = f"{identity.get('kind')} judge {identity.get('model')} (prompt {identity.get('prompt_version')})"
    where = output_dir / CALIBRATION_DIR
    if not same:
        raise CalibrationRefused(
            f"rageval_min_judge_agreement = {minimum:g}: no calibration of the {judge} in {where}; "
            "run `rageval calibrate` with this configuration first"
        )
    path, data = same[0]
    low = ", ".join(
        f"{m} {_show(data, m)}, 95% interval low end {_show_low(_low_end(data, m))}"
        for m in metrics
        if (_low_end(data, m) or 0.0) < minimum - 1e-9
    )
    raise CalibrationRefused(
        f"rageval_min_judge_agreement = {minimum:g}: the {judge} agrees less with its labels than that, "
        f"counting the labelled set's size (balanced accuracy {low} in {path}); label more answers, use a stronger "
        "judge or lower the minimum"
    )


def _show_low(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.3f}"


def _show(data: Mapping[str, Any], metric: str) -> str:
    value, raw = _balanced(data, metric), _raw_balanced(data, metric)
    if value is not None:
        return f"{value:.3f}"
    return "not measured" if raw is None else f"{str(raw)[:40]} (not a balanced accuracy from 0 to 1)"
