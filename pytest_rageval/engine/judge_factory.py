"""Build the session's judge from the settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_rageval.judges.base import Judge, JudgeInput, Verdict
from pytest_rageval.judges.judging import Budget, JudgeSetup

if TYPE_CHECKING:
    from pytest_rageval.config.settings import Settings

    from .endpoint_limits import EndpointLimits

#: USD per 1M (prompt, completion) tokens; ``[tool.rageval.judge.prices]`` adds or overrides.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
}


def build_judge(
    settings: Settings, environ: Mapping[str, str], *, model: str | None = None, limits: EndpointLimits | None = None
) -> JudgeSetup | None:
    """The judge in use (None without one); ``model`` overrides the configured one (spot checks).

    ``limits``: the process's endpoint limiters; judges of one endpoint (the spot check's second model) take the
    same limiter from it, so both count against one limit and pause together on a 429.
    """
    if not settings.judge_enabled:
        return None
    if settings.judge == "lexical" and model is None:
        from pytest_rageval.judges.lexical import LexicalJudge

        return JudgeSetup(LexicalJudge(settings.citation_patterns), settings.judge_metrics, cached=False)
    if settings.judge != "openai" and model is None:  # a judge of the pytest_rageval_judges hook
        from pytest_rageval.judges.external_judges import make

        return JudgeSetup(make(settings.judge), settings.judge_metrics, cached=False)
    from pytest_rageval.judges.cache import CachedJudge, JudgeCache
    from pytest_rageval.judges.openai_judge import OpenAIJudge, resolve_api_key

    from .endpoint_limits import EndpointLimits

    inner = OpenAIJudge(
        model=model or settings.judge_model or "",
        base_url=settings.judge_base_url,
        api_key=resolve_api_key(environ),
        json_mode=settings.judge_json_mode,
        timeout=settings.timeout,
        max_response_bytes=settings.max_response_bytes,
        prices={**DEFAULT_PRICES, **settings.judge_prices},
        max_in_flight=settings.concurrency,
        limiter=(limits or EndpointLimits(settings)).judge(settings.judge_base_url),
    )
    cache = None if settings.no_cache else JudgeCache(settings.cache_dir)
    return JudgeSetup(
        CachedJudge(inner, cache),
        settings.judge_metrics,
        cached=cache is not None,
        budget=Budget(settings.max_judge_cost),
    )


def judge_info(judge: Judge | None) -> dict[str, Any]:
    """The judge fields of metrics.json (the baseline invariants read them)."""
    if judge is None:
        return {"name": "none", "model": None, "prompt_version": None, "temperature": None, "heuristic": False}
    desc = judge.describe()
    version = desc.get("prompt_version") or ",".join(sorted(set((desc.get("prompt_versions") or {}).values()))) or None
    return {
        "name": desc.get("name"),
        "model": desc.get("model"),
        "prompt_version": version,
        "temperature": desc.get("temperature"),
        "heuristic": bool(desc.get("heuristic")),
    }


class SessionJudge:
    """Synchronous face of the session's judge, for hand-written tests (the ``rageval_judge`` fixture)."""

    def __init__(self, setup: JudgeSetup, run: Any) -> None:
        self.setup = setup
        self._run = run

    def judge(
        self,
        metric: str,
        *,
        question: str,
        answer: str,
        contexts: tuple[str, ...] = (),
        reference_answer: str | None = None,
        key_facts: tuple[str, ...] = (),
    ) -> Verdict:
        """Score one metric of one answer."""
        inp = JudgeInput(
            question, answer, tuple(contexts), reference_answer=reference_answer, key_facts=tuple(key_facts)
        )
        verdict: Verdict = self._run(self.setup.judge.judge(metric, inp))
        return verdict
