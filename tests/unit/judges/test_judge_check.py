"""judges/judge_check.py: the --rageval-judge-check cases, with the lexical judge and a loopback OpenAI server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from openai_server import OpenAIServer, Responder, content, metric_of, ok, user_text, verdicts

from pytest_rageval.judges.base import Judge
from pytest_rageval.judges.judge_check import CALIBRATION_CASES, CheckResult, check_judge
from pytest_rageval.judges.lexical import LexicalJudge
from pytest_rageval.judges.openai_judge import OpenAIJudge

STIP = CALIBRATION_CASES[0]


def openai_judge(srv: OpenAIServer, **kwargs: Any) -> OpenAIJudge:
    kwargs.setdefault("backoff", 0.001)
    return OpenAIJudge(model="judge-model", base_url=srv.base_url, api_key="sk-test", **kwargs)


def check(judge: Judge) -> CheckResult:
    async def main() -> CheckResult:
        try:
            return await check_judge(judge)
        finally:
            await judge.aclose()

    return asyncio.run(main())


def by_answer(faithful: float, hallucinated: float) -> Responder:
    """Score the hallucinated answer (it names Offchain Labs) and the faithful one differently, any metric."""

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Any:
        metric = metric_of(body)
        score = hallucinated if "Offchain Labs" in user_text(body) else faithful
        answer: dict[str, Any] = {"reasoning": "checked against the context", "score": score}
        if metric == "groundedness":
            answer.update(supported_claims=[], unsupported_claims=[])
        return ok(json.dumps(answer))

    return respond


def test_calibration_case_is_seed_000_stip_example() -> None:
    assert len(STIP.contexts) == 3
    assert "Author: Arbitrum Foundation" in STIP.contexts[0]
    assert "Snapshot Temperature Check" in STIP.contexts[1]
    assert "50 million ARB tokens" in STIP.contexts[2]
    assert "authored by the Arbitrum Foundation" in STIP.faithful_answer
    assert STIP.hallucinated_answer.startswith(
        "The STIP proposal was authored by Offchain Labs and requested 100 million"
    )
    assert "vetoed by the Security Council" in STIP.hallucinated_answer
    assert STIP.reference_answer and STIP.key_facts
    inp = STIP.judge_input(STIP.faithful_answer)
    assert inp.contexts == STIP.contexts and inp.key_facts == STIP.key_facts


def test_lexical_judge_passes() -> None:
    result = check(LexicalJudge())
    assert result.passed, result.lines
    assert any(line.startswith("stip: faithful 5.0 vs hallucinated 0.0 on groundedness") for line in result.lines)
    assert any("on correctness: ok" in line for line in result.lines)
    assert "judge check passed" in result.lines[-1]


def test_openai_judge_scoring_both_answers_alike_fails() -> None:
    with OpenAIServer(
        verdicts({"groundedness": {"reasoning": "fine", "supported_claims": [], "unsupported_claims": [], "score": 4}})
    ) as srv:
        result = check(openai_judge(srv))
        assert sorted(srv.metrics()) == ["correctness", "correctness", "groundedness", "groundedness"]
    assert not result.passed
    line = next(line for line in result.lines if "on groundedness" in line)
    assert line.startswith("stip: faithful 4.0 vs hallucinated 4.0 on groundedness: cannot tell them apart")
    assert "judge check failed" in result.lines[-1] and "judge-model" in result.lines[-1]


def test_openai_judge_telling_answers_apart_passes() -> None:
    with OpenAIServer(by_answer(5, 1)) as srv:
        result = check(openai_judge(srv))
        texts = [user_text(b) for b in srv.bodies()]
    assert result.passed, result.lines
    assert "stip: faithful 5.0 vs hallucinated 1.0 on groundedness: ok" in result.lines
    assert "stip: faithful 5.0 vs hallucinated 1.0 on correctness: ok" in result.lines
    # the judge saw the three STIP chunks and both answers
    assert sum("Offchain Labs" in t for t in texts) == 2
    assert all("On-chain ID: 47832" in t and "dk3" in t for t in texts)


def test_gap_below_one_point_fails_even_on_one_metric() -> None:
    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Any:
        if metric_of(body) == "correctness":
            return by_answer(4, 3.5)(body, headers)
        return by_answer(5, 0)(body, headers)

    with OpenAIServer(respond) as srv:
        result = check(openai_judge(srv))
    assert not result.passed
    assert "stip: faithful 5.0 vs hallucinated 0.0 on groundedness: ok" in result.lines
    assert any(
        line.startswith("stip: faithful 4.0 vs hallucinated 3.5 on correctness: cannot tell") for line in result.lines
    )


def test_judge_error_fails_with_the_error() -> None:
    with OpenAIServer(content("I think it is fine.")) as srv:
        result = check(openai_judge(srv, max_reasks=0))
    assert not result.passed
    errors = [line for line in result.lines if "judge error" in line]
    assert errors and "not valid JSON" in errors[0]
