"""The judge canary (ini ``rageval_judge_canary = N``): N labelled answers re-judged in every judged run, without
the judge cache, so that a judge that changed behind the same model name shows.

The items are the first N of the calibration set by the SHA-256 of their ids (the same N in every run, a mix of
the set's kinds rather than its first lines). Each is judged on the run's judge metrics it is labelled for;
``agreement`` is the share of those verdicts that agree with the labels, with a 95% Wilson interval, and every
verdict is kept so that the next run can name the ones that changed (``flips``). Against a baseline that
re-judged the same canary with the same judge (kind, model, prompt version), the gate fails when the agreement
fell below the baseline's interval or when a verdict flipped.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import Judge, JudgeError, Verdict
from .calibration_measure import LabelledAnswer, passes

__all__ = ["CanaryResult", "canary_items", "compare_canary", "judge_canary", "wilson"]

#: z of a two-sided 95% interval.
_Z = 1.959963984540054


def canary_items(items: Sequence[LabelledAnswer], n: int) -> list[LabelledAnswer]:
    """The first ``n`` items by the SHA-256 of their ids."""
    return sorted(items, key=lambda item: hashlib.sha256(item.id.encode()).hexdigest())[: max(0, n)]


def wilson(agree: int, n: int) -> tuple[float, float] | None:
    """The 95% Wilson interval of ``agree`` successes in ``n`` (None for n = 0)."""
    if n <= 0:
        return None
    p = agree / n
    centre = (p + _Z * _Z / (2 * n)) / (1 + _Z * _Z / n)
    half = _Z * math.sqrt(p * (1 - p) / n + _Z * _Z / (4 * n * n)) / (1 + _Z * _Z / n)
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


@dataclass
class CanaryResult:
    """The canary's verdicts (``{id: {metric: passes}}``, None for a judge error) against the labels, and what
    judging them cost."""

    verdicts: dict[str, dict[str, bool | None]]
    labels: dict[str, dict[str, bool]]
    tokens: int = 0
    cost_usd: float = 0.0

    def as_dict(self, identity: Mapping[str, Any], set_name: str, set_hash: str) -> dict[str, Any]:
        """metrics.json's ``judge_canary`` (``flips_since_baseline`` is the gate's: None until compared)."""
        pairs = [
            (self.labels[i][m], got) for i, per in self.verdicts.items() for m, got in per.items() if got is not None
        ]
        agree = sum(label == got for label, got in pairs)
        interval = wilson(agree, len(pairs))
        errors = sum(got is None for per in self.verdicts.values() for got in per.values())
        return {
            "n": len(self.verdicts),
            "judged": len(pairs),
            "agreement": round(agree / len(pairs), 4) if pairs else None,
            "agreement_ci": list(interval) if interval else None,
            "errors": errors,
            "flips_since_baseline": None,
            "judge": dict(identity),
            "set": set_name,
            "set_hash": set_hash,
            "verdicts": {i: dict(sorted(per.items())) for i, per in sorted(self.verdicts.items())},
        }


async def judge_canary(
    judge: Judge, items: Sequence[LabelledAnswer], metrics: Sequence[str], *, concurrency: int = 8
) -> CanaryResult:
    """Judge each canary item on each of ``metrics`` it is labelled for (and the judge scores)."""
    gate = asyncio.Semaphore(max(1, concurrency))
    asked = [(item, metric) for item in items for metric in metrics if metric in item.labels and judge.supports(metric)]

    async def one(item: LabelledAnswer, metric: str) -> Verdict | JudgeError:
        async with gate:
            try:
                return await judge.judge(metric, item.judge_input())
            except JudgeError as exc:
                return exc

    results = await asyncio.gather(*(one(item, metric) for item, metric in asked))
    out = CanaryResult({item.id: {} for item in items}, {item.id: dict(item.labels) for item in items})
    for (item, metric), result in zip(asked, results, strict=True):
        out.verdicts[item.id][metric] = passes(metric, result) if isinstance(result, Verdict) else None
        out.tokens += result.prompt_tokens + result.completion_tokens
        out.cost_usd += result.cost_usd
    return out


def compare_canary(baseline: Mapping[str, Any] | None, current: dict[str, Any]) -> tuple[str | None, str | None]:
    """Set ``current["flips_since_baseline"]`` from the baseline's canary; (why the gate fails, a note), each
    None when there is nothing to say. A baseline without a canary, of another judge or another set is not
    compared (the note says why)."""
    if not isinstance(baseline, Mapping) or not isinstance(baseline.get("verdicts"), Mapping):
        return None, "judge canary: the baseline has none to compare with"
    old_judge, new_judge = baseline.get("judge") or {}, current.get("judge") or {}
    if old_judge != new_judge:
        return (
            None,
            f"judge canary: not compared, the baseline's judge was {_who(old_judge)}, this run's is {_who(new_judge)}",
        )
    if baseline.get("set_hash") != current.get("set_hash"):
        return None, "judge canary: not compared, the baseline re-judged another calibration set"
    old, new = baseline["verdicts"], current["verdicts"]
    flipped = sorted(
        f"{item} {metric}"
        for item, per in new.items()
        if isinstance(old.get(item), Mapping)
        for metric, got in per.items()
        if got is not None and isinstance(old[item].get(metric), bool) and old[item][metric] != got
    )
    current["flips_since_baseline"] = len(flipped)
    current["flipped"] = flipped
    problems = []
    if flipped:
        shown = ", ".join(flipped[:5]) + (f" and {len(flipped) - 5} more" if len(flipped) > 5 else "")
        problems.append(f"{len(flipped)} verdicts changed since the baseline ({shown})")
    low = (baseline.get("agreement_ci") or [None])[0]
    agreement = current.get("agreement")
    if isinstance(low, (int, float)) and isinstance(agreement, (int, float)) and agreement < low - 1e-9:
        problems.append(
            f"agreement with the labels fell to {agreement:.3f}, below the baseline's interval ({low:.3f} or more)"
        )
    if not problems:
        return (
            None,
            f"judge canary: {current.get('n')} items re-judged, agreement {_show(agreement)}, no verdict changed since the baseline",
        )
    reason = f"judge canary: the {_who(new_judge)} judges differently: " + "; ".join(problems)
    return reason, None


def _who(identity: Mapping[str, Any]) -> str:
    return f"{identity.get('kind')} judge {identity.get('model')} (prompt {identity.get('prompt_version')})"


def _show(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else "-"
