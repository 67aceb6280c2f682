"""A conversation's history in each framework's own form: the input side of a turn after the first.

A turn is asked with ``params["history"]``, the earlier turns in order: ``[{"role": "user" | "assistant",
"content": text}, ...]``. Each framework object gets it where it takes a conversation:

- a LlamaIndex chat engine: ``chat(question, chat_history=[ChatMessage, ...])``, on a copy of the engine with a
  memory of its own (a chat engine's memory would otherwise carry one case's turns into the next);
- a LlamaIndex workflow: ``run(..., chat_history=[ChatMessage, ...])``, as an agent workflow takes it;
- a LangChain runnable or LangGraph graph: its ``chat_history`` input, or its ``messages`` input (the history's
  HumanMessage/AIMessage list, then the question's HumanMessage unless the question has a key of its own);
- a Haystack pipeline: every open input taking a list of ``ChatMessage`` (a ``chat_history`` or ``messages``
  socket of a component), else a ``ChatPromptBuilder``'s ``template`` with the history after its system messages.

An object with no place for the history (a query engine, a retriever, a runnable taking text) is not asked
with the history dropped: the turn errs, naming the form the object takes. Without history every object is
called as for a single question.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..protocol import RagCallError
from .detect import has_base

__all__ = [
    "CHAT_HISTORY_KEYS",
    "Turns",
    "cannot_take_history",
    "haystack_history",
    "langchain_input",
    "langchain_messages",
    "llamaindex_chat",
    "llamaindex_chat_engine",
    "llamaindex_messages",
    "llamaindex_refusal",
    "step_history_key",
    "step_keys",
    "turns_of",
]

#: The input keys of a LangChain runnable or LangGraph graph that take the history, in the order tried.
CHAT_HISTORY_KEYS = ("chat_history", "messages")
#: The open Haystack inputs that take the history when their type says nothing (a ChatPromptBuilder's variables).
_HAYSTACK_HISTORY_INPUTS = ("chat_history", "history")

ROLES = ("user", "assistant")

Turns = list[tuple[str, str]]  # (role, content) in order


def turns_of(params: Mapping[str, Any]) -> Turns:
    """The history sent with a turn as ``(role, content)`` pairs; empty when none was sent."""
    history = params.get("history")
    if history is None:
        return []
    if not isinstance(history, list):
        raise RagCallError("target", f"params history is a {type(history).__name__}, not a list of {{role, content}}")
    turns: Turns = []
    for index, message in enumerate(history):
        role = message.get("role") if isinstance(message, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if role not in ROLES or not isinstance(content, str):
            raise RagCallError(
                "target", f"params history[{index}] is not a {{role: user|assistant, content: text}} message"
            )
        turns.append((role, content))
    return turns


def cannot_take_history(label: str, takes: str, instead: str) -> RagCallError:
    """The error of a turn with history asked of an object that has no place for it, naming what it takes."""
    return RagCallError(
        "target", f"{label} cannot take a conversation's history: it takes {takes}; to test conversations, {instead}"
    )


# --------------------------------------------------------------------------- LlamaIndex


def llamaindex_messages(turns: Turns) -> list[Any]:
    """The history as LlamaIndex ``ChatMessage``s (llama_index is loaded: the target's class comes from it)."""
    from llama_index.core.llms import ChatMessage, MessageRole

    roles = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}
    return [ChatMessage(role=roles[role], content=content) for role, content in turns]


def _own_memory(memory: Any) -> Any | None:
    """A memory holding nothing yet and shared with no other call, in place of a chat engine's ``memory``: a copy of
    a ``ChatMemoryBuffer`` (its token limit and tokenizer) with a store of its own; for any other LlamaIndex memory
    (``Memory`` keeps its messages in an SQL store bound to one event loop, which the worker threads cannot share) a
    ``ChatMemoryBuffer`` of the same token limit. None when ``memory`` is no LlamaIndex memory."""
    if not has_base(memory, ("llama_index",), "BaseMemory"):
        return None
    store = getattr(memory, "chat_store", None)
    if store is not None and "chat_store" in getattr(type(memory), "model_fields", {}):
        try:
            return memory.model_copy(update={"chat_store": type(store)()})
        except Exception:  # a store that cannot be made empty (a database's): a buffer below
            pass
    from llama_index.core.memory import ChatMemoryBuffer

    limit = getattr(memory, "token_limit", None)
    return ChatMemoryBuffer.from_defaults(token_limit=limit if isinstance(limit, int) else None)


def llamaindex_chat_engine(engine: Any, messages: Sequence[Any]) -> Any:
    """A shallow copy of ``engine`` whose memory holds ``messages`` and nothing of any other call (the engine itself
    when its memory is of a kind not known here)."""
    memory = getattr(engine, "_memory", None)
    own = _own_memory(memory) if memory is not None else None
    if own is None:
        return engine
    import copy

    own.set(list(messages))
    clone = copy.copy(engine)
    clone._memory = own
    return clone


def llamaindex_chat(engine: Any, question: str, turns: Turns) -> Any:
    """``engine.chat(question, chat_history=...)`` with the history as ChatMessages, on a copy of the engine whose
    memory holds that history only."""
    messages = llamaindex_messages(turns)
    return llamaindex_chat_engine(engine, messages).chat(question, chat_history=messages)


def llamaindex_refusal(label: str, kind: str) -> RagCallError:
    """The error of a turn with history asked of a query engine or retriever."""
    takes = "a query string alone" if kind == "retriever" else "a single question (query)"
    return cannot_take_history(
        label, takes, "name a chat engine as the target (CondenseQuestionChatEngine.from_defaults(query_engine=...))"
    )


# --------------------------------------------------------------------------- LangChain and LangGraph


def langchain_messages(turns: Turns) -> list[Any]:
    """The history as LangChain HumanMessage/AIMessage (loaded already: every runnable and graph imports
    langchain_core), or role/content dicts for a graph built without it (LangGraph's ``add_messages`` reads both)."""
    try:
        from langchain_core.messages import AIMessage, HumanMessage
    except ImportError:
        return [{"role": role, "content": content} for role, content in turns]
    return [HumanMessage(content=content) if role == "user" else AIMessage(content=content) for role, content in turns]


def step_keys(obj: Any, input_keys: Callable[[Any], list[str] | None], wanted: Sequence[str]) -> list[str] | None:
    """The input keys of the first step of a LangChain runnable that takes one of ``wanted``, or None. A chain's own
    input schema may name less than it passes on: ``create_retrieval_chain`` names only ``input`` (``root``, a
    passthrough, before langchain-core 0.3.x), while its history-aware retriever reads ``chat_history`` too."""
    try:
        nodes = list(obj.get_graph().nodes.values())
    except Exception:
        return None
    for node in nodes:
        data = getattr(node, "data", None)
        if isinstance(data, type):  # the schema of an edge of the graph: its fields
            fields = getattr(data, "model_fields", None)
            keys = [str(name) for name in fields] if isinstance(fields, Mapping) else None
        else:
            keys = input_keys(data)
        if keys and any(key in keys for key in wanted):
            return keys
    return None


def step_history_key(obj: Any, input_keys: Callable[[Any], list[str] | None]) -> str | None:
    """The ``chat_history``/``messages`` input of a step of a LangChain runnable, or None when no step takes one."""
    keys = step_keys(obj, input_keys, CHAT_HISTORY_KEYS) or []
    return next((key for key in CHAT_HISTORY_KEYS if key in keys), None)


def langchain_input(
    label: str, keys: list[str] | None, question_key: str | None, history_key: str | None, question: str, turns: Turns
) -> Any:
    """The input of a runnable or graph for a turn with history: the question under ``question_key`` and the
    history under ``history_key`` (``chat_history`` or ``messages``); with ``messages`` and no question key, the
    history then the question as a HumanMessage."""
    if keys is None:
        raise cannot_take_history(
            label, "a single text input", "give it a dict input with chat_history (or messages) beside the question"
        )
    if history_key is None:
        raise cannot_take_history(
            label,
            f"an input of {', '.join(keys)}, and no step of it takes chat_history or messages",
            "add a chat_history input (a list of HumanMessage/AIMessage) or a messages state",
        )
    messages = langchain_messages(turns)
    if question_key is not None:
        return {question_key: question, history_key: messages}
    return {history_key: [*messages, *langchain_messages([("user", question)])]}


# --------------------------------------------------------------------------- Haystack


def _message_class(socket_type: Any) -> type | None:
    """The ``ChatMessage`` class of a socket typed ``list[ChatMessage]`` (or an optional or union of it)."""
    origin = typing.get_origin(socket_type)
    if origin is typing.Union or origin is types.UnionType:
        return next((found for arg in typing.get_args(socket_type) if (found := _message_class(arg))), None)
    if origin is list:
        return next(
            (arg for arg in typing.get_args(socket_type) if getattr(arg, "__name__", "") == "ChatMessage"), None
        )
    return None


def _haystack_messages(message_class: Any, turns: Turns) -> list[Any]:
    return [
        message_class.from_user(content) if role == "user" else message_class.from_assistant(content)
        for role, content in turns
    ]


def _spliced(template: list[Any], history: list[Any]) -> list[Any]:
    """A chat template with the history after its leading system messages, before the question's message."""
    system = 0
    while system < len(template) and str(getattr(template[system], "role", "")).lower().endswith("system"):
        system += 1
    return [*template[:system], *history, *template[system:]]


def haystack_history(
    label: str, pipeline: Any, inputs: Mapping[str, Mapping[str, Any]], data: dict[str, dict[str, Any]], turns: Turns
) -> None:
    """Put the history into a pipeline's run ``data``: every open input taking a ``ChatMessage`` list, else every
    ``ChatPromptBuilder`` ``template`` input (the builder's own template with the history spliced in)."""
    placed = False
    for component, sockets in inputs.items():
        for name, socket in sockets.items():
            message_class = _message_class(socket.get("type") if isinstance(socket, Mapping) else None)
            if message_class is None and name in _HAYSTACK_HISTORY_INPUTS:
                from haystack.dataclasses import ChatMessage  # loaded already: the target is a Haystack pipeline

                message_class = ChatMessage
            if name == "template" or message_class is None:
                continue
            data.setdefault(component, {})[name] = _haystack_messages(message_class, turns)
            placed = True
    if placed:
        return
    for component, sockets in inputs.items():
        template = getattr(_component(pipeline, component), "template", None)
        if "template" not in sockets or not isinstance(template, list) or not template:
            continue
        history = _haystack_messages(type(template[0]), turns)
        data.setdefault(component, {})["template"] = _spliced(template, history)
        placed = True
    if not placed:
        open_inputs = ", ".join(f"{c}.{n}" for c, sockets in inputs.items() for n in sockets) or "none"
        raise cannot_take_history(
            label,
            f"no list of ChatMessage among its open inputs ({open_inputs})",
            "give a component an open chat_history input typed list[ChatMessage], "
            "or build the prompt with a ChatPromptBuilder whose template is a list of ChatMessage",
        )


def _component(pipeline: Any, name: str) -> Any:
    try:
        return pipeline.get_component(name)
    except Exception:
        return None
