"""The system under test named by ``rageval_target``: an HTTP ask API, a Python callable, or an object of a RAG
framework (LlamaIndex, LangChain/LangGraph, Haystack), each as a client."""

from __future__ import annotations

from typing import Any, Sequence

from .client import HttpClient, RagClient, RagConfigError, callable_client, check_target, python_options, resolve
from .frameworks import recognise

__all__ = ["load_target"]


def load_target(spec: str, *, folders: Sequence[str] = (), concurrency: int = 8, params_hook: str = "",
                **http_options: Any) -> RagClient:
    """A client for ``http(s)://...`` or ``package.module:name``, where ``name`` is a callable or a framework
    object (recognised by its classes: frameworks.recognise). ``folders`` are tried on sys.path when the module
    is not importable as is (the working directory and rootdir). ``http_options`` are HttpClient's keyword
    arguments; a Python target uses only ``response_map``, ``timeout`` and ``docs_root`` of them, and leaves at
    most ``concurrency`` calls past their timeout running. ``params_hook`` (``package.module:function``) gives a
    framework object the params of each call."""
    spec = check_target(spec)
    if spec.lower().startswith(("http://", "https://")):
        return HttpClient(spec, **http_options)
    target = resolve(spec, folders)
    adapter = recognise(target)
    if adapter is None:
        return callable_client(spec, target, concurrency=concurrency, **http_options)
    from .frameworks.client import FrameworkClient

    hook = resolve(params_hook, folders, setting="rageval_params_hook") if params_hook else None
    if hook is not None and not callable(hook):
        raise RagConfigError(f"rageval_params_hook {params_hook!r}: a {type(hook).__name__} object, not callable")
    return FrameworkClient(adapter, name=spec, abandon_limit=concurrency, params_hook=hook, **python_options(http_options))
