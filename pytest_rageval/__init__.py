"""pytest-rageval: RAG evaluation as ordinary pytest regression tests.

Public names are imported lazily: every pytest run imports this package
through the plugin entry point, and most runs never need them.

PYTEST_DONT_REWRITE: pytest marks an installed plugin's package for assertion
rewriting in every session it starts. Under an editable install the package is
imported by setuptools' finder, not by pytest's rewriting hook, so a second
session in the same process (``pytester``'s in-process runs) would warn that
it "cannot be rewritten". The package asserts nothing for users to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees of the lazy names below
    from pytest_rageval.client import CallableClient, HttpClient, RagCallError
    from pytest_rageval.handwritten import (CaseResult, EvaluateError, SessionClient, assert_abstained, assert_answered,
                                            assert_cites, assert_metrics)
    from pytest_rageval.schema import Chunk, EvalCase, GoldSupport, RagResponse

__version__ = "0.1.0"

_EXPORTS = {
    "assert_metrics": "pytest_rageval.handwritten",
    "assert_abstained": "pytest_rageval.handwritten",
    "assert_answered": "pytest_rageval.handwritten",
    "assert_cites": "pytest_rageval.handwritten",
    "EvaluateError": "pytest_rageval.handwritten",
    "CaseResult": "pytest_rageval.handwritten",
    "SessionClient": "pytest_rageval.handwritten",
    "EvalCase": "pytest_rageval.schema",
    "GoldSupport": "pytest_rageval.schema",
    "Chunk": "pytest_rageval.schema",
    "RagResponse": "pytest_rageval.schema",
    "HttpClient": "pytest_rageval.client",
    "CallableClient": "pytest_rageval.client",
    "RagCallError": "pytest_rageval.client",
}

__all__ = ["CallableClient", "CaseResult", "Chunk", "EvalCase", "EvaluateError", "GoldSupport", "HttpClient", "RagCallError",
           "RagResponse", "SessionClient", "__version__", "assert_abstained", "assert_answered", "assert_cites",
           "assert_metrics"]  # the names of _EXPORTS


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_rageval' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
