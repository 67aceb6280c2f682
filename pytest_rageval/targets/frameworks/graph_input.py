"""The input keys of a compiled LangGraph graph, read from the schema class its builder keeps.

LangChain's own ``get_input_jsonschema`` builds a pydantic model of the schema, which pydantic refuses for a
stdlib ``typing.TypedDict`` before Python 3.12; the class itself says which keys it has, whatever kind it is:
a ``TypedDict`` (stdlib or ``typing_extensions``), a pydantic model, a dataclass or any annotated class.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any

__all__ = ["graph_input_keys", "schema_keys"]

#: Where a compiled graph's builder keeps the input schema: ``input_schema`` (LangGraph 0.3 and later), ``input``
#: (0.2), then the state schema both name when no input schema was given.
_SCHEMA_ATTRIBUTES = ("input_schema", "input", "state_schema", "schema")


def schema_keys(schema: Any) -> list[str] | None:
    """The field names of a schema class in declaration order, or None when it is not a class with fields."""
    if not isinstance(schema, type):
        return None
    fields = getattr(schema, "model_fields", None)  # a pydantic model
    if isinstance(fields, Mapping) and fields:
        return [str(name) for name in fields]
    if dataclasses.is_dataclass(schema):
        return [field.name for field in dataclasses.fields(schema)] or None
    names: list[str] = []
    for cls in reversed(schema.__mro__):  # a TypedDict's or annotated class's keys, inherited ones first
        annotations = inspect.get_annotations(cls)
        names.extend(str(name) for name in annotations if name not in names and not str(name).startswith("_"))
    return names or None


def graph_input_keys(graph: Any) -> list[str] | None:
    """The keys of ``graph``'s input schema, or None when its builder keeps no schema class with fields."""
    builder = getattr(graph, "builder", None)
    for attribute in _SCHEMA_ATTRIBUTES:
        keys = schema_keys(getattr(builder, attribute, None))
        if keys:
            return keys
    return None
