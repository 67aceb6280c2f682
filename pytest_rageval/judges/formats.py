"""Which response format a judge request asks for, and what a server's refusal of one means.

A judge request tells the server the shape of the answer in one of these forms,
tried in this order from the configured ``rageval_judge_json_mode`` on:

====  =============================  ==================================================================
step  mode                           what the request carries
====  =============================  ==================================================================
1     json_schema                    ``response_format={"type": "json_schema", "json_schema": {"name":
                                     <metric>, "schema": <bounded schema>, "strict": true}}``
2     json_schema (unbounded)        the same without ``maxLength``/``maxItems``: only for a server that
                                     refuses those keywords by name (strict modes that take a subset)
3     json_object                    ``response_format={"type": "json_object", "schema": <schema>}``
                                     (llama.cpp's server and llama-cpp-python constrain decoding to it)
                                     plus ``extra_body`` ``format`` (Ollama) and ``guided_json`` (vLLM)
4     json_object (no schema forms)  ``response_format={"type": "json_object"}`` only: for a server that
                                     refuses the extra fields
5     text                           no response_format
====  =============================  ==================================================================

Wherever the server is not sure to receive the schema itself (steps 3 to 5: a
server may ignore the fields it does not know), the prompt states it. The
bounded schema has a largest possible answer, so ``max_tokens`` per metric is
sized to hold it (``max_answer_chars``): a token of ASCII text is at least one
character, so constrained decoding closes the object before the limit (non-ASCII
characters and ``\\uXXXX`` escapes may take more tokens than characters).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FORMATS",
    "Format",
    "first_step",
    "max_answer_chars",
    "next_step",
    "request_fields",
    "unbounded",
]


@dataclass(frozen=True)
class Format:
    """One rung of the ladder: the mode reported as ``json_mode_in_use`` and its variant."""

    mode: str  # json_schema | json_object | text
    bounded: bool = True  # the schema keeps its maxLength/maxItems keywords
    schema_forms: bool = True  # json_object: the schema also travels in response_format and extra_body

    @property
    def schema_in_prompt(self) -> bool:
        """Whether the prompt must state the schema (the server may not receive or honour it)."""
        return self.mode != "json_schema"

    def describe(self) -> str:
        if self.mode == "json_schema" and not self.bounded:
            return "json_schema without maxLength/maxItems"
        if self.mode == "json_object" and self.schema_forms:
            return "json_object with the schema (response_format.schema, format, guided_json)"
        if self.mode == "json_object":
            return "json_object without a schema"
        return self.mode


FORMATS: tuple[Format, ...] = (
    Format("json_schema"),
    Format("json_schema", bounded=False),
    Format("json_object"),
    Format("json_object", schema_forms=False),
    Format("text"),
)

_LLAMA_CPP_REJECTION = "'text' or 'json_object'"
_REJECT_STATUSES = frozenset({400, 422, 500})
_BOUND_KEYWORDS = ("maxlength", "maxitems", "minlength", "minitems")
_EXTRA_FIELDS = ("schema", "guided", "unrecognized", "extra", "additional propert")


def first_step(json_mode: str) -> int:
    """The ladder index a configured ``rageval_judge_json_mode`` starts at."""
    for index, fmt in enumerate(FORMATS):
        if fmt.mode == json_mode:
            return index
    raise ValueError(f"json_mode must be one of json_schema, json_object, text, not {json_mode!r}")


def next_step(step: int, status: int, text: str) -> int | None:
    """The ladder index to retry at when the server answered ``status``/``text`` to a request of ``step``;
    None when the answer is no refusal of the response format (an ordinary error, or the last rung)."""
    fmt = FORMATS[step]
    low = text.lower()
    if fmt.mode == "text" or status not in _REJECT_STATUSES:
        return None
    if fmt.mode == "json_schema":
        if _LLAMA_CPP_REJECTION in low:
            return FORMATS.index(Format("json_object"))
        if fmt.bounded and any(word in low for word in _BOUND_KEYWORDS):
            return step + 1  # keep json_schema, drop the keywords it named
        if "response_format" in low or "json_schema" in low:
            return FORMATS.index(Format("json_object"))
        return None
    if _LLAMA_CPP_REJECTION in low:  # llama.cpp takes json_object: this 500 is about something else
        return None
    if fmt.schema_forms:
        if "response_format" in low or "json_object" in low or any(word in low for word in _EXTRA_FIELDS):
            return step + 1  # maybe only the extra fields were refused: try without them first
        return None
    if "response_format" in low or "json_object" in low:
        return step + 1
    return None


def unbounded(schema: Any) -> Any:
    """A copy of ``schema`` without maxLength/maxItems/minLength/minItems (for strict subsets)."""
    if isinstance(schema, Mapping):
        return {k: unbounded(v) for k, v in schema.items() if k.lower() not in _BOUND_KEYWORDS}
    if isinstance(schema, list):
        return [unbounded(v) for v in schema]
    return schema


def request_fields(fmt: Format, metric: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` that carry the response format."""
    if fmt.mode == "json_schema":
        sent = schema if fmt.bounded else unbounded(schema)
        return {
            "response_format": {"type": "json_schema", "json_schema": {"name": metric, "schema": sent, "strict": True}}
        }
    if fmt.mode == "json_object" and fmt.schema_forms:
        return {
            "response_format": {"type": "json_object", "schema": schema},
            "extra_body": {"format": schema, "guided_json": schema},
        }
    if fmt.mode == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}


#: Characters of the longest JSON number a grammar lets through ("-", 16 digits, ".", 16 digits, "e+", 16 digits).
_NUMBER_CHARS = 52
_SPACE = 1  # one optional space after each ":" and "," (llama.cpp's grammars); compact JSON has fewer


def max_answer_chars(schema: Mapping[str, Any]) -> int:
    """Characters of the longest JSON text valid under ``schema`` (strings without escapes).

    Raises ValueError for a schema whose answers have no upper bound (a string without
    maxLength, an array without maxItems, an object open to other keys).
    """
    kind = schema.get("type")
    if "enum" in schema:
        return max(len(json.dumps(value)) for value in schema["enum"])
    if kind == "object":
        if schema.get("additionalProperties", True) is not False:
            raise ValueError("an object open to other keys has no longest form")
        props = schema.get("properties") or {}
        members = [len(name) + 2 + 1 + _SPACE + max_answer_chars(value) for name, value in props.items()]
        return 2 + sum(members) + max(0, len(members) - 1) * (1 + _SPACE)
    if kind == "array":
        if "maxItems" not in schema:
            raise ValueError("an array without maxItems has no longest form")
        items, item = int(schema["maxItems"]), max_answer_chars(schema["items"])
        return 2 + items * item + max(0, items - 1) * (1 + _SPACE)
    if kind == "string":
        if "maxLength" not in schema:
            raise ValueError("a string without maxLength has no longest form")
        return 2 + int(schema["maxLength"])
    if kind in ("number", "integer"):
        return _NUMBER_CHARS
    if kind == "boolean":
        return len("false")
    raise ValueError(f"no longest form for JSON Schema type {kind!r}")
