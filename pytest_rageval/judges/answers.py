"""The judge's answers: one pydantic model per answer shape, and the JSON Schema a request sends, made from it.

A model reads an answer leniently (other keys ignored; a missing reasoning or claim list is empty; a score off
the grid or a 0-100 score is left to the judge to normalise or re-ask) and describes, in its fields' JSON Schema
metadata, the bounded answer a request asks for: ``strict_schema(model)`` is that schema in the form a strict
``json_schema`` response format takes (every property required, no others, no titles or defaults; pydantic's
field order kept, so the model reasons before it scores). The bounds are there so that constrained decoding
always closes the object within ``max_tokens`` (a small model otherwise repeats a claim list until the token
limit cuts it off); a score is an enum because local grammars (llama.cpp) ignore minimum/maximum but keep to
an enum, so a small model cannot answer 20 on a 0-5 scale.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from pytest_rageval.evaluation import registry

__all__ = [
    "ANSWER_MODELS",
    "CLAIM_CHARS",
    "MAX_CLAIMS",
    "REASONING_CHARS",
    "RESPONSE_SCHEMAS",
    "AbstentionAnswer",
    "ConflictAnswer",
    "FivePointAnswer",
    "GroundednessAnswer",
    "PassingAnswer",
    "UnitScoreAnswer",
    "strict_schema",
]

REASONING_CHARS = 300
CLAIM_CHARS = 100
MAX_CLAIMS = 4


def _grid(high: float, step: float) -> dict[str, Any]:
    """``{"enum": [0, step, ..., high]}`` (whole numbers as integers)."""
    values = [round(i * step, 2) for i in range(round(high / step) + 1)]
    return {"enum": [int(v) if v == int(v) else v for v in values]}


def _not_bool(value: Any) -> Any:
    """Numbers only: ``true`` is not a score of 1."""
    if isinstance(value, bool):
        raise ValueError("expected a number, not a boolean")
    return value


def _score(high: float, step: float) -> Any:
    """A score field on 0..high in steps of ``step`` (the grid is asked for, not enforced when reading)."""
    return Field(allow_inf_nan=False, json_schema_extra=_grid(high, step))


Claim = Annotated[str, Field(description="one claim of the answer", json_schema_extra={"maxLength": CLAIM_CHARS})]


def _claims() -> Any:
    return Field(default_factory=list, json_schema_extra={"maxItems": MAX_CLAIMS})


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Reasoned(_Answer):
    reasoning: str = Field(
        "",
        description="one to three sentences explaining the verdict",
        json_schema_extra={"maxLength": REASONING_CHARS},
    )


class GroundednessAnswer(_Reasoned):
    supported_claims: list[Claim] = _claims()
    unsupported_claims: list[Claim] = _claims()
    score: float = _score(5, 0.5)

    _check_score = field_validator("score", mode="before")(_not_bool)


class FivePointAnswer(_Reasoned):
    score: float = _score(5, 0.5)

    _check_score = field_validator("score", mode="before")(_not_bool)


class UnitScoreAnswer(_Reasoned):
    score: float = _score(1, 0.1)

    _check_score = field_validator("score", mode="before")(_not_bool)


class PassingAnswer(_Reasoned):
    passing: bool


class AbstentionAnswer(_Answer):
    abstained: bool
    # asked for always, read as optional: an answer without a confidence still says whether it abstained
    confidence: Annotated[float | None, WithJsonSchema({"type": "number", **_grid(1, 0.1)})] = Field(
        default=None, allow_inf_nan=False
    )

    _check_confidence = field_validator("confidence", mode="before")(_not_bool)


class ConflictAnswer(_Reasoned):
    acknowledges_conflict: bool


#: The answer models by class name, as the registry's judge specs name them (``JudgeSpec.answer``).
_BY_NAME: dict[str, type[_Answer]] = {
    model.__name__: model
    for model in (GroundednessAnswer, FivePointAnswer, UnitScoreAnswer, PassingAnswer, AbstentionAnswer, ConflictAnswer)
}

#: Pydantic model that reads each verdict's parsed JSON answer, in the registry's verdict order.
ANSWER_MODELS: dict[str, type[BaseModel]] = {
    verdict: _BY_NAME[spec.answer] for verdict, spec in registry.judge_specs().items()
}

#: Keys pydantic writes that a strict response format does not take (or that say nothing to the model).
_DROPPED = frozenset({"title", "default"})
#: Keys in the order the schema is written (json.dumps of it is stated in prompts: same model, same text).
_ORDER = (
    "type",
    "properties",
    "required",
    "additionalProperties",
    "maxItems",
    "maxLength",
    "items",
    "enum",
    "description",
)


def _strict(node: dict[str, Any]) -> dict[str, Any]:
    """One schema node in strict form, its keys in ``_ORDER``; ValueError for what a flat answer has not."""
    if "$ref" in node or "$defs" in node or "anyOf" in node:
        raise ValueError(f"an answer schema must be flat, without $ref/$defs/anyOf: {node!r}")
    out = {key: value for key, value in node.items() if key not in _DROPPED}
    if "items" in out:
        out["items"] = _strict(out["items"])
    if out.get("type") == "object":
        out["properties"] = {name: _strict(value) for name, value in (out.get("properties") or {}).items()}
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    unknown = set(out) - set(_ORDER)
    if unknown:
        raise ValueError(f"an answer schema keyword without a place in the order: {sorted(unknown)}")
    return {key: out[key] for key in _ORDER if key in out}


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of ``model``'s answer for a strict ``json_schema`` response format."""
    return _strict(model.model_json_schema())


#: JSON Schema of each metric's answer, as requests send it.
RESPONSE_SCHEMAS: dict[str, dict[str, Any]] = {metric: strict_schema(model) for metric, model in ANSWER_MODELS.items()}
