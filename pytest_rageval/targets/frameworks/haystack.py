"""Haystack ``Pipeline`` and ``AsyncPipeline`` as targets.

The question goes to every open ``query`` and ``question`` input of the
pipeline's components, ``top_k`` to every open ``top_k`` input (the retrievers),
and the run returns the outputs of every component; a conversation turn's
history goes to its open ``ChatMessage`` list inputs or a ChatPromptBuilder's
template (:mod:`.history`). The answer is the first ``answers`` (a
GeneratedAnswer's ``data``) or ``replies`` (text or a chat message) output; the chunks are the ``documents`` output of the last component
that has one (a ranker after its retriever). ``run`` goes to the worker pool
(an AsyncPipeline's ``run`` drives its own event loop there); ``run_async`` is awaited
only by an object without ``run``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import Adapter, chunk, first_nodes, shape_error
from .detect import has_base
from .history import Turns, haystack_history, turns_of

__all__ = ["recognise"]

_ROOTS = ("haystack", "haystack_experimental")
_QUESTION_INPUTS = ("query", "question")


def _order(pipeline: Any) -> list[str]:
    """The component names, upstream first."""
    graph = getattr(pipeline, "graph", None)
    names = list(getattr(graph, "nodes", []) or [])
    try:
        import networkx  # a dependency of Haystack, imported by it already

        return list(networkx.topological_sort(graph))
    except Exception:
        return names


class _Pipeline(Adapter):
    def __init__(self, kind: str, obj: Any) -> None:
        super().__init__("Haystack", kind, obj)
        self.is_async = not callable(getattr(obj, "run", None))  # an AsyncPipeline of a release without a sync run

    def _data(self, question: str, top_k: int | None, turns: Turns) -> dict[str, dict[str, Any]]:
        data: dict[str, dict[str, Any]] = {}
        inputs = self.obj.inputs()
        for component, sockets in inputs.items():
            given: dict[str, Any] = {name: question for name in _QUESTION_INPUTS if name in sockets}
            if top_k is not None and "top_k" in sockets:
                given["top_k"] = top_k
            if given:
                data[component] = given
        if not any(name in _QUESTION_INPUTS for sockets in data.values() for name in sockets):
            open_inputs = ", ".join(f"{c}.{n}" for c, sockets in inputs.items() for n in sockets) or "none"
            raise shape_error(
                self.framework,
                self.kind,
                f"no component has an open query or question input (its open inputs: {open_inputs})",
            )
        if top_k is not None and not any("top_k" in given for given in data.values()):
            raise shape_error(
                self.framework,
                self.kind,
                f"top_k={top_k} reaches no component with an open top_k input (use rageval_params_hook)",
            )
        if turns:
            haystack_history(self.label, self.obj, inputs, data, turns)
        return data

    def call(self, question: str, top_k: int | None, params: Mapping[str, Any]) -> dict[str, Any]:
        order = _order(self.obj)
        result = self.obj.run(self._data(question, top_k, turns_of(params)), include_outputs_from=set(order))
        return self.read(result, order)

    async def acall(self, question: str, top_k: int | None, params: Mapping[str, Any]) -> dict[str, Any]:
        order = _order(self.obj)
        result = await self.obj.run_async(
            self._data(question, top_k, turns_of(params)), include_outputs_from=set(order)
        )
        return self.read(result, order)

    def read(self, result: Any, order: list[str]) -> dict[str, Any]:
        if not isinstance(result, Mapping):
            raise shape_error(self.framework, self.kind, f"run returned {type(result).__name__}, not a dict of outputs")
        outputs = [(name, result[name]) for name in order if isinstance(result.get(name), Mapping)]
        answer = None
        for _, output in outputs:
            answers = output.get("answers")
            if isinstance(answers, list) and answers:
                answer = getattr(answers[0], "data", answers[0])
                break
        if answer is None:
            for _, output in reversed(outputs):
                replies = output.get("replies")
                if isinstance(replies, list) and replies:
                    first = replies[0]
                    answer = (
                        first
                        if isinstance(first, str)
                        else getattr(first, "text", None) or getattr(first, "content", None)
                    )
                    break
        documents = next(
            (output["documents"] for _, output in reversed(outputs) if isinstance(output.get("documents"), list)), None
        )
        if answer is None and documents is None:
            raise shape_error(
                self.framework,
                self.kind,
                f"its outputs hold no answers, replies or documents (outputs of {', '.join(name for name, _ in outputs) or 'no component'})",
            )
        return {
            "answer": "" if answer is None else str(answer),
            "debug": {"retrieved_chunks": self._chunks(documents or [])},
        }

    def _chunks(self, documents: list[Any]) -> list[dict[str, Any]]:
        out = []
        for rank, document in enumerate(first_nodes(documents, "retrieved documents"), start=1):
            if not hasattr(document, "content"):
                raise shape_error(
                    self.framework, self.kind, f"documents[{rank - 1}] is a {type(document).__name__}, not a Document"
                )
            out.append(
                chunk(
                    text=document.content,
                    score=getattr(document, "score", None),
                    metadata=getattr(document, "meta", None),
                    rank=rank,
                    chunk_id=getattr(document, "id", None),
                    doc_id=(getattr(document, "meta", None) or {}).get("source_id") or getattr(document, "id", None),
                )
            )
        return out


def recognise(obj: Any) -> Adapter | None:
    """The adapter of a Haystack pipeline, or None when ``obj`` is none."""
    if has_base(obj, _ROOTS, "AsyncPipeline"):
        return _Pipeline("AsyncPipeline", obj)
    if has_base(obj, _ROOTS, "Pipeline", "PipelineBase"):
        return _Pipeline("Pipeline", obj)
    return None
