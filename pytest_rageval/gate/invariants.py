"""Whether two runs may be compared at all: the same eval set, judge and target kind (the invariants), and the
settings that differ between them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .gated_values import cases_by_id

# --------------------------------------------------------------------------- invariants


def _short(value: Any, limit: int = 12) -> str:
    text = str(value)
    return text[:limit] + "…" if len(text) > limit else text


def _shown(value: Any, shorten: bool) -> str:
    if value is None:
        return "(missing)"
    return _short(value) if shorten else str(value)


def _judge_field(metrics_json: Mapping[str, Any], name: str) -> Any:
    judge = metrics_json.get("judge")
    return judge.get(name) if isinstance(judge, Mapping) else None


def _eval_set_difference(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """The differing eval-set identities, or None when the eval sets are comparable.

    With per-file digests on both sides (``eval_set_files``), only the files both
    runs ran must be identical: a run of fewer or other files is compared on
    the cases it shares with the baseline. Otherwise the whole ``eval_set_hash``
    must match.
    """
    old_files, new_files = baseline.get("eval_set_files"), current.get("eval_set_files")
    if isinstance(old_files, Mapping) and isinstance(new_files, Mapping) and old_files and new_files:
        changed = sorted(f for f in set(old_files) & set(new_files) if old_files[f] != new_files[f])
        if not changed:
            return None
        more = f" (+{len(changed) - 1} more changed files)" if len(changed) > 1 else ""
        return f"{changed[0]} {_short(old_files[changed[0]])}{more}", f"{changed[0]} {_short(new_files[changed[0]])}"

    def eval_hash(m: Mapping[str, Any]) -> Any:
        value = m.get("eval_set_hash")
        return value if value is not None else m.get("eval_set_commit_hash")  # the field's earlier name

    old, new = eval_hash(baseline), eval_hash(current)
    if old == new:
        return None
    return _shown(old, True), _shown(new, True)


def _defined(metrics_json: Mapping[str, Any]) -> bool:
    """Whether every case of a run carries its definition hash (runs made before it existed do not)."""
    cases = cases_by_id(metrics_json)
    return bool(cases) and all(isinstance(c.get("definition"), str) for c in cases.values())


def _target_kind(metrics_json: Mapping[str, Any]) -> str | None:
    """What served the cases (``fixture``, ``http``, ``callable``), as far as the run recorded it."""
    target = metrics_json.get("target")
    kind = target.get("kind") if isinstance(target, Mapping) else None
    return kind if isinstance(kind, str) else None


def check_invariants(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Messages naming each invariant that differs (k, judge model/prompt/temperature; the eval set only when a
    side has no per-case definitions: otherwise the gate compares the cases whose definition held).

    A value missing (or null) on both sides is no difference; on one side only it is.
    """
    messages: list[str] = []
    eval_set = None if _defined(baseline) and _defined(current) else _eval_set_difference(baseline, current)
    if eval_set is not None:
        messages.append(f"eval_set_hash differs: baseline {eval_set[0]} vs this run {eval_set[1]}")
    return messages + setting_differences(baseline, current)


def used_judge(metrics_json: Mapping[str, Any]) -> bool:
    """Whether a run scored with a judge (metrics.json ``judge.name`` other than ``none``)."""
    judge = metrics_json.get("judge")
    name = judge.get("name") if isinstance(judge, Mapping) else None
    return isinstance(name, str) and name != "none"


def setting_differences(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The invariants of how the runs were made that differ: target kind, k, and the judge's model, prompt version
    and temperature, these only when both runs used a judge (a retrieval-only run is compared with a judged
    baseline on the metrics both have)."""
    messages: list[str] = []
    old_kind, new_kind = _target_kind(baseline), _target_kind(current)
    if old_kind is not None and new_kind is not None and old_kind != new_kind:
        messages.append(f"target kind differs: baseline {old_kind} vs this run {new_kind}")
    old_k, new_k = baseline.get("k"), current.get("k")
    if old_k is not None and new_k is not None and old_k != new_k:
        messages.append(f"k differs: baseline {_shown(old_k, False)} vs this run {_shown(new_k, False)}")
    if not (used_judge(baseline) and used_judge(current)):
        return messages
    for name in ("model", "prompt_version", "temperature"):
        old, new = _judge_field(baseline, name), _judge_field(current, name)
        if old is None and new is None:
            continue
        if old == new:
            continue
        messages.append(f"judge {name} differs: baseline {_shown(old, False)} vs this run {_shown(new, False)}")
    return messages
