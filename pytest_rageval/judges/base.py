"""What every judge takes and gives.

A judge scores one metric of one case per call: ``await judge.judge(metric,
JudgeInput, repeat_index=0) -> Verdict``. The OpenAI-compatible judge, the
offline lexical judge and the caching wrapper are all subclasses of :class:`Judge`.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from pytest_rageval.errors import RagevalError
from pytest_rageval.evaluation import registry

#: Judge metrics with a numeric scale (low, high) as stored in metrics: the metric registry's judge entries
#: (only deterministic metrics are registered at run time, so this never changes after import).
SCALES: dict[str, tuple[float, float]] = registry.scales()
#: Judge classifications: ``Verdict.label`` carries the answer; each feeds a deterministic metric (registry).
CLASSIFIERS = registry.CLASSIFIERS
#: Every verdict a judge can be asked for, in the registry's order: the judge metrics, then the classifiers.
ALL_METRICS: tuple[str, ...] = tuple(registry.judge_specs())


@dataclass(frozen=True)
class JudgeInput:
    """Everything a judge may look at for one case. Contexts are the top-K chunk texts in rank order."""

    question: str
    answer: str
    contexts: tuple[str, ...] = ()
    context_ids: tuple[str | None, ...] = ()
    reference_answer: str | None = None
    key_facts: tuple[str, ...] = field(default_factory=tuple)

    def context_hash(self) -> str:
        """sha256 of the contexts (order matters)."""
        return hashlib.sha256(json.dumps(list(self.contexts), ensure_ascii=False).encode()).hexdigest()


class Verdict(BaseModel):
    """One judge answer, already parsed and on the metric's scale; every field is given by keyword.

    ``score`` is on the metric's scale (None for a classifier); ``label`` answers a classifier (``abstention``:
    the answer abstained; ``conflict_ack``: it acknowledges the conflict; a 0/1 metric: passing).
    """

    metric: str
    score: float | None = None  # on SCALES[metric]; None for classifiers
    label: bool | None = None  # abstention: abstained; conflict_ack: acknowledges; 0/1 metrics: passing
    reasoning: str = ""
    supported_claims: list[str] = Field(default_factory=list)
    unsupported_claims: list[str] = Field(default_factory=list)
    raw: str = ""  # the judge's raw answer text, kept for audits
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    attempts: int = 1


class JudgeError(RagevalError):
    """A judge call failed after retries and re-asks; that case becomes an error."""

    def __init__(
        self, metric: str, message: str, *, prompt_tokens: int = 0, completion_tokens: int = 0, cost_usd: float = 0.0
    ) -> None:
        super().__init__(f"{metric}: {message}")
        self.metric = metric
        self.message = message
        # What the failed call spent (a re-asked answer is paid for): counted like a verdict's.
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.cost_usd = cost_usd


class JudgeAuthError(JudgeError):
    """401/403 from the judge endpoint: the session stops with one clear message."""


class Judge(ABC):
    """The base of every judge: subclass it, give the constructor a ``name`` and write :meth:`judge`.

    A judge scores one metric of one case per call. The built-in judges (``openai``, ``lexical``) are
    subclasses; a judge of your own is handed over by the ``pytest_rageval_judges`` hook and chosen with
    ``--rageval-judge NAME`` (or ini ``rageval_judge``). ``heuristic`` says its verdicts come from word overlap
    or rules rather than a model (reports mark them so).
    """

    def __init__(self, *, name: str, heuristic: bool = False) -> None:
        self.name = name
        self.heuristic = heuristic

    def describe(self) -> dict[str, Any]:
        """What config.json and metrics.json record about the judge: name, model, base_url, prompt_versions,
        temperature, seed, json_mode, heuristic (those it has); never a key. By default the name and
        ``heuristic``."""
        return {"name": self.name, "model": None, "heuristic": self.heuristic}

    def supports(self, metric: str) -> bool:
        """Whether it scores ``metric`` (a judge metric such as ``groundedness``, or a classifier such as
        ``abstention``); by default every one."""
        return True

    @abstractmethod
    async def judge(self, metric: str, inp: JudgeInput, *, repeat_index: int = 0) -> Verdict:
        """The verdict on ``metric`` for one case: ``Verdict(metric=..., score=...)`` on the metric's scale for a
        judge metric, ``Verdict(metric=..., label=...)`` for a classifier. ``repeat_index`` counts the runs of a
        repeated case. Raise :class:`JudgeError` when no verdict can be given: that case becomes an error."""

    async def aclose(self) -> None:
        """Release what the judge holds (clients, connections) at the end of the session; by default nothing."""
        return None
