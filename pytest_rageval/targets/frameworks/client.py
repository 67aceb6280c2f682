"""The client of a framework object: the adapter's call in the worker pool (or on the loop, for an
async-only object), with the callable client's timeout, error and normalisation rules. The framework's output is
read into the response within the call, so within its timeout, and within the bounds of :mod:`.common`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rageval import defaults
from pytest_rageval.evaluation.docpaths import relative_path
from pytest_rageval.evaluation.schema import Chunk, RagResponse

from ..callable_client import CallableClient, _raised
from ..maps import ResponseMap
from ..protocol import RagCallError, RagReply
from .common import Adapter, FieldError, noted, shape_error

__all__ = ["FrameworkClient"]

#: The params that set the retrievers' k for a call (the first one given wins).
TOP_K_PARAMS = ("top_k", "k")

ParamsHook = Callable[[Any, dict[str, Any]], Any]


@dataclass(frozen=True)
class _Read:
    """A framework's output already read into the response (in the call), and the notes of what was cut."""

    response: RagResponse
    notes: list[str]


def _top_k(params: Mapping[str, Any]) -> int | None:
    for name in TOP_K_PARAMS:
        value = params.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


class FrameworkClient(CallableClient):
    """A LlamaIndex, LangChain/LangGraph or Haystack object as the system under test.

    ``top_k`` among a case's params, or the matrix's depth axis (``k`` or ``top_k``),
    sets the object's retrievers' k for that call; the run's K alone does not (the object answers
    as configured, and K chunks of it count). ``params_hook(obj, params)``, when
    set, returns the object to ask for each call's params.
    """

    def __init__(
        self,
        adapter: Adapter,
        *,
        name: str,
        response_map: ResponseMap | None = None,
        timeout: float | None = None,
        abandon_limit: int = 8,
        docs_root: Path | None = None,
        params_hook: ParamsHook | None = None,
        max_answer_chars: int = defaults.MAX_ANSWER_CHARS,
    ) -> None:
        self.adapter = adapter
        adapter.max_answer_chars = max_answer_chars
        self.params_hook = params_hook
        fn = self._acall if adapter.is_async else self._call_sync
        super().__init__(
            fn, name=name, response_map=response_map, timeout=timeout, abandon_limit=abandon_limit, docs_root=docs_root
        )
        self.name = name

    def __repr__(self) -> str:
        return f"FrameworkClient({self.name!r}, {self.adapter.label})"

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "kind": "framework",
            "framework": self.adapter.framework,
            "object": self.adapter.kind,
        }

    def _normalise(self, result: Any) -> tuple[RagResponse, list[str]]:
        """What the call read already (:meth:`_read`), else as :meth:`_read_now`."""
        if isinstance(result, _Read):
            return result.response, result.notes
        return self._read_now(result)

    def _read(self, result: Any, notes: list[str]) -> _Read:
        response, more = self._read_now(result)
        return _Read(response, [*notes, *more])

    def _read_now(self, result: Any) -> tuple[RagResponse, list[str]]:
        """As the callable client's, and every chunk path (relative ones too: a loader run in the working folder
        wrote them) made relative to ``docs_root`` where it lies under it."""
        response, notes = super()._normalise(result)

        def relative(chunks: list[Chunk]) -> list[Chunk]:
            return [
                chunk.model_copy(update={"rel_path": relative_path(chunk.rel_path, self.docs_root)})
                if chunk.rel_path
                else chunk
                for chunk in chunks
            ]

        update = {"retrieved_chunks": relative(response.retrieved_chunks), "references": relative(response.references)}
        return response.model_copy(update=update), notes

    def _adapter_for(self, params: dict[str, Any]) -> Adapter:
        if self.params_hook is None:
            return self.adapter
        import copy

        adapter = copy.copy(self.adapter)
        adapter.obj = self.params_hook(self.adapter.obj, dict(params))
        return adapter

    def _call_sync(self, question: str, params: dict[str, Any]) -> _Read:
        explicit = params.pop("_explicit", {})
        with self._reading() as notes:
            read = self._read(self._adapter_for(params).call(question, _top_k(explicit), params), notes)
        return read

    async def _acall(self, question: str, params: dict[str, Any]) -> _Read:
        explicit = params.pop("_explicit", {})
        with self._reading() as notes:
            read = self._read(await self._adapter_for(params).acall(question, _top_k(explicit), params), notes)
        return read

    @contextlib.contextmanager
    def _reading(self) -> Iterator[list[str]]:
        """The notes of one call's reading; what the framework raises, or a field that cannot be read, is that
        case's error."""
        with noted() as notes:
            try:
                yield notes
            except RagCallError:
                raise
            except FieldError as exc:
                raise shape_error(self.adapter.framework, self.adapter.kind, str(exc)) from None
            except Exception as exc:
                raise self._raised(exc) from exc

    def _raised(self, exc: Exception) -> RagCallError:
        """``LlamaIndex query engine raised KeyError: 'x'`` (secrets masked)."""
        return RagCallError("target", f"{self.adapter.label} raised {_raised(exc, self._redactor)}")

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        """As the callable client; the case's and the matrix's own params (not the run's K) choose top_k."""
        return await super().aask(question, k=k, params={**(params or {}), "_explicit": dict(params or {})})
