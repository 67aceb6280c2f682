"""Conversation lines (``turns``, ``history``): each mistake one bad line naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_rageval.evaluation.evalset import load_eval_file
from pytest_rageval.evaluation.schema import EvalCase

DISPLAY = "eval_sets/chat.jsonl"
T1 = {"question": "What is STEP?", "reference_answer": "A program.", "gold_doc_ids": ["step-2024"]}
T2 = {"question": "How much was allocated to it?", "expected_key_facts": ["35,000,000 ARB"]}


def bad_message(tmp_path: Path, fields: dict[str, object]) -> str:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"id": "c", "question": "first"}) + "\n" + json.dumps(fields) + "\n", encoding="utf-8")
    loaded = load_eval_file(path, DISPLAY)
    assert [case.case.id for case in loaded.cases] == ["c"] and len(loaded.bad) == 1, loaded
    assert loaded.bad[0].line == 2
    return loaded.bad[0].message


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": "x", "turns": [T1, {"query": " "}]}, "field 'turns[1].query': must not be blank"),
        ({"id": "x", "turns": [T1, {}]}, "field 'turns[1].question': required field is missing"),
        (
            {"id": "x", "turns": [T1, {"question": "q", "gold_suports": []}]},
            "unknown key 'gold_suports' in 'turns[1]' (did you mean 'gold_supports'?)",
        ),
        ({"id": "x", "turns": [T1, {"question": "q", "answerable": "no"}]}, "field 'turns[1].answerable': "),
        ({"id": "x", "turns": []}, "field 'turns': List should have at least 1 item"),
        ({"id": "x", "turns": [T1], "history": "full"}, "field 'history': Input should be 'live' or 'reference'"),
        (
            {"id": "x", "turns": [T1, T2, {"question": "q"}], "history": "reference"},
            "field 'turns[1].reference_answer': required with history 'reference'",
        ),
        (
            {"id": "x", "turns": [T1], "gold_supports": [{"rel_path": "a.md"}]},
            "field 'gold_supports': a conversation sets it per turn; use turns[N].gold_supports",
        ),
        ({"id": "x", "turns": [T1], "answerable": False}, "field 'answerable': a conversation sets it per turn"),
        ({"id": "x", "question": "q", "history": "live"}, "field 'history': only a conversation"),
        ({"id": "x", "question": "another", "turns": [T1]}, "field 'question': a conversation's questions are in"),
        ({"id": "x", "turns": [T1], "params": {"history": []}}, "field 'params.history': reserved"),
    ],
)
def test_each_mistake_names_file_line_and_field(tmp_path: Path, fields: dict[str, object], message: str) -> None:
    assert bad_message(tmp_path, fields).startswith(f"{DISPLAY}:2: {message}")


def test_a_conversation_reads_its_turns_as_one_question_cases() -> None:
    case = EvalCase.model_validate(
        {"id": "c", "thresholds": {"mrr": 0.5}, "turns": [T1, {**T2, "thresholds": {"mrr": 1}}]}
    )
    assert case.question == "What is STEP?" and case.history == "live"
    first, second = case.turn_case(0), case.turn_case(1)
    assert (first.question, first.gold_doc_ids, first.reference_answer) == (
        "What is STEP?",
        ["step-2024"],
        "A program.",
    )
    assert (second.question, second.expected_key_facts, second.gold_doc_ids) == (T2["question"], ["35,000,000 ARB"], [])
    assert first.thresholds == {"mrr": 0.5} and second.thresholds == {"mrr": 1}  # the turn's own over the line's
    assert first.turns is None and second.id == "c"
    # what a run stores of the line (rageval rescore reads it back) is the same conversation
    again = EvalCase.model_validate(case.model_dump(mode="json", exclude_defaults=True))
    assert again == case
