"""Stored judge calibrations (``calibration.json``, written by ``rageval calibrate``) and the run's check of
``rageval_min_judge_agreement`` against them.

A calibration counts for a run when it measured the same judge (name, model, base URL without credentials, prompt
version) and was earned: written by ``rageval calibrate`` with the time it was made, its labelled set unchanged
since (the set's hash checked), and for every judge metric the run gates the confusion counts of at least
``MIN_ITEMS`` labelled answers of both classes (judge errors counted as disagreements). Every figure is recomputed
from those counts on read; the numbers written beside them play no part. It is sufficient when the low end of the
recomputed balanced accuracy's 95% interval reaches the minimum on every such metric. The newest sufficient one
(by the time it records, never its folder's name) is the one a run names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_rageval.atomic import write_bytes_atomic
from pytest_rageval.errors import RagevalError

__all__ = [
    "CALIBRATION_DIR",
    "FILE",
    "MIN_ITEMS",
    "CalibrationRefused",
    "judge_identity",
    "required_calibration",
    "write_calibration",
]

#: Below the output folder (``results``): one folder per calibration.
CALIBRATION_DIR = "calibration"
FILE = "calibration.json"
#: labelled answers (judge errors included) a metric's calibration needs before it can satisfy a floor
MIN_ITEMS = 30
#: the most a metric's calibration may count (the interval's bootstrap, recomputed on read, grows with it)
MAX_ITEMS = 20_000
COUNTS = ("n", "tp", "fp", "tn", "fn", "errors")


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
    *,
    created: datetime | None = None,
) -> Path:
    """``folder/calibration.json``, written whole or not at all (with an ``invariance`` section when measured);
    ``created``: when it was made (now), the time that orders calibrations."""
    data: dict[str, Any] = {
        "created": (created or datetime.now(timezone.utc)).isoformat(),
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
    """Every readable calibration.json below ``root/calibration``, in name order (unreadable ones are skipped)."""
    found = []
    for path in sorted((root / CALIBRATION_DIR).glob(f"*/{FILE}")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("judge"), dict) and isinstance(data.get("metrics"), dict):
            found.append((path, data))
    return found


def created_at(data: Mapping[str, Any]) -> datetime | None:
    """When the calibration was made (its ``created``: an ISO time with a zone); None without one."""
    value = data.get("created")
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def newest_first(stored: Sequence[tuple[Path, dict[str, Any]]]) -> list[tuple[Path, dict[str, Any]]]:
    """``stored`` by the time each records, newest first (the path breaks ties); one recording none comes last."""
    timed = sorted(
        ((when, path, data) for path, data in stored if (when := created_at(data)) is not None),
        key=lambda t: (t[0], str(t[1])),
        reverse=True,
    )
    return [(path, data) for _, path, data in timed] + [(p, d) for p, d in stored if created_at(d) is None]


@dataclass(frozen=True)
class Recounted:
    """One metric's figures recomputed from its stored counts."""

    n: int
    errors: int
    balanced_accuracy: float
    low: float  # the low end of the balanced accuracy's 95% interval


def recount(figures: Any) -> Recounted | str:
    """A metric's stored figures recomputed from their counts; why they cannot count otherwise (one phrase)."""
    from .calibration_measure import agreement_intervals, pairs_of

    if not isinstance(figures, dict):
        return "not measured"
    counts: dict[str, int] = {}
    for name in COUNTS:
        value = figures.get(name)
        if type(value) is not int or not 0 <= value <= MAX_ITEMS:
            return f"no count '{name}' (a whole number from 0 to {MAX_ITEMS:,}): not written by rageval calibrate"
        counts[name] = value
    n, tp, fp, tn, fn = (counts[k] for k in ("n", "tp", "fp", "tn", "fn"))
    if n != tp + fp + tn + fn or counts["errors"] > fp + fn:
        return "its counts do not add up (n = tp + fp + tn + fn, judge errors among fp + fn)"
    if not tp + fn or not tn + fp:
        return f"{n} labelled answers all of one class: answers that should pass and answers that should fail are both needed"
    if n < MIN_ITEMS:
        return f"{n} labelled answers, fewer than the {MIN_ITEMS} a calibration needs"
    interval = agreement_intervals(pairs_of(tp, fp, tn, fn))["balanced_accuracy_ci"]
    assert interval is not None  # both classes present
    point = (tp / (tp + fn) + tn / (tn + fp)) / 2
    return Recounted(n=n, errors=counts["errors"], balanced_accuracy=point, low=interval[0])


def set_problem(data: Mapping[str, Any], rootdir: Path) -> str | None:
    """Why the labelled set a calibration measured no longer stands behind it (changed, gone); None when it does."""
    from .calibration_measure import SHIPPED_SET, set_hash

    name, recorded = data.get("set"), data.get("set_hash")
    if not isinstance(name, str) or not isinstance(recorded, str) or not name:
        return "it names no labelled set and hash: not written by rageval calibrate"
    path = SHIPPED_SET if name == "shipped" else rootdir / name
    try:
        now = set_hash(path)
    except OSError as exc:
        return (
            f"its labelled set {name} cannot be read ({exc.strerror or exc}): the labels it measured cannot be checked"
        )
    if now != recorded:
        return f"its labelled set {name} has changed since (hash {recorded[:16]!r}, now {now!r}): calibrate again"
    return None


def required_calibration(
    output_dir: Path, identity: Mapping[str, Any], metrics: Sequence[str], minimum: float, rootdir: Path
) -> dict[str, Any]:
    """The newest earned calibration of this judge (module docstring) whose recomputed balanced accuracy's low end
    reaches ``minimum`` on every one of ``metrics``, as metrics.json names it; CalibrationRefused saying what is
    missing in the newest one otherwise."""
    same = newest_first(
        [
            (path, data)
            for path, data in _stored(output_dir)
            if all(data["judge"].get(key) == identity.get(key) for key in identity)
        ]
    )
    judge = f"{identity.get('kind')} judge {identity.get('model')} (prompt {identity.get('prompt_version')})"
    where = output_dir / CALIBRATION_DIR
    if not same:
        raise CalibrationRefused(
            f"rageval_min_judge_agreement = {minimum:g}: no calibration of the {judge} in {where}; "
            "run `rageval calibrate` with this configuration first"
        )
    refusals = []
    for path, data in same:
        refusal = _refusal(data, metrics, minimum, rootdir)
        if isinstance(refusal, str):
            refusals.append((path, refusal))
            continue
        try:
            shown = path.parent.relative_to(rootdir).as_posix()
        except ValueError:
            shown = str(path.parent)
        return {
            "calibration": shown,
            "set_hash": data.get("set_hash"),
            "balanced_accuracy": {m: round(r.balanced_accuracy, 4) for m, r in refusal.items()},
            "balanced_accuracy_low": {m: r.low for m, r in refusal.items()},
            "minimum": minimum,
        }
    path, why = refusals[0]
    raise CalibrationRefused(
        f"rageval_min_judge_agreement = {minimum:g}: the newest calibration of the {judge}, {path}, {why}"
    )


def _refusal(
    data: Mapping[str, Any], metrics: Sequence[str], minimum: float, rootdir: Path
) -> dict[str, Recounted] | str:
    """Each metric's recounted figures when the calibration satisfies ``minimum``; else why not (the end of a
    sentence naming the calibration)."""
    if created_at(data) is None:
        return "records no time it was made (an ISO time with a zone, 'created'): not written by rageval calibrate"
    problem = set_problem(data, rootdir)
    if problem is not None:
        return f"cannot count: {problem}"
    recounted = {m: recount(data["metrics"].get(m)) for m in metrics}
    unearned = [f"{m}: {r}" for m, r in recounted.items() if isinstance(r, str)]
    if unearned:
        return "cannot count: " + "; ".join(unearned)
    earned = {m: r for m, r in recounted.items() if isinstance(r, Recounted)}
    low = [
        f"{m} {r.balanced_accuracy:.3f}, 95% interval low end {r.low:.3f}"
        + (f", {r.errors} judge errors counted as disagreements" if r.errors else "")
        for m, r in earned.items()
        if r.low < minimum - 1e-9
    ]
    if low:
        return (
            "measured less agreement with its labels than that, counting the labelled set's size (balanced accuracy "
            + "; ".join(low)
            + "); label more answers, use a stronger judge or lower the minimum"
        )
    return earned
