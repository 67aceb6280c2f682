"""A conversation case (an eval-set line with ``turns``): asked turn by turn, each turn scored as a case of its own.

Turn N is sent the history so far, ``[{"role": "user" | "assistant", "content": str}, ...]`` (the earlier turns in
order), under the request parameter ``history``: with ``history: live`` the assistant contents are the target's
own earlier answers, with ``reference`` the earlier turns' reference answers. Each turn is evaluated by the very
code of a one-question case (``evaluate.evaluate_case``, handed in as ``ask_turn``), so every per-case metric,
judge verdict and threshold holds per turn. The conversation's record keeps each turn's record under ``turns``;
the case fails when any turn fails (its ``misses`` name the turn). A turn that fails its thresholds does not stop
the conversation: the later turns are still asked (with ``live`` history, after the failing answer, as a user of
the assistant would go on). A turn whose call errors ends it: the case is an error naming the turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from pytest_rageval.evaluation import stability
from pytest_rageval.evaluation.record import CaseRecord, TurnRecord, error
from pytest_rageval.evaluation.schema import EvalCase

__all__ = [
    "HISTORY_PARAM",
    "TURN_KEYS",
    "conversation_metrics",
    "evaluate_conversation",
    "history_after",
    "summarise_turns",
]

#: The request parameter a turn's history is sent under (a request map may rename it).
HISTORY_PARAM = "history"

#: What a turn's record keeps of the one-question record it was evaluated as (in this order).
TURN_KEYS = (
    "question",
    "answerable",
    "reference_answer",
    "expected_key_facts",
    "outcome",
    "error",
    "metrics",
    "thresholds",
    "misses",
    "answer",
    "abstained",
    "abstain_reason",
    "empty_response",
    "selected_folders",
    "retrieved_chunks",
    "references",
    "expected_gold",
    "latency",
    "judge",
    "judge_input",
    "judge_attempted",
    "notes",
    "warnings",
    "trace",
    "runs",
    "stability",
    "repeats",
    "shown_run",
)

AskTurn = Callable[[EvalCase, Mapping[str, Any]], Awaitable[CaseRecord]]


def history_after(case: EvalCase, turns: list[TurnRecord]) -> list[dict[str, str]]:
    """The history the next turn is sent: each earlier turn's question and its answer (the target's own with
    ``live`` history, the turn's reference answer with ``reference``)."""
    assert case.turns is not None
    messages: list[dict[str, str]] = []
    for spec, done in zip(case.turns, turns):
        answer = spec.reference_answer if case.history == "reference" else done.get("answer")
        messages.append({"role": "user", "content": spec.question})
        messages.append({"role": "assistant", "content": answer or ""})
    return messages


async def evaluate_conversation(
    case: EvalCase, record: CaseRecord, params: Mapping[str, Any], ask_turn: AskTurn
) -> CaseRecord:
    """Fill ``record`` (the conversation's base record) by asking each turn of ``case`` through ``ask_turn``."""
    assert case.turns is not None
    turns: list[TurnRecord] = []
    record["history"] = case.history
    record["turns"] = turns
    for index in range(len(case.turns)):
        sent = history_after(case, turns)
        turn_record = await ask_turn(case.turn_case(index), {**params, HISTORY_PARAM: sent})
        kept: dict[str, Any] = {"turn": index + 1, "history": sent}
        kept.update((name, value) for name, value in turn_record.items() if name in TURN_KEYS)
        turn = cast(TurnRecord, kept)
        turn["outcome"] = "error" if turn_record.get("error") else "failed" if turn_record.get("misses") else "passed"
        turns.append(turn)
        _add_spend(record, turn_record)
        failed = turn_record.get("error")
        if failed:
            message = f"turn {index + 1} ({_short(case.turns[index].question)}): {failed['message']}"
            record["error"] = error(failed["kind"], message)
            break
    _summarise(record, turns)
    return record


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _add_spend(record: CaseRecord, turn: CaseRecord) -> None:
    """The turn's judge tokens, cost and cache counts added to the conversation's."""
    cost, turn_cost = record["cost"], turn.get("cost") or {"judge_tokens": 0, "judge_cost_usd": 0.0}
    cost["judge_tokens"] += turn_cost["judge_tokens"]
    cost["judge_cost_usd"] += turn_cost["judge_cost_usd"]
    cache, turn_cache = record["judge_cache"], turn.get("judge_cache") or {"hits": 0, "misses": 0}
    cache["hits"] += turn_cache["hits"]
    cache["misses"] += turn_cache["misses"]


def _summarise(record: CaseRecord, turns: list[TurnRecord]) -> None:
    """The conversation's own fields from its turns: misses (each naming its turn), metrics (each the mean over
    the turns that scored it; ``abstained`` true when any turn abstained), the last answer, the total latency."""
    record["misses"] = [{**miss, "turn": turn["turn"]} for turn in turns for miss in turn.get("misses") or []]
    record["metrics"] = conversation_metrics(turns)
    record["abstained"] = record["metrics"].get("abstained")
    if turns and "answer" in turns[-1]:
        record["answer"] = turns[-1]["answer"]
    record["latency"] = {"total_ms": sum(float((t.get("latency") or {}).get("total_ms") or 0.0) for t in turns)}
    notes = [f"turn {t['turn']}: {note}" for t in turns for note in t.get("notes") or []]
    record["notes"] = notes[:20]
    attempted = [name for t in turns for name in t.get("judge_attempted") or []]
    if attempted:
        record["judge_attempted"] = list(dict.fromkeys(attempted))
    _repeats(record, turns)


def summarise_turns(record: dict[str, Any]) -> None:
    """A stored conversation's own fields again from its turns, after they were judged again: the judge's spend
    (summed), misses, metrics, the first turn error (naming its turn) and the outcome."""
    turns = [t for t in record.get("turns") or [] if isinstance(t, dict)]
    record["cost"] = {"judge_tokens": 0, "judge_cost_usd": 0.0}
    record["judge_cache"] = {"hits": 0, "misses": 0}
    for turn in turns:
        _add_spend(cast(CaseRecord, record), turn)  # type: ignore[arg-type]
        turn.pop("cost", None)
        turn.pop("judge_cache", None)
    record["error"] = None
    for turn in turns:
        failed = turn.get("error")
        if isinstance(failed, Mapping):
            message = f"turn {turn.get('turn')} ({_short(str(turn.get('question') or ''))}): {failed.get('message')}"
            record["error"] = error(failed.get("kind") or "judge", message)
            break
    _summarise(cast(CaseRecord, record), cast(list[TurnRecord], turns))
    old = record.get("outcome")
    if record["error"] is not None:
        record["outcome"] = "error"
    elif old in ("xfailed", "xpassed"):
        record["outcome"] = "xfailed" if record["misses"] else "xpassed"
    else:
        record["outcome"] = "failed" if record["misses"] else "passed"


def _repeats(record: CaseRecord, turns: list[TurnRecord]) -> None:
    """A repeated conversation's runs (its turns were each run as often): run N passed when every turn passed its
    run N, with the means over the turns of that run's metrics; the conversation's class follows from them."""
    runs = [turn.get("repeats") or [] for turn in turns]
    if not turns or min(len(r) for r in runs) < 2:
        return
    count = min(len(r) for r in runs)
    record["repeats"] = [
        {
            "passed": all(bool(r[i].get("passed")) for r in runs),
            "metrics": conversation_metrics([{"metrics": r[i].get("metrics") or {}} for r in runs]),
        }
        for i in range(count)
    ]
    record["runs"] = count
    klass = stability.classify([run["passed"] for run in record["repeats"]])
    if klass is not None:
        record["stability"] = klass
        record["flaky"] = klass == "flaky"


def conversation_metrics(turns: list[TurnRecord]) -> dict[str, Any]:
    """A conversation's metrics: per metric the mean over the turns that scored it (null when none did), and for
    a true/false metric (``abstained``) whether any turn's was true."""
    names = list(dict.fromkeys(name for turn in turns for name in turn.get("metrics") or {}))
    out: dict[str, Any] = {}
    for name in names:
        values = [v for t in turns if (v := (t.get("metrics") or {}).get(name)) is not None]
        if not values:
            out[name] = None
        elif all(isinstance(v, bool) for v in values):
            out[name] = any(values)
        else:
            out[name] = sum(float(v) for v in values) / len(values)
    return out
