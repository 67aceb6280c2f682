"""A judge's agreement with human pass/fail labels on a labelled set of answers.

A labelled set is JSON lines (blank lines and ``//`` comments skipped), one answer
each: ``id``, ``split`` (``dev``: used while tuning the judge, ``holdout``: written
afterwards and never tuned on), ``kind`` (``paraphrase``, ``wrong-number``, ``negation``...),
``label`` (``pass``/``fail``: what a careful human says of the answer),
``question``, ``contexts``, ``reference_answer``, ``key_facts`` and ``answer``.
The judge's verdict on an item is the verdict of a case with those fields under
the default thresholds and nothing configured (``thresholds.default_thresholds``):
abstention (``false_abstention <= 0``, scored by the registry from the abstention
classifier) and the default judge metrics that apply (groundedness and correctness).

Agreement treats "fail" as the positive class, since catching bad answers is a
gate's job: *precision* is the share of the judge's fails that humans fail too
(1 - precision: false alarms), *recall* the share of human fails the judge
catches. ``python bench/lexical_agreement.py`` prints the table.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.metrics import score_verdict_fed
from pytest_rageval.evaluation.registry import ScoreContext
from pytest_rageval.evaluation.schema import EvalCase, RagResponse
from pytest_rageval.evaluation.thresholds import ThresholdConfig, find_misses, resolve_thresholds

from .base import Judge, JudgeInput
from .labelled_lines import labelled_lines

__all__ = [
    "AgreementRow",
    "JudgedItem",
    "LabelledItem",
    "agreement_rows",
    "format_table",
    "judge_items",
    "load_labelled",
]

_FIELDS = ("id", "split", "kind", "label", "question", "contexts", "reference_answer", "key_facts", "answer")


@dataclass(frozen=True)
class LabelledItem:
    """One answer with the human label."""

    id: str
    split: str
    kind: str
    label: str
    question: str
    contexts: tuple[str, ...]
    reference_answer: str | None
    key_facts: tuple[str, ...]
    answer: str

    @property
    def human_pass(self) -> bool:
        return self.label == "pass"


def load_labelled(path: Path) -> list[LabelledItem]:
    """Read a labelled set; a bad line raises ValueError naming the file, the line and the field."""
    items: list[LabelledItem] = []
    for where, data in labelled_lines(path):
        missing = [f for f in _FIELDS if f not in data]
        if missing:
            raise ValueError(f"{where}: missing field '{missing[0]}'")
        if data["label"] not in ("pass", "fail"):
            raise ValueError(f"{where}: field 'label' must be 'pass' or 'fail', got {data['label']!r}")
        items.append(
            LabelledItem(
                id=str(data["id"]),
                split=str(data["split"]),
                kind=str(data["kind"]),
                label=data["label"],
                question=str(data["question"]),
                contexts=tuple(data["contexts"]),
                reference_answer=data["reference_answer"],
                key_facts=tuple(data["key_facts"]),
                answer=str(data["answer"]),
            )
        )
    return items


@dataclass(frozen=True)
class JudgedItem:
    """A labelled item with the judge's metrics and verdict under the default thresholds."""

    item: LabelledItem
    metrics: dict[str, Any]
    misses: tuple[str, ...]

    @property
    def judge_pass(self) -> bool:
        return not self.misses

    @property
    def agrees(self) -> bool:
        return self.judge_pass == self.item.human_pass


async def _judge_one(judge: Judge, item: LabelledItem) -> JudgedItem:
    case = EvalCase.model_validate(
        {
            "id": item.id,
            "question": item.question,
            "reference_answer": item.reference_answer,
            "expected_key_facts": list(item.key_facts),
        }
    )
    inp = JudgeInput(
        item.question, item.answer, item.contexts, reference_answer=item.reference_answer, key_facts=item.key_facts
    )
    abstained = bool((await judge.judge("abstention", inp)).label)
    ctx = ScoreContext(k=max(len(item.contexts), 1), abstained=abstained)
    metrics: dict[str, Any] = dict(score_verdict_fed(["abstention"], case, RagResponse(answer=item.answer), ctx))
    for metric in registry.default_judge_metrics():
        if registry.asks(metric, case, abstained):
            metrics[metric] = (await judge.judge(metric, inp)).score
    thresholds = resolve_thresholds(case, ThresholdConfig.empty(), judge=True)
    return JudgedItem(item, metrics, tuple(m.describe() for m in find_misses(metrics, thresholds)))


def judge_items(judge: Judge, items: Iterable[LabelledItem]) -> list[JudgedItem]:
    """Judge every item (in order) as a case with default thresholds would be."""

    async def run() -> list[JudgedItem]:
        return [await _judge_one(judge, item) for item in items]

    return asyncio.run(run())


@dataclass(frozen=True)
class AgreementRow:
    """Agreement of one group of items ("fail" is the positive class)."""

    group: str
    n: int
    human_fail: int
    judge_fail: int
    both_fail: int
    agree: int

    @property
    def agreement(self) -> float:
        return self.agree / self.n if self.n else 0.0

    @property
    def precision(self) -> float | None:
        """Of the judge's fails, the share humans fail too (None when the judge failed none)."""
        return self.both_fail / self.judge_fail if self.judge_fail else None

    @property
    def recall(self) -> float | None:
        """Of the human fails, the share the judge catches (None when humans failed none)."""
        return self.both_fail / self.human_fail if self.human_fail else None


def _row(group: str, judged: Sequence[JudgedItem]) -> AgreementRow:
    return AgreementRow(
        group=group,
        n=len(judged),
        human_fail=sum(not j.item.human_pass for j in judged),
        judge_fail=sum(not j.judge_pass for j in judged),
        both_fail=sum(not j.item.human_pass and not j.judge_pass for j in judged),
        agree=sum(j.agrees for j in judged),
    )


def agreement_rows(judged: Sequence[JudgedItem]) -> list[AgreementRow]:
    """One row per kind (sorted by name), one per split (``split dev``, ``split holdout``), then ``all``."""
    kinds = sorted({j.item.kind for j in judged})
    splits = sorted({j.item.split for j in judged})
    return (
        [_row(kind, [j for j in judged if j.item.kind == kind]) for kind in kinds]
        + [_row(f"split {split}", [j for j in judged if j.item.split == split]) for split in splits]
        + [_row("all", judged)]
    )


def format_table(rows: Sequence[AgreementRow]) -> str:
    """A plain-text table: kind, items, human fails, judge fails, agreement, precision, recall."""

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    header = f"{'kind':<16} {'items':>5} {'human fail':>10} {'judge fail':>10} {'agreement':>9} {'precision':>9} {'recall':>6}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.group:<16} {r.n:>5} {r.human_fail:>10} {r.judge_fail:>10} {pct(r.agreement):>9} {pct(r.precision):>9} {pct(r.recall):>6}"
        )
    return "\n".join(lines)
