"""The offline judge gives the same verdict for the same answer: what was retrieved beside it does not change a
correctness verdict, an answer ending with a colon still says something, and a question's own phrase swapped for
another in lower case is caught."""

from __future__ import annotations

import asyncio

import pytest

from pytest_rageval.judges.base import JudgeInput, Verdict
from pytest_rageval.judges.calibration_measure import SHIPPED_SET, load_set
from pytest_rageval.judges.lexical import LexicalJudge


def judge(
    metric: str,
    question: str,
    answer: str,
    contexts: list[str],
    reference: str | None = None,
    facts: tuple[str, ...] = (),
) -> Verdict:
    inp = JudgeInput(question, answer, tuple(contexts), reference_answer=reference, key_facts=facts)
    return asyncio.run(LexicalJudge().judge(metric, inp))


CORS_QUESTION = "Can allow_origins be set to ['*'] when allow_credentials is True?"
CORS_ANSWER = (
    "None of allow_origins, allow_methods and allow_headers can be set to ['*'] if allow_credentials is set to True."
)
CORS_REFERENCE = "No: with allow_credentials=True, allow_origins, allow_methods and allow_headers cannot be ['*']."
CORS_CHUNK = (
    "allow_credentials - Indicate that cookies should be supported for cross-origin requests. Defaults to False. "
    "None of allow_origins, allow_methods and allow_headers can be set to ['*'] if allow_credentials is set to True."
)
MORE_CHUNKS = [
    "allow_origins - A list of origins that should be permitted to make cross-origin requests. You can use ['*'] to allow any origin.",
    "If no origin matches, none of the CORS headers are added to the response.",
    "Simple requests: any request with an Origin header. The middleware adds the appropriate CORS headers.",
]


@pytest.mark.parametrize(
    "contexts", [[CORS_CHUNK], [CORS_CHUNK, *MORE_CHUNKS], MORE_CHUNKS, []], ids=["top-1", "top-4", "other", "none"]
)
def test_none_opening_an_answer_is_no_name_whatever_was_retrieved(contexts: list[str]) -> None:
    """top_k 4 -> 1 changed nothing in the answer; the verdict compares it with the reference only."""
    verdict = judge("correctness", CORS_QUESTION, CORS_ANSWER, contexts, CORS_REFERENCE)
    assert verdict.score == 5.0, verdict.reasoning


@pytest.mark.parametrize("ending", [":", ".", "", " :"])
def test_an_answer_ending_with_a_colon_states_what_it_says(ending: str) -> None:
    """An extractive sentence that introduced a code block the answer left out."""
    contexts = [
        "You can define tasks to be run after returning a response. You can declare them with BackgroundTasks: import it from fastapi."
    ]
    answer = "You can declare them with BackgroundTasks" + ending
    verdict = judge("groundedness", "How do I run work after returning a response?", answer, contexts)
    assert verdict.score == 5.0, verdict.reasoning
    assert [claim.rstrip(".") for claim in verdict.supported_claims] == ["You can declare them with BackgroundTasks"]


def test_a_lead_in_followed_by_its_list_is_still_no_claim() -> None:
    answer = "There are two options:\n- allow_origins\n- allow_methods"
    verdict = judge("groundedness", "Which options exist?", answer, ["Options: allow_origins and allow_methods."])
    assert verdict.supported_claims == ["allow_origins", "allow_methods"], verdict.reasoning


COOKIES = [
    "Declare cookie parameters with Cookie: import Cookie from fastapi and define them the same way as Query and Path parameters.",
    "Header parameters: import Header from fastapi and declare header parameters the same way as query parameters.",
]
COOKIE_REFERENCE = (
    "You declare cookie parameters the same way as query and path parameters, importing Cookie from fastapi."
)


@pytest.mark.parametrize(
    "answer",
    [
        "You declare header parameters the same way as query parameters, by importing Header from fastapi.",
        "Header parameters are declared the same way as query parameters.",
    ],
)
def test_the_question_phrase_swapped_in_lower_case_fails_correctness(answer: str) -> None:
    """Asked how to declare cookie parameters, an answer describing header parameters is wrong."""
    verdict = judge("correctness", "How do I declare cookie parameters?", answer, COOKIES, COOKIE_REFERENCE)
    assert verdict.score is not None and verdict.score <= 2, verdict.reasoning
    assert "where the question and the reference have 'cookie parameters'" in verdict.reasoning


@pytest.mark.parametrize(
    "answer",
    [
        "Cookie parameters are declared the same way as query and path parameters, with Cookie from fastapi.",
        "Import Cookie from fastapi and declare cookie parameters like query parameters.",
        "Declare them like query parameters, using Cookie from fastapi.",
    ],
)
def test_the_right_phrase_or_none_at_all_passes(answer: str) -> None:
    verdict = judge("correctness", "How do I declare cookie parameters?", answer, COOKIES, COOKIE_REFERENCE)
    assert verdict.score is not None and verdict.score >= 3, verdict.reasoning


def test_correctness_never_reads_the_retrieved_text_when_a_reference_exists() -> None:
    """Every labelled answer of the shipped set: the same correctness over its own chunks, another item's, none."""
    items = [item for item in load_set(SHIPPED_SET) if item.reference_answer or item.key_facts]
    differ = []
    for at, item in enumerate(items):
        other = items[(at + 7) % len(items)].contexts
        scores = {
            judge(
                "correctness", item.question, item.answer, list(contexts), item.reference_answer, item.key_facts
            ).score
            for contexts in (item.contexts, other, (), tuple(reversed(item.contexts)))
        }
        if len(scores) > 1:
            differ.append((item.id, sorted(s for s in scores if s is not None)))
    assert differ == []


@pytest.mark.parametrize("marked", ["50 _million_ ARB", "50 *million* ARB", "**50 million** ARB", "`50 million` ARB"])
@pytest.mark.parametrize("metric", ["groundedness", "correctness"])
def test_markdown_emphasis_changes_no_verdict(marked: str, metric: str) -> None:
    contexts = ["The program's budget was a hard cap of 50,000,000 ARB allocated from the DAO treasury."]
    question, reference = "How much ARB was the program allocated?", "50 million ARB"
    plain = judge(metric, question, "Its budget was capped at 50 million ARB.", contexts, reference)
    emphasised = judge(metric, question, f"Its budget was capped at {marked}.", contexts, reference)
    assert emphasised.score == plain.score == 5.0, emphasised.reasoning


def test_snake_case_names_are_no_emphasis() -> None:
    verdict = judge(
        "groundedness",
        "Which options?",
        "Set allow_origins and allow_methods.",
        ["Set allow_origins and allow_methods."],
    )
    assert verdict.score == 5.0 and verdict.supported_claims == ["Set allow_origins and allow_methods."], (
        verdict.reasoning
    )


TITANIC = [
    "RMS Titanic was operated by the White Star Line. On her maiden voyage from Southampton to New York City she struck an "
    "iceberg and sank on 15 April 1912. The rescue ship was the Carpathia, of the Cunard Line.",
]
TITANIC_REFERENCE = "On her maiden voyage, the White Star Line's Titanic struck an iceberg and sank on 15 April 1912; her wreck was found in 1985."
TITANIC_FACTS = ("iceberg", "15 April 1912")


@pytest.mark.parametrize("contexts", [TITANIC, []], ids=["retrieved", "none"])
@pytest.mark.parametrize(
    "answer, passes",
    [
        # true detail the reference does not give: no rival, whatever was retrieved
        (
            "The White Star Line's Titanic hit an iceberg on 15 April 1912; the Carpathia of the Cunard Line came to the rescue.",
            True,
        ),
        (
            "The Cunard Line's Titanic hit an iceberg on her maiden voyage and sank on 15 April 1912.",
            False,
        ),  # a name in place of one
        ("The White Star Line's Titanic hit an iceberg and sank on 15 April 1912; her wreck was found in 1986.", False),
    ],
)
def test_the_references_other_names_and_numbers_are_judged_against_it_alone(
    contexts: list[str], answer: str, passes: bool
) -> None:
    verdict = judge("correctness", "What happened to the Titanic?", answer, contexts, TITANIC_REFERENCE, TITANIC_FACTS)
    assert verdict.score is not None and (verdict.score >= 3) is passes, verdict.reasoning
