"""pytest-rageval: RAG evaluation as ordinary pytest regression tests.

Public names are imported lazily: every pytest run imports this package
through the plugin entry point, and most runs never need them.

The top-level modules are the foundations every subpackage may import (no
pytest). The subpackages, lowest first: evaluation; targets and judges; gate
and runs; report; plugin (the pytest surface); cli. A module imports only
from its own layer or a lower one (docs/internals.md, tests/test_layers.py);
demo/ imports nothing of the plugin.

PYTEST_DONT_REWRITE: pytest marks an installed plugin's package for assertion
rewriting in every session it starts. Under an editable install the package is
imported by setuptools' finder, not by pytest's rewriting hook, so a second
session in the same process (``pytester``'s in-process runs) would warn that
it "cannot be rewritten". The package asserts nothing for users to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees of the lazy names below
    from pytest_rageval.errors import BaselineError, ConfigError, DataError, RagevalError, RagevalWarning
    from pytest_rageval.evaluation.registry import Metric, ScoreContext
    from pytest_rageval.evaluation.schema import Chunk, EvalCase, GoldSupport, RagResponse
    from pytest_rageval.judges.base import Judge, JudgeError, JudgeInput, Verdict
    from pytest_rageval.plugin.handwritten import (
        CaseResult,
        EvaluateError,
        SessionClient,
        assert_abstained,
        assert_answered,
        assert_cites,
        assert_metrics,
    )
    from pytest_rageval.targets.callable_client import CallableClient
    from pytest_rageval.targets.http_client import HttpClient
    from pytest_rageval.targets.protocol import RagCallError

__version__ = "0.1.0"

_EXPORTS = {
    "RagevalError": "pytest_rageval.errors",
    "ConfigError": "pytest_rageval.errors",
    "DataError": "pytest_rageval.errors",
    "BaselineError": "pytest_rageval.errors",
    "RagevalWarning": "pytest_rageval.errors",
    "assert_metrics": "pytest_rageval.plugin.handwritten",
    "assert_abstained": "pytest_rageval.plugin.handwritten",
    "assert_answered": "pytest_rageval.plugin.handwritten",
    "assert_cites": "pytest_rageval.plugin.handwritten",
    "EvaluateError": "pytest_rageval.plugin.handwritten",
    "CaseResult": "pytest_rageval.plugin.handwritten",
    "SessionClient": "pytest_rageval.plugin.handwritten",
    "EvalCase": "pytest_rageval.evaluation.schema",
    "GoldSupport": "pytest_rageval.evaluation.schema",
    "Chunk": "pytest_rageval.evaluation.schema",
    "RagResponse": "pytest_rageval.evaluation.schema",
    "Metric": "pytest_rageval.evaluation.registry",
    "ScoreContext": "pytest_rageval.evaluation.registry",
    "Judge": "pytest_rageval.judges.base",
    "JudgeError": "pytest_rageval.judges.base",
    "JudgeInput": "pytest_rageval.judges.base",
    "Verdict": "pytest_rageval.judges.base",
    "HttpClient": "pytest_rageval.targets.http_client",
    "CallableClient": "pytest_rageval.targets.callable_client",
    "RagCallError": "pytest_rageval.targets.protocol",
}

__all__ = [
    "BaselineError",
    "CallableClient",
    "CaseResult",
    "Chunk",
    "ConfigError",
    "DataError",
    "EvalCase",
    "EvaluateError",
    "GoldSupport",
    "HttpClient",
    "Judge",
    "JudgeError",
    "JudgeInput",
    "Metric",
    "RagCallError",
    "RagResponse",
    "RagevalError",
    "RagevalWarning",
    "ScoreContext",
    "SessionClient",
    "Verdict",
    "__version__",
    "assert_abstained",
    "assert_answered",
    "assert_cites",
    "assert_metrics",
]  # the names of _EXPORTS


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_rageval' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
