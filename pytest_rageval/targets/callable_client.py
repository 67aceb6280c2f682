"""The Python RAG client: a callable target, sync (on a daemon thread of its own) or async, called
``fn(question, params)``; and what may be called so."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import os
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pytest_rageval import safejson
from pytest_rageval.evaluation.schema import RagResponse
from pytest_rageval.redact import Redactor, environment_secrets

from .daemon_calls import Abandoned, DaemonCalls, NotStarted, within
from .maps import LIST_TARGETS, ResponseMap, map_response, relative_paths, type_name
from .protocol import RagCallError, RagConfigError, RagReply
from .stream import Drained, drain_async, drain_sync, is_async_stream, is_stream

# --------------------------------------------------------------------------- callable client


def _is_async_callable(fn: Any) -> bool:
    try:
        return _async_callable(fn)
    except Exception:  # an object whose __getattr__ raises something else: called as a sync one
        return False


def _async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return not inspect.isroutine(fn) and call is not None and inspect.iscoroutinefunction(call)


def _raised(exc: BaseException, redactor: Redactor) -> str:
    """What a target raised, on one line, secrets masked before the cut: ``KeyError: 'x'``, or
    ``the target raised SystemExit(2)`` for a BaseException."""

    def cut(text: str) -> str:
        text = " ".join(redactor.mask(text).split())
        return text[:500] + ("..." if len(text) > 500 else "")

    if isinstance(exc, Exception):
        text = cut(str(exc))
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return "the target raised " + cut(repr(exc))


def _cancelled_from_outside() -> bool:
    """Whether this task was cancelled (timeout, interrupt), not handed a CancelledError the target raised itself."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return cancelling is None or cancelling() > 0


def _callable_name(fn: Any) -> str:
    try:
        module = getattr(fn, "__module__", None)
        qualname = getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", None)
    except Exception:  # an object whose __getattr__ raises something else
        module, qualname = type(fn).__module__, type(fn).__qualname__
    return f"{module}:{qualname}" if module and qualname else object.__repr__(fn)


class CallableClient:
    """A Python callable ``fn(question, params)`` as the system under test (sync or async).

    Whatever the target raises is that case's error, BaseExceptions included
    (``SystemExit`` from an ``argparse`` call, ``KeyboardInterrupt``): the
    other cases still run. A sync target runs on a daemon thread
    (:mod:`.daemon_calls`); past ``timeout`` the call is abandoned, never
    joined, and at most ``abandon_limit`` abandoned calls run at once.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        response_map: ResponseMap | None = None,
        timeout: float | None = None,
        abandon_limit: int = 8,
        docs_root: Path | None = None,
    ) -> None:
        if not callable(fn):
            raise RagConfigError(f"rageval_target: {name or fn!r} is not callable")
        if timeout is not None and timeout <= 0:
            raise RagConfigError(f"rageval_timeout must be a positive number of seconds, got {timeout!r}")
        self.fn = fn
        self.docs_root = docs_root
        self.name = name or _callable_name(fn)
        self.response_map = response_map or ResponseMap()
        self.timeout = timeout
        self._is_async = _is_async_callable(fn)
        self._threads = DaemonCalls(abandon_limit)
        self._redactor = Redactor(environment_secrets(os.environ))  # a callable may echo the judge key

    def __repr__(self) -> str:
        return f"CallableClient({self.name!r})"

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "callable",
            "callable": self.name,
            "async": self._is_async,
            "timeout": self.timeout,
            "response_map": self.response_map.as_dict(),
        }

    async def _call(self, question: str, params: dict[str, Any]) -> Any:
        """The target's result; anything it raises, BaseExceptions included, as a ``target`` RagCallError.

        An async target runs in its own task under :func:`.daemon_calls.within`: a SystemExit or
        KeyboardInterrupt escaping a task stops the session's event loop, so none may leave here.
        """
        try:
            if self._is_async:
                result = self.fn(question, params)
            else:
                result = await self._threads.call(self.fn, question, params, timeout=self.timeout)
            if inspect.isawaitable(result):  # a sync function returning a coroutine: awaited within the timeout
                result = await (result if self._is_async else within(result, self.timeout))
            return result
        except (RagCallError, Abandoned, NotStarted):
            raise
        except asyncio.CancelledError as exc:
            if _cancelled_from_outside():  # the timeout or the session cancelled this call
                raise
            raise RagCallError("target", _raised(exc, self._redactor)) from None
        except Exception as exc:
            error = RagCallError("target", _raised(exc, self._redactor))
            error.unbindable = isinstance(exc, TypeError) and cannot_bind(self.fn, exc, question, params)
            raise error from exc
        except BaseException as exc:
            raise RagCallError("target", _raised(exc, self._redactor)) from None

    async def aask(self, question: str, *, k: int, params: dict[str, Any]) -> RagReply:
        """Call the target with ``(question, {"k": k, **params})`` and normalise its result."""
        call_params = {"k": k, **(params or {})}
        start = time.perf_counter()
        try:
            if self._is_async:
                result = await within(self._call(question, call_params), self.timeout)
            else:  # a sync target's thread call keeps its own timeout
                result = await self._call(question, call_params)
        except Abandoned as exc:
            error = RagCallError("timeout", self._timed_out())
            error.still_running = exc.ended
            raise error from None
        except NotStarted as exc:
            raise RagCallError(
                "timeout",
                f"{self.name} was not called within {self.timeout:g} s: {exc.running} earlier calls are past their "
                f"timeout and still running (at most {self._threads.limit} are left running)",
            ) from None
        ttft_ms = None
        if is_stream(result) or is_async_stream(result):
            drained = await self._drain(result, start)
            result = drained.joined(self.response_map.answer)
            ttft_ms = None if drained.first_delta_at is None else (drained.first_delta_at - start) * 1000.0
        latency_ms = (time.perf_counter() - start) * 1000.0
        response, notes = self._normalise(result)
        return RagReply(response=response, latency_ms=latency_ms, attempts=1, notes=tuple(notes), ttft_ms=ttft_ms)

    async def _drain(self, stream: Any, start: float) -> Drained:
        """A streamed result read to its end within what is left of the timeout (a sync one on a daemon thread)."""
        left = None if self.timeout is None else max(self.timeout - (time.perf_counter() - start), 0.001)

        async def guarded() -> Drained:  # nothing a stream raises may escape the task wait_for runs it in
            try:
                if is_async_stream(stream):
                    return await drain_async(stream)
                return await self._threads.call(drain_sync, stream, timeout=left)  # type: ignore[no-any-return]
            except (RagCallError, Abandoned, NotStarted):
                raise
            except asyncio.CancelledError as exc:
                if _cancelled_from_outside():
                    raise
                raise RagCallError("target", "streaming: " + _raised(exc, self._redactor)) from None
            except BaseException as exc:
                raise RagCallError("target", "streaming: " + _raised(exc, self._redactor)) from None

        try:  # a sync stream's thread call keeps its own timeout
            return await (guarded() if left is None or is_stream(stream) else asyncio.wait_for(guarded(), left))
        except (asyncio.TimeoutError, Abandoned, NotStarted):
            raise RagCallError("timeout", f"{self.name}'s stream did not end within {self.timeout:g} s") from None

    def _timed_out(self) -> str:
        message = f"{self.name} did not return within {self.timeout:g} s"
        if self._is_async:
            return message
        return message + "; the call was abandoned (its thread is left running and does not keep pytest from exiting)"

    def _normalise(self, result: Any) -> tuple[RagResponse, list[str]]:
        """The response of ``result`` and what was repaired in it (NaN, invalid Unicode: safejson.clean)."""
        ready = isinstance(result, RagResponse)
        if isinstance(result, BaseModel):
            result = result.model_dump(exclude_none=ready)
        elif dataclasses.is_dataclass(result) and not isinstance(result, type):
            result = dataclasses.asdict(result)
        if not isinstance(result, dict):
            raise RagCallError(
                "invalid_response", f"{self.name} returned {type_name(result)}, expected a dict or RagResponse"
            )
        try:
            result, notes = safejson.clean(result)
        except safejson.JsonLimitError as exc:
            raise RagCallError("invalid_response", f"{self.name} returned a value refused: {exc}") from None
        result, notes = self._redactor.mask_data(result), [self._redactor.mask(note) for note in notes]
        if not ready:
            return map_response(result, self.response_map, self.docs_root), notes
        if isinstance(result.get("timings"), dict):  # a NaN timing became null: drop it as map_response does
            result["timings"] = {name: ms for name, ms in result["timings"].items() if ms is not None}
        for name in LIST_TARGETS:
            if isinstance(result.get(name), list):
                result[name] = relative_paths(result[name], self.docs_root)
        return RagResponse.model_validate(result), notes

    async def aclose(self) -> None:
        """Nothing to release."""


#: How a callable target is called, for the messages of a target that cannot be.
HOW_TARGETS_ARE_CALLED = (
    "a target is called fn(question, params), where params is a dict holding k and the case's and the "
    'matrix\'s params, and returns a dict such as {"answer": ..., "debug": {"retrieved_chunks": [...]}}'
)


def signature_problem(fn: Callable[..., Any]) -> str | None:
    """Why ``fn`` cannot be called ``fn(question, params)``, read from its signature (None when it can, or when it
    has none to read): it takes other arguments, or its second parameter has a default that is no dict
    (``def answer(question, top_k=4)`` would get the params dict as ``top_k``)."""
    try:
        signature = inspect.signature(fn)
    except Exception:  # none to read: a C callable, a __signature__ that raises
        return None
    try:
        bound = signature.bind("question", {})
    except TypeError as exc:
        return f"its signature {signature} cannot take (question, params): {exc}"
    second = [name for name, value in bound.arguments.items() if isinstance(value, dict) and not value]
    parameter = signature.parameters.get(second[0]) if second else None
    if parameter is None or parameter.kind is inspect.Parameter.VAR_POSITIONAL:
        return None
    default = parameter.default
    if default is not inspect.Parameter.empty and default is not None and not isinstance(default, Mapping):
        return f"its second parameter {parameter.name}={default!r} would receive the params dict"
    return None


def cannot_bind(fn: Callable[..., Any], error: TypeError, *args: Any) -> bool:
    """Whether ``error``, raised by calling ``fn(*args)``, says the call could not bind ``args`` (not a TypeError
    from inside ``fn``): its signature, when it has one to read, cannot take them; else the error came from the
    call itself, before any line of ``fn`` ran (it was raised in this package's frame that made the call)."""
    try:
        signature = inspect.signature(fn)
    except Exception:  # none to read: a C callable, an odd __signature__
        signature = None
    if signature is not None:
        try:
            signature.bind(*args)
        except TypeError:
            return True
        return False
    frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)]
    return bool(frames) and Path(frames[-1].f_code.co_filename).resolve().is_relative_to(_PACKAGE)


#: this package's folder: a traceback with frames only in it never entered a target
_PACKAGE = Path(__file__).resolve().parents[1]


def callable_client(spec: str, target: Any, *, concurrency: int = 8, **http_options: Any) -> CallableClient:
    """The client of the object ``spec`` named; RagConfigError when it cannot be called as targets are."""
    if not callable(target):
        raise RagConfigError(
            f"rageval_target {spec!r}: {spec.partition(':')[2]!r} is a {type(target).__name__} object, "
            f"not callable nor an object of LlamaIndex, LangChain, LangGraph or Haystack; {HOW_TARGETS_ARE_CALLED}"
        )
    problem = signature_problem(target)
    if problem is not None:
        raise RagConfigError(f"rageval_target {spec!r}: {problem}; {HOW_TARGETS_ARE_CALLED}")
    return CallableClient(target, name=spec, abandon_limit=concurrency, **python_options(http_options))


def python_options(http_options: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a Python target among HttpClient's keyword arguments."""
    return {key: http_options.get(key) for key in ("response_map", "timeout", "docs_root")}
