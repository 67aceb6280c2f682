"""LangChain runnables and retrievers, and compiled LangGraph graphs, as targets.

The sync ``invoke`` runs in the worker pool: LangChain's default ``ainvoke``
runs sync code in the event loop's executor, whose threads Python waits for at
exit, so a hung call would keep pytest alive past its timeout.

Input: the question as a string when the runnable takes one, else a dict with
the question under the first of ``question``/``input``/``query`` its input schema
names (a graph whose state has ``messages`` only gets ``{"messages": [a human
message]}``); a conversation turn's history goes to its ``chat_history`` or
``messages`` input (:mod:`.history`). A graph's input keys are read from the schema class of its builder
(:mod:`.graph_input`: a stdlib or ``typing_extensions`` ``TypedDict``, a pydantic
model, a dataclass); a graph with input keys none of which is one of those is
refused when the target is loaded. Output: ``answer`` (or the last message's content, or the output
itself when it is text) and ``context``/``documents`` (a list of Documents).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..protocol import RagConfigError
from .common import Adapter, chunk, first_nodes, shape_error
from .detect import has_base
from .graph_input import graph_input_keys
from .history import (
    CHAT_HISTORY_KEYS,
    Turns,
    cannot_take_history,
    langchain_input,
    langchain_messages,
    step_history_key,
    step_keys,
    turns_of,
)
from .topk import TopKVariants

__all__ = ["recognise"]

_ROOTS = ("langchain_core", "langchain", "langchain_community", "langchain_classic", "langgraph")
_QUESTION_KEYS = ("question", "input", "query")
_ANSWER_KEYS = ("answer", "output", "result", "response")
_CONTEXT_KEYS = ("context", "documents", "source_documents", "docs")
_UNREAD = object()  # the history key of a runnable's steps, before it is looked for


def _set_k(value: Any, k: int) -> Any | None:
    if not has_base(value, _ROOTS, "BaseRetriever"):
        return None
    fields = getattr(type(value), "model_fields", {})
    if "k" in fields:
        return value.model_copy(update={"k": k})
    if "search_kwargs" in fields:
        return value.model_copy(update={"search_kwargs": {**(value.search_kwargs or {}), "k": k}})
    return None


def _input_keys(obj: Any) -> list[str] | None:
    """The property names of the input schema, or None when it takes a plain value (or says nothing)."""
    try:
        schema = obj.get_input_jsonschema()
    except Exception:
        try:
            schema = obj.get_input_schema().model_json_schema()
        except Exception:
            return None
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return list(properties) if isinstance(properties, Mapping) and properties else None


def _no_question_key(keys: list[str]) -> str:
    return f"its input has no question, input, query or messages key (it has {', '.join(keys)})"


class _LangChain(Adapter):
    def __init__(self, framework: str, kind: str, obj: Any) -> None:
        super().__init__(framework, kind, obj)
        self._variants = TopKVariants(obj, _set_k)
        self._steps_key: object = _UNREAD
        self._keys = None if kind == "retriever" else (kind == "graph" and graph_input_keys(obj)) or _input_keys(obj)
        if kind == "runnable" and self._keys == ["root"]:  # a passthrough's schema: the keys its steps read
            self._keys = step_keys(obj, _input_keys, (*_QUESTION_KEYS, "messages")) or self._keys
        if kind == "graph" and self._keys and not any(name in self._keys for name in (*_QUESTION_KEYS, "messages")):
            raise RagConfigError(f"{self.label}: {_no_question_key(self._keys)}")

    def _history_key(self) -> str | None:
        """Where a turn's history goes: the input's own ``chat_history``/``messages`` key, else (a runnable) that
        of one of its steps, read once."""
        if self._steps_key is _UNREAD:
            own = next((name for name in CHAT_HISTORY_KEYS if name in (self._keys or [])), None)
            self._steps_key = own or (step_history_key(self.obj, _input_keys) if self.kind == "runnable" else None)
        return self._steps_key if isinstance(self._steps_key, str) else None

    def _input(self, question: str, turns: Turns) -> Any:
        if self.kind == "retriever" and turns:
            raise cannot_take_history(
                self.label, "a query string alone", "name a chain with a chat_history input as the target"
            )
        if self._keys is None:
            return langchain_input(self.label, None, None, None, question, turns) if turns else question
        key = next((name for name in _QUESTION_KEYS if name in self._keys), None)
        if key is None and "messages" not in self._keys:
            raise shape_error(self.framework, self.kind, _no_question_key(self._keys))
        if turns:
            return langchain_input(self.label, self._keys, key, self._history_key(), question, turns)
        return {key: question} if key is not None else {"messages": langchain_messages([("user", question)])}

    def call(self, question: str, top_k: int | None, params: Mapping[str, Any]) -> dict[str, Any]:
        target = self.obj
        if top_k is not None:
            target, count = self._variants.get(top_k)
            if not count:
                raise shape_error(
                    self.framework,
                    self.kind,
                    f"top_k={top_k} reaches no retriever with a k or search_kwargs among its steps (use rageval_params_hook)",
                )
        return self.read(target.invoke(self._input(question, turns_of(params))))

    def read(self, result: Any) -> dict[str, Any]:
        if self.kind == "retriever":
            return {"answer": "", "debug": {"retrieved_chunks": self._chunks(result, "its result")}}
        if isinstance(result, str):
            return {"answer": result}
        if not isinstance(result, Mapping):
            content = getattr(result, "content", None)
            if isinstance(content, str):
                return {"answer": content}
            raise shape_error(
                self.framework,
                self.kind,
                f"returned {type(result).__name__}; expected a dict with answer and context, or text",
            )
        answer = next((result[key] for key in _ANSWER_KEYS if key in result), None)
        if answer is None and isinstance(result.get("messages"), list) and result["messages"]:
            answer = getattr(result["messages"][-1], "content", None)
            if answer is None and isinstance(result["messages"][-1], Mapping):
                answer = result["messages"][-1].get("content")
        if answer is None:
            raise shape_error(
                self.framework,
                self.kind,
                f"its output has no answer or messages (it has {', '.join(map(str, result)) or 'no keys'})",
            )
        answer = getattr(answer, "content", answer)
        context_key = next((key for key in _CONTEXT_KEYS if key in result), None)
        chunks = self._chunks(result[context_key], f"its {context_key!r}") if context_key else []
        return {"answer": str(answer), "debug": {"retrieved_chunks": chunks}}

    def _chunks(self, documents: Any, where: str) -> list[dict[str, Any]]:
        if not isinstance(documents, (list, tuple)):
            raise shape_error(
                self.framework, self.kind, f"{where} is a {type(documents).__name__}, not a list of Documents"
            )
        out = []
        for rank, document in enumerate(first_nodes(documents, "retrieved documents"), start=1):
            if not hasattr(document, "page_content"):
                raise shape_error(
                    self.framework, self.kind, f"{where}[{rank - 1}] is a {type(document).__name__}, not a Document"
                )
            metadata = getattr(document, "metadata", None) or {}
            score = next((metadata[key] for key in ("score", "relevance_score") if key in metadata), None)
            doc_id = getattr(document, "id", None) or metadata.get("doc_id") or metadata.get("id")
            out.append(chunk(text=document.page_content, score=score, metadata=metadata, rank=rank, doc_id=doc_id))
        return out


def recognise(obj: Any) -> Adapter | None:
    """The adapter of a LangChain or LangGraph object, or None when ``obj`` is none."""
    if has_base(obj, _ROOTS, "Pregel", "CompiledGraph", "CompiledStateGraph"):
        return _LangChain("LangGraph", "graph", obj)
    if has_base(obj, _ROOTS, "BaseRetriever"):
        return _LangChain("LangChain", "retriever", obj)
    if has_base(obj, _ROOTS, "Runnable"):
        return _LangChain("LangChain", "runnable", obj)
    return None
