"""The definition hash of a case (what the gate compares and a resume checks): an edit of each field that defines
what the case checks changes it; tags, category, scope, metadata and the line number do not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_rageval.evaluation.evalset import load_eval_file
from pytest_rageval.evaluation.schema import CONVERSATION_FIELDS, DEFINITION_FIELDS, EvalCase, definition_hash

BASE: dict[str, Any] = {
    "id": "c",
    "question": "How long is the notice period?",
    "answerable": True,
    "reference_answer": "Four weeks.",
    "expected_key_facts": ["four weeks"],
    "gold_supports": [
        {"rel_path": "hr/leave.md", "heading_path": "# Handbook > ## Notice", "snippets": ["four weeks"]},
        {"rel_path": "hr/contract.md", "heading_path": ["Contract"]},
    ],
    "gold_doc_ids": ["POL-1"],
    "required_support_groups": [[0], [1]],
    "recency_conflict_rule": "cite_newer",
    "thresholds": {"mrr": 0.5},
    "params": {"tenant": "a"},
    "flaky": False,
    "repeat": 2,
    "skip": None,
    "xfail": None,
    "judge": True,
    "marks": ["hr"],
    "tags": ["notice"],
    "category": "factual",
    "difficulty": "easy",
    "folders": ["hr"],
    "vaults": ["main"],
    "metadata": {"owner": "hr"},
}

#: One edit per field the hash covers (several where the field has parts): name -> the edited line.
EDITS: dict[str, list[dict[str, Any]]] = {
    "question": [{"question": "How long is the notice period now?"}],
    "answerable": [{"answerable": False}],
    "reference_answer": [{"reference_answer": "Five weeks."}],
    "expected_key_facts": [{"expected_key_facts": ["five weeks"]}],
    "gold_supports": [
        {"gold_supports": [{**BASE["gold_supports"][0], "rel_path": "hr/notice.md"}, BASE["gold_supports"][1]]},
        {"gold_supports": [{**BASE["gold_supports"][0], "heading_path": "# Handbook"}, BASE["gold_supports"][1]]},
        {"gold_supports": [{**BASE["gold_supports"][0], "snippets": ["five weeks"]}, BASE["gold_supports"][1]]},
        {"gold_supports": list(reversed(BASE["gold_supports"]))},
    ],
    "gold_doc_ids": [{"gold_doc_ids": ["POL-2"]}],
    "required_support_groups": [{"required_support_groups": [[0, 1]]}],
    "recency_conflict_rule": [{"recency_conflict_rule": "cite_both"}],
    "thresholds": [{"thresholds": {"mrr": 0.6}}, {"thresholds": {"mrr": 0.5, "recall_at_k": 1}}],
    "params": [{"params": {"tenant": "b"}}, {"params": {}}],
    "flaky": [{"flaky": True}],
    "repeat": [{"repeat": 3}],
    "skip": [{"skip": "not today"}],
    "xfail": [{"xfail": "known miss"}],
    "judge": [{"judge": False}],
    "marks": [{"marks": ["hr", "slow"]}],
}

#: Fields that may change without making the case another case.
FREE = {
    "tags": ["other"],
    "category": "reasoning",
    "difficulty": "hard",
    "folders": ["it"],
    "vaults": ["old"],
    "metadata": {"owner": "it"},
}


def _hash(**changes: Any) -> str:
    return definition_hash(EvalCase.model_validate({**BASE, **changes}))


def test_an_edit_of_each_defining_field_changes_the_hash() -> None:
    assert set(EDITS) == set(DEFINITION_FIELDS), "every field the hash covers has an edit here, and only those"
    base = _hash()
    hashes = {base}
    for name, edits in EDITS.items():
        for edit in edits:
            edited = _hash(**edit)
            assert edited != base, f"editing {name} ({edit}) left the hash as it was"
            hashes.add(edited)
    assert len(hashes) == 1 + sum(map(len, EDITS.values())), "two different edits gave one hash"


def test_tags_category_scope_and_metadata_leave_the_hash() -> None:
    assert set(FREE) == set(EvalCase.model_fields) - set(DEFINITION_FIELDS) - set(CONVERSATION_FIELDS) - {"id"}
    base = _hash()
    for name, value in FREE.items():
        assert _hash(**{name: value}) == base, name


def test_the_line_number_leaves_the_hash(tmp_path: Path) -> None:
    line = json.dumps(BASE)
    (tmp_path / "first.jsonl").write_text(line + "\n")
    (tmp_path / "third.jsonl").write_text("\n// a comment\n" + line + "\n")
    first = load_eval_file(tmp_path / "first.jsonl").cases[0]
    third = load_eval_file(tmp_path / "third.jsonl").cases[0]
    assert (first.line, third.line) == (1, 3)
    assert definition_hash(first.case) == definition_hash(third.case) == _hash()


CONVERSATION: dict[str, Any] = {
    "id": "c",
    "turns": [
        {"question": "What is STEP?", "reference_answer": "a program", "gold_doc_ids": ["step"]},
        {"question": "How much was allocated to it?", "expected_key_facts": ["35,000,000 ARB"]},
        {"question": "Did its vote pass?", "thresholds": {"mrr": 1}},
    ],
}


def _conversation_hash(**changes: Any) -> str:
    return definition_hash(EvalCase.model_validate({**CONVERSATION, **changes}))


def test_every_turn_and_the_history_are_in_a_conversations_hash() -> None:
    base = _conversation_hash()
    turns: list[dict[str, Any]] = CONVERSATION["turns"]
    edits: list[dict[str, Any]] = [
        {"turns": [*turns[:2], {**turns[2], "question": "Did its Tally vote pass?"}]},
        {"turns": [turns[0], {**turns[1], "expected_key_facts": ["35 million ARB"]}, turns[2]]},
        {"turns": [*turns[:2], {**turns[2], "thresholds": {"mrr": 0.5}}]},
        {"turns": [*turns[:2], {**turns[2], "answerable": False}]},
        {"turns": turns[:2]},
        {"turns": [{**turns[0], "gold_doc_ids": ["stip"]}, *turns[1:]]},
        {"history": "reference", "turns": [{**t, "reference_answer": "r"} for t in turns]},
    ]
    hashes = {base, *(_conversation_hash(**edit) for edit in edits)}
    assert len(hashes) == 1 + len(edits)
    assert _conversation_hash(tags=["chat"], category="conversation") == base


def test_a_one_question_line_keeps_its_hash_beside_conversations() -> None:
    # the hash of a line without turns is what it was before conversations existed (baselines keep comparing it)
    assert definition_hash(EvalCase(id="a", question="q")) == definition_hash(
        EvalCase.model_validate({"id": "a", "question": "q"})
    )
    assert "turns" not in EvalCase(id="a", question="q").model_dump(mode="json", include=set(DEFINITION_FIELDS))
