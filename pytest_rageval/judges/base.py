"""What every judge takes and gives.

A judge scores one metric of one case per call: ``await judge.judge(metric,
JudgeInput, repeat_index=0) -> Verdict``. The OpenAI-compatible judge, the
offline lexical judge and the caching wrapper all follow this protocol.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

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
    """One judge answer, already parsed and on the metric's scale."""

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

    def __init__(self, metric: str, message: str, *, prompt_tokens: int = 0, completion_tokens: int = 0, cost_usd: float = 0.0) -> None:
        super().__init__(f"{metric}: {message}")
        self.metric = metric
        self.message = message
        # What the failed call spent (a re-asked answer is paid for): counted like a verdict's.
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.cost_usd = cost_usd


class JudgeAuthError(JudgeError):
    """401/403 from the judge endpoint: the session stops with one clear message."""


class Judge(Protocol):
    @property
    def name(self) -> str:
        """``openai`` or ``lexical``."""
        ...

    @property
    def heuristic(self) -> bool:
        """Whether its verdicts come from word overlap rather than a model."""
        ...

    def describe(self) -> dict[str, Any]:
        """name, model, base_url, prompt_versions, temperature, seed, json_mode, heuristic; never a key."""
        ...

    def supports(self, metric: str) -> bool: ...

    async def judge(self, metric: str, inp: JudgeInput, *, repeat_index: int = 0) -> Verdict: ...

    async def aclose(self) -> None: ...
