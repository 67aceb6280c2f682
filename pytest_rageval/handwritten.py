"""Hand-written tests: the ``rageval_client`` fixture's face and ``assert_metrics``.

::

    from pytest_rageval import assert_metrics

    def test_stip_author(rageval_client):
        result = rageval_client.evaluate(
            question="Who proposed STIP?",
            gold_supports=[{"rel_path": "proposals/stip.md", "heading_path": "# STIP"}],
        )
        assert_metrics(result, recall_at_k=1, mrr=0.5)

Each ``evaluate`` is recorded in results.jsonl and metrics.json like a
collected case, with the test's outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

from .client import RagClient
from .record import CaseError, CaseRecord
from .runner import JudgeSetup, evaluate_case
from .schema import EvalCase, RagResponse
from .thresholds import ThresholdError, coerce_threshold, find_misses

if TYPE_CHECKING:  # a type only: case_runner imports this module
    from .case_runner import CaseRunner


@dataclass
class CaseResult:
    """The outcome of ``rageval_client.evaluate``: the case's CaseRecord and its metrics."""

    record: CaseRecord

    @property
    def metrics(self) -> dict[str, Any]:
        return self.record["metrics"]

    @property
    def answer(self) -> Optional[str]:
        return self.record.get("answer")

    @property
    def error(self) -> Optional[CaseError]:
        return self.record.get("error")

    def __getitem__(self, metric: str) -> Any:
        return self.metrics[metric]


class SessionClient:
    """Synchronous face of the session's RAG client, for hand-written tests."""

    def __init__(self, rag_client: RagClient, *, runner: "CaseRunner") -> None:
        self.rag_client = rag_client
        self._runner = runner
        self.judge: Optional[JudgeSetup] = runner.setup.judge_setup  # the rageval_judge fixture's, once it is set up

    def ask(self, question: str, *, k: Optional[int] = None, **params: Any) -> RagResponse:
        """Ask the system under test one question and return its normalised response."""
        k = k or self._runner.settings.k
        return self._runner.engine.run(self.rag_client.aask(question, k=k, params=params)).response

    def evaluate(self, case: Union[EvalCase, dict[str, Any], None] = None, **fields: Any) -> CaseResult:
        """Run one case (an EvalCase, a dict, or eval-set fields as keywords) and score it."""
        runner = self._runner
        item = runner.current_item
        if isinstance(case, EvalCase):
            model = case
        else:
            data = dict(case or {})
            data.update(fields)
            data.setdefault("id", item.name if item is not None else "case")
            model = EvalCase.model_validate(data)
        key = f"{item.nodeid}::{model.id}" if item is not None else model.id
        file = item.nodeid.partition("::")[0] if item is not None else ""
        record = runner.evaluate_handwritten(
            evaluate_case(model, self.rag_client, runner.opts, runner.setup.thresholds_for(model),
                          key=key, file=file, line=0, judge=self.judge)
        )
        return CaseResult(record)


def assert_metrics(result: CaseResult, **thresholds: Any) -> None:
    """Fail the test when a metric misses its threshold.

    Without keyword thresholds, the configured thresholds of the case apply.
    ``assert_metrics(result, recall_at_k=1, latency_ms=2000, abstained=False)``.
    """
    __tracebackhide__ = True
    from .report.terminal import format_failure
    from .sanitize import terminal_safe

    if result.error:
        raise AssertionError(terminal_safe(f"RAG call failed ({result.error['kind']}): {result.error['message']}"))
    try:
        wanted = {m: coerce_threshold(m, v, "assert_metrics") for m, v in thresholds.items()}
    except ThresholdError as exc:
        raise TypeError(str(exc)) from None
    if not wanted:
        wanted = dict(result.record["thresholds"])
    misses = find_misses(result.metrics, wanted)
    result.record["thresholds"] = wanted
    result.record["misses"] = [m.as_dict() for m in misses]
    if misses:
        raise AssertionError(format_failure(result.record))
