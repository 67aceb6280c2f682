"""The system under test named by ``rageval_target``: an HTTP ask API, a Python callable, or an object of a RAG
framework (LlamaIndex, LangChain/LangGraph, Haystack), each as a client."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_rageval import defaults

from .callable_client import HOW_TARGETS_ARE_CALLED, CallableClient, callable_client, python_options, signature_problem
from .frameworks import recognise
from .http_client import HttpClient
from .protocol import RagClient, RagConfigError
from .target_import import check_target, resolve
from .user_client import UserClient, attribute

__all__ = ["client_of", "load_target"]


def load_target(
    spec: str,
    *,
    folders: Sequence[str] = (),
    concurrency: int = 8,
    params_hook: str = "",
    max_answer_chars: int = defaults.MAX_ANSWER_CHARS,
    **http_options: Any,
) -> RagClient:
    """A client for ``http(s)://...`` or ``package.module:name``, where ``name`` is a callable or a framework
    object (recognised by its classes: frameworks.recognise). ``folders`` are tried on sys.path when the module
    is not importable as is (the working directory and rootdir). ``http_options`` are HttpClient's keyword
    arguments; a Python target uses only ``response_map``, ``timeout`` and ``docs_root`` of them, and leaves at
    most ``concurrency`` calls past their timeout running. ``params_hook`` (``package.module:function``) gives a
    framework object the params of each call; a framework's streamed answer is read up to ``max_answer_chars``."""
    spec = check_target(spec)
    if spec.lower().startswith(("http://", "https://")):
        return HttpClient(spec, **http_options)
    target = resolve(spec, folders)
    try:
        adapter = recognise(target)
    except RagConfigError as exc:  # an object of a framework that cannot be asked (a graph without a question key)
        raise RagConfigError(f"rageval_target {spec!r}: {exc}") from None
    if adapter is None:
        return callable_client(spec, target, concurrency=concurrency, **http_options)
    from .frameworks.client import FrameworkClient

    hook = resolve(params_hook, folders, setting="rageval_params_hook") if params_hook else None
    if hook is not None and not callable(hook):
        raise RagConfigError(f"rageval_params_hook {params_hook!r}: a {type(hook).__name__} object, not callable")
    return FrameworkClient(
        adapter,
        name=spec,
        abandon_limit=concurrency,
        params_hook=hook,
        max_answer_chars=max_answer_chars,
        **python_options(http_options),
    )


def client_of(
    obj: Any, *, name: str, concurrency: int = 8, max_answer_chars: int = defaults.MAX_ANSWER_CHARS, **http_options: Any
) -> RagClient:
    """A client for an object a conftest ``rageval_client`` fixture returns: a client (it has ``aask``; one of the
    user's own is held to ``timeout``: user_client), a framework object, or a callable (RagConfigError when it
    cannot be called as targets are). ``name`` names it in messages."""
    if isinstance(obj, (HttpClient, CallableClient, UserClient)):
        return obj
    if attribute(obj, "aask") is not None:
        return UserClient(obj, name=name, timeout=http_options.get("timeout"))
    try:
        adapter = recognise(obj)
    except RagConfigError as exc:
        raise RagConfigError(f"{name}: {exc}") from None
    if adapter is not None:
        from .frameworks.client import FrameworkClient

        return FrameworkClient(
            adapter,
            name=name,
            abandon_limit=concurrency,
            max_answer_chars=max_answer_chars,
            **python_options(http_options),
        )
    problem = (
        f"is a {type(obj).__name__} object, not a client, a callable nor an object of LlamaIndex, LangChain, LangGraph or Haystack"
        if not callable(obj)
        else signature_problem(obj)
    )
    if problem is not None:
        raise RagConfigError(f"{name}: {problem}; {HOW_TARGETS_ARE_CALLED}")
    return CallableClient(obj, name=name, abandon_limit=concurrency, **python_options(http_options))
