"""The judge's answer schemas are made from the pydantic models that read the answers (judges/answers.py): what a
request sends is that schema, it is a valid strict JSON Schema, it takes a good answer and refuses a bad one."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import sys
from typing import Any

import jsonschema
import pytest
from openai_server import DEFAULT_VERDICTS, OpenAIServer, metric_named

from pytest_rageval.judges.answers import (
    ANSWER_MODELS,
    CLAIM_CHARS,
    MAX_CLAIMS,
    REASONING_CHARS,
    strict_schema,
)
from pytest_rageval.judges.base import ALL_METRICS, JudgeInput
from pytest_rageval.judges.openai_judge import OpenAIJudge
from pytest_rageval.judges.prompts import PROMPT_VERSIONS

#: Each metric's schema text under its prompt version. The version is part of the judge cache key (the schema
#: text is not), so a schema that changes under the same version would let old cached verdicts answer a new
#: question: change the schema, bump PROMPT_VERSIONS, then this table.
PINNED = {
    "groundedness/v2": "960e011293c2bc8f",
    "correctness/v2": "1cd1e374021375ec",
    "faithfulness/v2": "3e7feb046e0ce872",
    "relevancy/v2": "3e7feb046e0ce872",
    "completeness/v2": "0f2909a9d1f96065",
    "reasoning_quality/v2": "0f2909a9d1f96065",
    "abstention/v2": "30027208fa32703c",
    "conflict_ack/v2": "cc07309010c25ca2",
}

INPUT = JudgeInput(question="q", answer="a", contexts=("c",), reference_answer="a", key_facts=("a",))


def validator(metric: str) -> Any:
    schema = strict_schema(ANSWER_MODELS[metric])
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def sent_formats(json_mode: str) -> dict[str, dict[str, Any]]:
    """The response_format of each metric's request, as a loopback OpenAI server received it."""
    with OpenAIServer() as server:
        judge = OpenAIJudge(model="m", base_url=server.base_url, api_key="k", json_mode=json_mode)

        async def judge_all() -> None:
            try:
                await asyncio.gather(*(judge.judge(metric, INPUT) for metric in ALL_METRICS))
            finally:
                await judge.aclose()

        asyncio.run(judge_all())
        return {metric_named(r["body"]): r["body"] for r in server.requests}


def test_the_schema_sent_is_the_one_made_from_the_model() -> None:
    for metric, body in sent_formats("json_schema").items():
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": metric, "schema": strict_schema(ANSWER_MODELS[metric]), "strict": True},
        }
    for metric, body in sent_formats("json_object").items():
        schema = strict_schema(ANSWER_MODELS[metric])
        assert body["response_format"] == {"type": "json_object", "schema": schema}
        assert body["format"] == body["guided_json"] == schema
        assert json.dumps(schema, separators=(",", ":")) in body["messages"][0]["content"]


def test_strict_form_every_property_required_nothing_else_in_field_order() -> None:
    for model in ANSWER_MODELS.values():
        schema = strict_schema(model)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert schema["required"] == list(schema["properties"]) == list(model.model_fields)
        assert "title" not in json.dumps(schema) and "default" not in json.dumps(schema)
    assert list(strict_schema(ANSWER_MODELS["groundedness"])["properties"])[-1] == "score"  # reasons first


@pytest.mark.parametrize("metric", ALL_METRICS)
def test_a_good_answer_validates_and_the_model_reads_it(metric: str) -> None:
    good = DEFAULT_VERDICTS[metric]
    validator(metric).validate(good)
    assert ANSWER_MODELS[metric].model_validate(good).model_dump() == good


def test_bad_answers_are_refused() -> None:
    bad: dict[str, list[Any]] = {
        "correctness": [
            {"reasoning": "ok"},  # no score
            {"reasoning": "ok", "score": 4.2},  # off the half-point grid
            {"reasoning": "ok", "score": 20},
            {"reasoning": "ok", "score": 4, "extra": 1},
            {"reasoning": "x" * (REASONING_CHARS + 1), "score": 4},
        ],
        "groundedness": [
            {"reasoning": "ok", "supported_claims": ["c"] * (MAX_CLAIMS + 1), "unsupported_claims": [], "score": 4},
            {"reasoning": "ok", "supported_claims": ["c" * (CLAIM_CHARS + 1)], "unsupported_claims": [], "score": 4},
        ],
        "completeness": [{"reasoning": "ok", "score": 0.85}, {"reasoning": "ok", "score": True}],
        "faithfulness": [{"reasoning": "ok", "passing": "yes"}],
        "abstention": [{"abstained": False}, {"abstained": False, "confidence": 1.5}],
    }
    for metric, answers in bad.items():
        check = validator(metric)
        for answer in answers:
            assert not check.is_valid(answer), (metric, answer)


def test_a_schema_change_bumps_the_prompt_version() -> None:
    texts = {
        PROMPT_VERSIONS[m]: json.dumps(strict_schema(ANSWER_MODELS[m]), separators=(",", ":")) for m in ALL_METRICS
    }
    assert {version: hashlib.sha256(text.encode()).hexdigest()[:16] for version, text in texts.items()} == PINNED


@pytest.mark.parametrize(
    ("metric", "model", "fields", "label"),
    [
        ("abstention", "AbstentionAnswer", {"abstained": True, "confidence": 0.9}, True),
        ("conflict_rule", "ConflictAnswer", {"reasoning": "both", "acknowledges_conflict": True}, True),
    ],
)
def test_a_verdict_keeps_its_label_when_the_answer_class_comes_from_another_import(
    metric: str, model: str, fields: dict[str, object], label: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest's in-process runs import the package afresh: an answer built by another import of the answer models
    must still give its label (told by class, it was read as a score and its label dropped)."""
    from pytest_rageval.judges import answers, openai_judge

    spec = importlib.util.spec_from_file_location("answers_imported_again", answers.__file__)
    assert spec is not None and spec.loader is not None
    again = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, again)  # pydantic resolves the models' annotations through it
    spec.loader.exec_module(again)
    answer = getattr(again, model).model_validate(fields)
    assert type(answer) is not getattr(answers, model)
    verdict = openai_judge._verdict(metric, answer, json.dumps(fields))
    assert verdict.label is label
