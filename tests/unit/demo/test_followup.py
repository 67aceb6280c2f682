"""The demo's conversation mode: a follow-up resolved from the subject of the earlier user turns."""

from __future__ import annotations

import pytest

from pytest_rageval.demo import ask
from pytest_rageval.demo.followup import resolve_followup, subject_of

GCP = "What is the total budget of the Gaming Catalyst Program?"


@pytest.mark.parametrize(
    ("question", "subject"),
    [
        (GCP, "Gaming Catalyst Program"),
        (
            "Who proposed the Short-Term Incentive Program and how much ARB was it allocated?",
            "Short-Term Incentive Program",
        ),
        ("How many members does the Security Council have?", "Security Council"),
        ("What did GCP spend?", "GCP"),
        ("When did its Tally vote end?", None),  # one capitalised word is no subject
        ("Who proposed it?", None),
    ],
)
def test_subject_of(question: str, subject: str | None) -> None:
    assert subject_of(question) == subject


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_a_follow_up_takes_the_subject_of_the_latest_user_turn_that_has_one() -> None:
    history = [user(GCP), {"role": "assistant", "content": "The Security Council ..."}, user("Who proposed it?")]
    assert resolve_followup("When did its Tally vote end?", history) == (
        "When did the Gaming Catalyst Program Tally vote end?"
    )
    assert resolve_followup("How are they elected?", [user("What is the Security Council?")]) == (
        "How are the Security Council elected?"
    )
    assert resolve_followup("What is the status of that proposal?", [user(GCP)]) == (
        "What is the status of the Gaming Catalyst Program?"
    )


@pytest.mark.parametrize("history", [None, [], "What is STEP?", [{"role": "assistant", "content": GCP}], [3]])
def test_without_a_subject_in_the_user_turns_the_question_stays(history: object) -> None:
    assert resolve_followup("Who proposed it?", history) == "Who proposed it?"


def test_the_demo_retrieves_a_follow_up_right_only_with_its_history() -> None:
    follow_up = "How much was allocated to it?"
    alone = ask(follow_up, {"k": 5})
    with_history = ask(follow_up, {"k": 5, "history": [user("What is the Stable Treasury Endowment Program?")]})
    assert "proposals/step.md" not in [c["rel_path"] for c in alone["debug"]["retrieved_chunks"]]
    assert "resolved_question" not in alone["debug"]
    top = with_history["debug"]["retrieved_chunks"]
    assert (top[0]["rel_path"], with_history["debug"]["resolved_question"]) == (
        "proposals/step.md",
        "How much was allocated to the Stable Treasury Endowment Program?",
    )
    assert "35,000,000 ARB" in with_history["answer"]
