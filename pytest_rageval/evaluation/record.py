"""The case record: the one shape of a results.jsonl line (docs/internals.md, "CaseRecord").

A record is made by the runner (one eval-set case, or one ``evaluate()`` call of
a hand-written test), travels on the test report to the controller, and is
written one per line to results.jsonl; ``rageval judge``, ``merge`` and
``report`` read it back. Every value is a JSON value. The outcomes and the
error kinds a record may hold are the ``Literal`` types below: an error is made
only by :func:`error`, so a kind outside :data:`ErrorKind` is a type error.

Pure: no I/O, no pytest.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, get_args

from .stored_chunk import StoredChunk

__all__ = [
    "CALL_ERROR_KINDS",
    "ERROR_KINDS",
    "OUTCOMES",
    "CallErrorKind",
    "CaseError",
    "CaseRecord",
    "Cost",
    "ErrorKind",
    "JudgeCacheCount",
    "JudgeInputRecord",
    "Latency",
    "MissRecord",
    "Outcome",
    "Stability",
    "TurnRecord",
    "error",
]

#: A repeated case's class by its runs' verdicts (stability.classify): every run passed, some did, none did.
Stability = Literal["stable_pass", "flaky", "stable_fail"]

#: How a case ended, as pytest reports it (``error`` also when the RAG or judge call failed).
Outcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]

#: What an ``error`` is about. The first five (:data:`CallErrorKind`) come from the call to the system under test
#: (``client.RagCallError``): ``timeout``, ``http`` (a status that is not 2xx), ``connection``,
#: ``invalid_response`` (a body that is not an answer), ``target`` (a callable target raised);
#: ``judge``: the judge failed (retrieval metrics kept, ``rageval judge`` completes the case);
#: ``other``: the test errored outside the case's own calls (a fixture, a conftest hook);
#: ``invalid_line``: the eval-set line could not be read; ``unwritable``: the record could not be
#: written as JSON and the fields named in the message were left out.
CallErrorKind = Literal["timeout", "http", "connection", "invalid_response", "target"]
ErrorKind = Literal[CallErrorKind, "judge", "other", "invalid_line", "unwritable"]

OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
ERROR_KINDS: tuple[ErrorKind, ...] = get_args(ErrorKind)
CALL_ERROR_KINDS: tuple[CallErrorKind, ...] = get_args(CallErrorKind)


class CaseError(TypedDict):
    """A record's ``error``: its kind and one readable line."""

    kind: ErrorKind
    message: str


def error(kind: ErrorKind, message: str) -> CaseError:
    """The ``error`` of a record; every error a record holds is made here (the kind is checked by type)."""
    return {"kind": kind, "message": message}


class _MissFields(TypedDict):
    metric: str
    value: Any
    threshold: Any
    op: str  # ">=", "<=" or "=="


class MissRecord(_MissFields, total=False):
    """A threshold a case missed (``thresholds.Miss.as_dict``); a conversation's names its ``turn`` (1-based)."""

    turn: int


class JudgeCacheCount(TypedDict):
    hits: int
    misses: int


class Cost(TypedDict):
    judge_tokens: int
    judge_cost_usd: float


class JudgeInputRecord(TypedDict, total=False):
    """What the judge saw (the answer is not repeated: re-judging reads the record's ``answer``)."""

    question: str
    context_chunk_ids: list[Any]
    context_chunks_truncated: list[str]
    contexts: list[str]  # only with full text stored


#: ``{"total_ms": float, "<phase>_ms": float, ...}``
Latency = dict[str, float]


class TurnRecord(TypedDict, total=False):
    """One turn of a conversation (``CaseRecord.turns``): what a one-question case's record holds of its question,
    response, metrics and verdicts (engine/conversation.py ``TURN_KEYS``), its number and the history it was sent."""

    turn: int  # 1-based
    history: list[dict[str, str]]  # [{"role": "user" | "assistant", "content": str}], the earlier turns in order
    question: str
    answerable: bool
    reference_answer: str | None
    expected_key_facts: list[str]
    outcome: Literal["passed", "failed", "error"]
    error: CaseError | None
    metrics: dict[str, Any]
    thresholds: dict[str, Any]
    misses: list[MissRecord]
    answer: str
    abstained: bool | None
    abstain_reason: str | None
    empty_response: bool
    selected_folders: Any
    retrieved_chunks: list[StoredChunk]
    references: list[StoredChunk]
    expected_gold: list[dict[str, Any]]
    latency: Latency
    judge: dict[str, dict[str, Any]]
    judge_input: JudgeInputRecord
    judge_attempted: list[str]
    notes: list[str]
    warnings: list[str]
    trace: dict[str, Any]
    runs: int
    stability: Stability
    repeats: list[dict[str, Any]]
    shown_run: int


class CaseRecord(TypedDict, total=False):
    """One results.jsonl line. Keys are optional (an invalid-line record has a few; a case that errored
    before the RAG answered has no ``answer``); the types say what a key holds when it is there."""

    # the eval-set line
    key: str  # the item's node id, unique in a run
    test_case_id: str
    definition: str  # schema.definition_hash: what the case checks (the gate compares cases whose definition held)
    file: str
    line: int
    category: str | None
    tags: list[str]
    difficulty: str | None
    answerable: bool
    recency_conflict_rule: Any
    question: str
    reference_answer: str | None
    expected_key_facts: list[str]
    params: dict[str, Any]
    metadata: dict[str, Any]
    invalid_line: bool  # true only for an eval-set line that could not be read (outcome "error")
    # a conversation (a line with turns): the history its turns were sent ("live" or "reference") and each turn's
    # record; its metrics are then the means over the turns, its misses name their turn, its answer is the last one
    history: str
    turns: list[TurnRecord]
    # the config matrix (only when one is set): the item's params, e.g. {"alpha": 0.5, "top_k": 10},
    # and its id "alpha=0.5-top_k=10" (the node id's brackets)
    matrix: dict[str, Any]
    config_id: str
    # the verdict
    outcome: Outcome | None  # None only while the case runs
    error: CaseError | None
    metrics: dict[str, Any]  # metric name -> number, bool ("abstained") or null
    thresholds: dict[str, Any]
    misses: list[MissRecord]
    # with a baseline, how the case stands against it (gate/known.py): {"kind": "known" | "worse" | "fixed", "text"};
    # a known failure's outcome is "xfailed", its text the xfail reason
    since_baseline: dict[str, str]
    warnings: list[str]
    notes: list[str]
    # what the RAG system sent
    answer: str
    abstained: bool | None
    abstain_reason: str | None
    empty_response: bool
    selected_folders: Any
    retrieved_chunks: list[StoredChunk]  # the top K, in rank order
    references: list[StoredChunk]
    expected_gold: list[
        dict[str, Any]
    ]  # each gold item, {"anchor": "rel_path > heading" or "doc_id X", "found": in top K}
    latency: Latency
    # the judge
    judge: dict[str, dict[str, Any]]  # metric -> verdict dict
    judge_input: JudgeInputRecord
    judge_attempted: list[str]
    judge_cache: JudgeCacheCount
    cost: Cost
    spot_check: dict[str, Any]
    spot_input: dict[str, Any]  # handed to the spot check; never written
    # with --rageval-store-full-text only: what `rageval rescore` needs (runner.case_trace):
    # {"k", "require_snippets", "case": the eval-set line as read, "rag_abstained": the RAG's own flag}
    trace: dict[str, Any]
    # repeated cases
    runs: int
    flaky: bool  # some runs passed, some did not (stability == "flaky"); kept for older readers
    stability: Stability  # repeated cases only (stability.classify)
    repeats: list[
        dict[str, Any]
    ]  # per run: {"passed": bool, "metrics": {...}} (+ "trace": runner.run_trace, with full text)
    shown_run: int  # 1-based run whose answer, retrieval, verdicts and misses the record shows
    # the documented keys, derived when the record is written (artifacts.with_seed_keys)
    retrieval_metrics: dict[str, Any]
    groundedness: dict[str, Any]
    correctness: dict[str, Any]
    abstention: dict[str, bool | None]
    config: dict[str, Any]
