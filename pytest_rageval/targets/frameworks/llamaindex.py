"""LlamaIndex query engines, chat engines, retrievers and workflows as targets.

The sync entry points (``query``, ``chat``, ``retrieve``) run in the worker
pool: LlamaIndex's async forms run a retriever that has no async code of its
own (BM25, most vector stores) on the event loop, where one slow call would
stall every case and no timeout could fire. A workflow has only an async
entry point (``run``), awaited on the session's loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import Adapter, chunk, first_nodes, join_stream, shape_error
from .detect import has_base
from .history import llamaindex_chat, llamaindex_messages, llamaindex_refusal, turns_of
from .topk import TopKVariants

__all__ = ["recognise"]

_ROOTS = ("llama_index", "workflows")
_K_ATTRIBUTES = ("similarity_top_k", "_similarity_top_k")


def _set_k(value: Any, k: int) -> Any | None:
    if not has_base(value, _ROOTS, "BaseRetriever"):
        return None
    import copy

    names = [name for name in _K_ATTRIBUTES if name in getattr(value, "__dict__", {})]
    if not names:
        return None
    clone = copy.copy(value)
    for name in names:
        clone.__dict__[name] = k
    return clone


class _LlamaIndex(Adapter):
    def __init__(self, kind: str, obj: Any) -> None:
        super().__init__("LlamaIndex", kind, obj)
        self._variants = TopKVariants(obj, _set_k)

    def _target(self, top_k: int | None) -> Any:
        if top_k is None:
            return self.obj
        variant, count = self._variants.get(top_k)
        if not count:
            raise shape_error(
                self.framework,
                self.kind,
                f"top_k={top_k} reaches no retriever with a similarity_top_k (set it in the object, or use rageval_params_hook)",
            )
        return variant

    def call(self, question: str, top_k: int | None, params: Mapping[str, Any]) -> dict[str, Any]:
        target = self._target(top_k)
        turns = turns_of(params)
        if self.kind == "chat engine":
            return self.read(llamaindex_chat(target, question, turns))
        if turns:
            raise llamaindex_refusal(self.label, self.kind)
        if self.kind == "retriever":
            return {"answer": "", "debug": {"retrieved_chunks": self._chunks(target.retrieve(question))}}
        return self.read(target.query(question))

    def read(self, result: Any) -> dict[str, Any]:
        """A Response, streaming response or chat response (``response`` + ``source_nodes``)."""
        if not hasattr(result, "source_nodes"):
            raise shape_error(self.framework, self.kind, f"returned {type(result).__name__}, which has no source_nodes")
        answer = getattr(result, "response", None)
        if answer is None:  # a streaming response: its text once read, else its stream up to the answer's limit
            answer = getattr(result, "response_txt", None)
        if answer is None and getattr(result, "response_gen", None) is not None:
            answer = join_stream(result.response_gen, self.max_answer_chars)
        if answer is None and callable(getattr(result, "get_response", None)):
            answer = getattr(result.get_response(), "response", None)
        return {
            "answer": "" if answer is None else str(answer),
            "debug": {"retrieved_chunks": self._chunks(result.source_nodes)},
        }

    def _chunks(self, nodes: Any) -> list[dict[str, Any]]:
        if not isinstance(nodes, (list, tuple)):
            raise shape_error(self.framework, self.kind, f"retrieved {type(nodes).__name__}, not a list of nodes")
        out = []
        for rank, item in enumerate(first_nodes(nodes, "retrieved nodes"), start=1):
            node = getattr(item, "node", item)
            if not hasattr(node, "metadata"):
                raise shape_error(
                    self.framework, self.kind, f"retrieved node {rank} is a {type(node).__name__} without metadata"
                )
            text = node.get_content() if callable(getattr(node, "get_content", None)) else getattr(node, "text", None)
            out.append(
                chunk(
                    text=text,
                    score=getattr(item, "score", None),
                    metadata=node.metadata,
                    rank=rank,
                    chunk_id=getattr(node, "node_id", None),
                    doc_id=getattr(node, "ref_doc_id", None) or getattr(node, "node_id", None),
                )
            )
        return out


class _Workflow(_LlamaIndex):
    is_async = True

    def __init__(self, obj: Any) -> None:
        super().__init__("workflow", obj)

    async def acall(self, question: str, top_k: int | None, params: Mapping[str, Any]) -> dict[str, Any]:
        turns = turns_of(params)
        history = {"chat_history": llamaindex_messages(turns)} if turns else {}
        result = await self.obj.run(query=question, question=question, **({"top_k": top_k} if top_k else {}), **history)
        if isinstance(result, str):
            return {"answer": result}
        if isinstance(result, Mapping):
            return dict(result)
        return self.read(result)


def recognise(obj: Any) -> Adapter | None:
    """The adapter of a LlamaIndex object, or None when ``obj`` is none."""
    if has_base(obj, _ROOTS, "Workflow"):
        return _Workflow(obj)
    for base, kind in (
        ("BaseQueryEngine", "query engine"),
        ("BaseChatEngine", "chat engine"),
        ("BaseRetriever", "retriever"),
    ):
        if has_base(obj, _ROOTS, base):
            return _LlamaIndex(kind, obj)
    return None
