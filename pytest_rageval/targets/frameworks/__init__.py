"""RAG framework objects as targets: LlamaIndex, LangChain/LangGraph and Haystack.

An object is recognised by the names in its class hierarchy (:mod:`.detect`), so
no framework is imported that the user's own module did not import already.
Each adapter calls the object and reads its answer and retrieved nodes into the
default response shape (:mod:`.common`); :class:`.client.FrameworkClient` then reads that
through the response map and makes each ``rel_path`` relative to ``docs_root``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .common import Adapter

__all__ = ["recognise"]


def recognise(obj: Any) -> Adapter | None:
    """The adapter of a framework object (or of the object a bound method such as ``query_engine.query``
    belongs to), or None when it is none of the frameworks'."""
    from . import haystack, langchain, llamaindex

    try:
        owner = getattr(obj, "__self__", None)
    except Exception:  # an object whose __getattr__ raises something else: not a bound method
        owner = None
    for candidate in (obj, owner) if owner is not None else (obj,):
        for module in (llamaindex, langchain, haystack):
            adapter: Adapter | None = module.recognise(candidate)
            if adapter is not None:
                return adapter
    return None
