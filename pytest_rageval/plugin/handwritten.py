"""Hand-written tests: the ``rageval_client`` fixture's face and ``assert_metrics``.

::

    from pytest_rageval import assert_metrics

    def test_stip_author(rageval_client):
        result = rageval_client.evaluate(
            question="Who proposed STIP?",
            gold_supports=[{"rel_path": "proposals/stip.md", "heading_path": "# STIP"}],
        )
        assert_metrics(result, recall_at_k=1, mrr=0.5)

Each ``evaluate`` is its own case in results.jsonl and metrics.json, keyed
``<test node id>::<id>`` (``id=`` when given, else ``q-`` and a hash of the
question). Its outcome is the test's when the test did not pass; in a passing
test, its own thresholds decide (asserted or not). A RAG or judge error inside
``evaluate`` ends the test as an error with the case's reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pytest_rageval.engine.evaluate import Engine, RunOptions, evaluate_case
from pytest_rageval.errors import RagevalError
from pytest_rageval.evaluation.anchors import normalize_heading_path
from pytest_rageval.evaluation.record import CaseError, CaseRecord
from pytest_rageval.evaluation.schema import EvalCase, HeadingPath, RagResponse
from pytest_rageval.evaluation.stored_chunk import StoredChunk
from pytest_rageval.evaluation.thresholds import (
    ThresholdError,
    check_metric_name,
    coerce_threshold,
    find_misses,
    shorten,
)
from pytest_rageval.judges.judging import JudgeSetup
from pytest_rageval.targets.protocol import RagClient

if TYPE_CHECKING:
    import pytest

    from pytest_rageval.config.settings import Settings
    from pytest_rageval.engine.run_setup import RunSetup


class HandwrittenRunner(Protocol):
    """What a ``SessionClient`` asks of the case runner (case_runner.py's ``CaseRunner``, which imports this module)."""

    @property
    def setup(self) -> RunSetup: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def opts(self) -> RunOptions: ...

    @property
    def current_item(self) -> pytest.Item | None: ...

    def handwritten_keys(self, item: pytest.Item | None) -> set[str]: ...

    def evaluate_handwritten(self, coro: Coroutine[Any, Any, CaseRecord]) -> CaseRecord: ...


@dataclass
class CaseResult:
    """The outcome of ``rageval_client.evaluate``: the case's CaseRecord and its metrics."""

    record: CaseRecord

    @property
    def metrics(self) -> dict[str, Any]:
        return self.record["metrics"]

    @property
    def answer(self) -> str | None:
        return self.record.get("answer")

    @property
    def error(self) -> CaseError | None:
        return self.record.get("error")

    def __getitem__(self, metric: str) -> Any:
        return self.metrics[metric]


class SessionClient:
    """Synchronous face of the session's RAG client, for hand-written tests."""

    def __init__(self, rag_client: RagClient, *, runner: HandwrittenRunner) -> None:
        self.rag_client = rag_client
        self._runner = runner
        self.judge: JudgeSetup | None = runner.setup.judge_setup  # the rageval_judge fixture's, once it is set up

    def ask(self, question: str, *, k: int | None = None, **params: Any) -> RagResponse:
        """Ask the system under test one question and return its normalised response."""
        k = k or self._runner.settings.k
        return self._runner.engine.run(self.rag_client.aask(question, k=k, params=params)).response

    def evaluate(self, case: EvalCase | dict[str, Any] | None = None, **fields: Any) -> CaseResult:
        """Run one case (an EvalCase, a dict, or eval-set fields as keywords) and score it.

        Raises EvaluateError (the test is then an error) when the RAG or judge call failed, and ValueError when
        this test already evaluated a case of the same id, or is evaluating one in another thread (two calls with
        one question need their own ``id=``), or when a threshold names no metric or is not a finite number.
        """
        __tracebackhide__ = True
        runner = self._runner
        item = runner.current_item
        defaulted = False
        if isinstance(case, EvalCase):
            model = case
        else:
            data = dict(case or {})
            data.update(fields)
            defaulted = "id" not in data
            data.setdefault("id", question_id(data.get("question")))
            model = EvalCase.model_validate(data)
        check_thresholds(model)
        key = f"{item.nodeid}::{model.id}" if item is not None else model.id
        same = " (the same question)" if defaulted else ""
        file = item.nodeid.partition("::")[0] if item is not None else ""
        with _IN_FLIGHT.claim(key, model.id, same):  # (checked while held: a call that just ended has its record kept)
            if key in runner.handwritten_keys(item):
                raise ValueError(
                    f"evaluate(): this test already evaluated a case with id {model.id!r}{same}; give each call its own id="
                )
            record = runner.evaluate_handwritten(
                evaluate_case(
                    model,
                    self.rag_client,
                    runner.opts,
                    runner.setup.thresholds_for(model),
                    key=key,
                    file=file,
                    line=0,
                    judge=self.judge,
                )
            )
        if record.get("error"):
            raise EvaluateError(record)
        return CaseResult(record)


def check_thresholds(case: EvalCase) -> None:
    """ValueError, as for an eval-set line, when a threshold of ``case`` names no metric or its value is not of the
    metric's type (a finite number; true or false for ``abstained``): ``nan`` would switch the check off."""
    for metric, value in case.thresholds.items():
        try:
            check_metric_name(metric, "evaluate(): field 'thresholds'")
            coerce_threshold(metric, value, f"evaluate(): field 'thresholds.{metric}'")
        except ThresholdError as exc:
            raise ValueError(str(exc)) from None


@dataclass
class _InFlight:
    """The keys of the ``evaluate`` calls running now (from any thread): one key is one record."""

    keys: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextlib.contextmanager
    def claim(self, key: str, case_id: str, same: str) -> Iterator[None]:
        """Hold ``key`` while its case is evaluated; ValueError when another call holds it."""
        with self.lock:
            if key in self.keys:
                raise ValueError(
                    f"evaluate(): this test is evaluating a case with id {case_id!r}{same} in another thread right now; give each call its own id="
                )
            self.keys.add(key)
        try:
            yield
        finally:
            with self.lock:
                self.keys.discard(key)


_IN_FLIGHT = _InFlight()


def question_id(question: Any) -> str:
    """The id of an ``evaluate`` call without one: ``q-`` and 8 hex digits of its question's hash."""
    return "q-" + hashlib.sha256(str(question).encode("utf-8", "surrogatepass")).hexdigest()[:8]


class EvaluateError(RagevalError):
    """The RAG or judge call of ``evaluate`` failed: the test is reported as an error (E) with the case's reason."""

    def __init__(self, record: CaseRecord) -> None:
        failure: Any = record.get("error") or {}
        what = "judge failed" if failure.get("kind") == "judge" else f"RAG call failed ({failure.get('kind')})"
        super().__init__(f"[{record.get('test_case_id')}] {what}: {failure.get('message')}")
        self.record = record


def record_outcomes(records: Iterable[CaseRecord], test_outcome: str) -> None:
    """Each record's outcome: ``error`` when its call failed; the test's when the test did not pass; in a passing
    test, its own thresholds decide (an evaluated case that was never asserted is not simply "passed")."""
    for record in records:
        if record.get("error"):
            record["outcome"] = "error"
        elif test_outcome != "passed":
            record["outcome"] = test_outcome  # type: ignore[typeddict-item]
        else:
            misses = find_misses(record["metrics"], record["thresholds"])
            record["misses"] = [m.as_dict() for m in misses]
            record["outcome"] = "failed" if misses else "passed"


def assert_metrics(result: CaseResult, **thresholds: Any) -> None:
    """Fail the test when a metric misses its threshold.

    Without keyword thresholds, the configured thresholds of the case apply.
    ``assert_metrics(result, recall_at_k=1, latency_ms=2000, abstained=False)``.
    """
    __tracebackhide__ = True
    from pytest_rageval.report.terminal import format_failure
    from pytest_rageval.sanitize import terminal_safe

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


def assert_abstained(result: CaseResult) -> None:
    """Fail the test unless the system abstained (said it cannot answer) on this case."""
    __tracebackhide__ = True
    if result.record.get("abstained") is not True:
        raise AssertionError(f"expected the system to abstain; it answered: {shorten(result.answer, 200)}")


def assert_answered(result: CaseResult) -> None:
    """Fail the test when the system abstained on this case, or sent no answer."""
    __tracebackhide__ = True
    if result.record.get("abstained") is True:
        reason = result.record.get("abstain_reason") or result.answer
        raise AssertionError(f"expected an answer; the system abstained: {shorten(reason, 200)}")
    if not (result.answer or "").strip():
        raise AssertionError("expected an answer; the system sent an empty one")


def assert_cites(
    result: CaseResult,
    *,
    rel_path: str | None = None,
    heading_path: HeadingPath | None = None,
    doc_id: str | None = None,
) -> None:
    """Fail the test unless the answer cites a chunk of ``rel_path`` (under ``heading_path``, either form, matched
    segment by segment as gold is) or ``doc_id``: one of its references, or, when the system sends none, one of the
    top-K retrieved chunks."""
    __tracebackhide__ = True
    if rel_path is None and doc_id is None:
        raise TypeError("assert_cites needs rel_path= or doc_id=")
    references = result.record.get("references") or []
    chunks = references or result.record.get("retrieved_chunks") or []
    wanted_heading = normalize_heading_path(heading_path)

    def cites(chunk: StoredChunk) -> bool:
        if doc_id is not None and chunk.get("doc_id") != doc_id:
            return False
        if rel_path is not None and chunk.get("rel_path") != rel_path:
            return False
        return normalize_heading_path(chunk.get("heading_path"))[: len(wanted_heading)] == wanted_heading

    if any(cites(chunk) for chunk in chunks):
        return
    wanted = " > ".join([rel_path or f"doc_id {doc_id}", *wanted_heading])
    shown = ", ".join(shorten(str(c.get("rel_path") or c.get("doc_id")), 80) for c in chunks[:10]) or "none"
    if references:
        raise AssertionError(f"expected the answer to cite {wanted}; it cites: {shown}")
    raise AssertionError(f"expected a retrieved chunk of {wanted}; retrieved (top {len(chunks)}): {shown}")
