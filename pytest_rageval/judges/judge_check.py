"""Built-in calibration cases and the ``--rageval-judge-check`` test.

A judge that cannot tell a faithful answer from a hallucinated one over the
same context is no use as a gate. ``check_judge`` scores both answers of each
calibration case (the STIP example) on groundedness, and on correctness
when the judge scores it, and passes only when the faithful answer wins by at
least ``MIN_GAP`` points on the 0-5 scale every time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from .base import Judge, JudgeError, JudgeInput

__all__ = ["CALIBRATION_CASES", "CHECK_METRICS", "MIN_GAP", "CalibrationCase", "CheckResult", "check_judge"]

#: Points on the 0-5 scale by which the faithful answer must beat the hallucinated one.
MIN_GAP = 1.0
#: Metrics checked, in order; groundedness always, correctness when the judge scores it.
CHECK_METRICS = ("groundedness", "correctness")


@dataclass(frozen=True)
class CalibrationCase:
    """One question, its retrieved context, and a faithful and a hallucinated answer to it."""

    name: str
    question: str
    contexts: tuple[str, ...]
    faithful_answer: str
    hallucinated_answer: str
    reference_answer: str
    key_facts: tuple[str, ...] = ()

    def judge_input(self, answer: str) -> JudgeInput:
        """The judge's view of ``answer`` over this case's context, reference and key facts."""
        return JudgeInput(
            question=self.question,
            answer=answer,
            contexts=self.contexts,
            context_ids=tuple(f"stip-chunk-{i}" for i in range(1, len(self.contexts) + 1)),
            reference_answer=self.reference_answer,
            key_facts=self.key_facts,
        )


_STIP_TALLY = """\
# Arbitrum Short-Term Incentive Program (STIP)

Author: Arbitrum Foundation
Category: Incentives
Created: 2023-10-15

## Tally On-chain Vote
Status: executed
On-chain ID: 47832
Voting Start: 2023-11-01
Voting End: 2023-11-15
URL: https://www.tally.xyz/gov/arbitrum/proposal/47832
Options: For, Against, Abstain"""

_STIP_SNAPSHOT = """\
# Arbitrum Short-Term Incentive Program (STIP)

## Snapshot Temperature Check
Status: closed
Voting Start: 2023-10-20
Voting End: 2023-10-27
URL: https://snapshot.org/#/arbitrumfoundation.eth/proposal/0xabc123
Options: For, Against, Abstain"""

_STIP_FORUM = """\
The STIP program allocated 50 million ARB tokens to incentivize
protocol growth on Arbitrum. Delegates raised concerns about the
lack of accountability metrics and the short timeline for
distributing funds. Some argued the amount was too large given
market conditions.

Post by: dk3 (@dk3)
Posted: 2023-10-18"""

#: Seed 000's worked example: three retrieved STIP chunks, a faithful and a hallucinated answer.
CALIBRATION_CASES: tuple[CalibrationCase, ...] = (
    CalibrationCase(
        name="stip",
        question="What is the status of the STIP proposal and who proposed it?",
        contexts=(_STIP_TALLY, _STIP_SNAPSHOT, _STIP_FORUM),
        faithful_answer=(
            "The STIP (Short-Term Incentive Program) proposal was authored by the Arbitrum Foundation. "
            "It has been executed after passing both the Snapshot temperature check and the Tally on-chain "
            "vote. The program allocated 50 million ARB tokens for protocol incentives."
        ),
        hallucinated_answer=(
            "The STIP proposal was authored by Offchain Labs and requested 100 million ARB tokens. It was vetoed by the Security Council."
        ),
        reference_answer=(
            "The STIP proposal was authored by the Arbitrum Foundation and has been executed: it passed the "
            "Snapshot temperature check and the Tally on-chain vote. It allocated 50 million ARB tokens."
        ),
        key_facts=("authored by the Arbitrum Foundation", "executed", "50 million ARB tokens"),
    ),
)


@dataclass
class CheckResult:
    """Whether the judge told the answers apart, and what it scored (one line per comparison)."""

    passed: bool
    lines: list[str] = field(default_factory=list)


def _fmt(score: float | None) -> str:
    return "no score" if score is None else f"{score:.1f}"


async def _compare(judge: Judge, case: CalibrationCase, metric: str) -> tuple[bool, str]:
    """Score both answers on ``metric``; (passed, line). A JudgeError propagates."""
    good, bad = await asyncio.gather(
        judge.judge(metric, case.judge_input(case.faithful_answer)),
        judge.judge(metric, case.judge_input(case.hallucinated_answer)),
    )
    line = f"{case.name}: faithful {_fmt(good.score)} vs hallucinated {_fmt(bad.score)} on {metric}"
    if good.score is None or bad.score is None:
        return False, line + ": the judge gave no score"
    if good.score - bad.score >= MIN_GAP - 1e-9:
        return True, line + ": ok"
    return False, line + (
        f": cannot tell them apart (the faithful answer must score at least {MIN_GAP:g} point higher)"
    )


async def check_judge(judge: Judge, cases: tuple[CalibrationCase, ...] = CALIBRATION_CASES) -> CheckResult:
    """Judge the faithful and the hallucinated answer of each case; pass when the faithful one wins clearly.

    Groundedness is always checked, correctness too when ``judge.supports`` it.
    A JudgeError fails the check with its message in ``lines``.
    """
    if not judge.supports("groundedness"):
        return CheckResult(False, [f"the {judge.name} judge does not score groundedness; it cannot be checked"])
    metrics = [m for m in CHECK_METRICS if judge.supports(m)]
    passed = True
    lines: list[str] = []
    for case in cases:
        for metric in metrics:
            try:
                ok, line = await _compare(judge, case, metric)
            except JudgeError as exc:
                passed = False
                lines.append(f"{case.name}: judge error on {metric}: {exc}")
                continue
            passed = passed and ok
            lines.append(line)
    model = judge.describe().get("model")
    who = f"{judge.name} judge" + (f" ({model})" if model else "")
    if passed:
        lines.append(f"judge check passed: the {who} tells a faithful answer from a hallucinated one")
    else:
        lines.append(f"judge check failed: the {who} cannot reliably tell a faithful answer from a hallucinated one")
    return CheckResult(passed, lines)
