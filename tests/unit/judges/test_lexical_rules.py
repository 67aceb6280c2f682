"""The words that decide, as a user meets them: the offline judge on the hallucinations that share most words
with the truth (one swapped name, number or polarity), and on the right answers next to them."""

from __future__ import annotations

import asyncio

import pytest

from pytest_rageval.judges.base import JudgeInput, Verdict
from pytest_rageval.judges.lexical import LexicalJudge

VICTORIAN = [
    "The Victorian era was the period of Queen Victoria's reign, from 20 June 1837 until her death on 22 January 1901."
]
BANDS = [
    "The New Pornographers are a Canadian indie rock band formed in 1997 in Vancouver.",
    "Kings of Leon is an American rock band formed in Nashville in 1999.",
]
GLASSROTH = [
    "Glassroth v. Moore was a 2003 case in which the court ordered the removal of a Ten Commandments monument."
]
LEDGERLY = ["Expenses must be submitted in Ledgerly within 30 days of purchase [POL-21]."]
TOWERS = ["The Eiffel Tower was completed in 1889. The Statue of Liberty was dedicated in 1886."]
FOLLOWILL = ["Kings of Leon are three Followill brothers and their cousin Matthew Followill."]


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


@pytest.mark.parametrize(
    "question, contexts, reference, facts, right, wrong, decided",
    [
        (
            "Which era was Queen Victoria's reign?",
            VICTORIAN,
            "The Victorian era.",
            (),
            "The Victorian era.",
            "The Baroque era.",
            "the answer has Baroque where the reference has Victorian",
        ),
        (
            "Are The New Pornographers and Kings of Leon both American rock bands?",
            BANDS,
            "No",
            (),
            "No, The New Pornographers are Canadian.",
            "Yes, both The New Pornographers and Kings of Leon are American rock bands.",
            "the answer says yes where the reference says no",
        ),
        (
            "Which case ordered the removal of the monument?",
            GLASSROTH,
            "Glassroth v. Moore",
            (),
            "Glassroth v. Moore did.",
            "Maddox and Howard v. Moore ordered its removal.",
            "the answer has Howard, Maddox where the reference has Glassroth",
        ),
        (
            "Do expenses need to be submitted in Ledgerly?",
            LEDGERLY,
            "Yes, within 30 days.",
            ("submitted in Ledgerly within 30 days",),
            "Yes: expenses must be submitted in Ledgerly within 30 days [POL-21].",
            "Expenses do not need to be submitted in Ledgerly within 30 days.",
            "negat",
        ),
        (
            "Was the Eiffel Tower or the Statue of Liberty completed first?",
            TOWERS,
            "The Statue of Liberty, in 1886.",
            ("1886",),
            "The Statue of Liberty came first.",
            "The Eiffel Tower was completed first.",
            "the answer chooses Eiffel, Tower where the reference chooses Liberty, Statue",
        ),
    ],
)
def test_a_swapped_word_fails_correctness_and_the_right_one_passes(
    question: str, contexts: list[str], reference: str, facts: tuple[str, ...], right: str, wrong: str, decided: str
) -> None:
    good = judge("correctness", question, right, contexts, reference, facts)
    bad = judge("correctness", question, wrong, contexts, reference, facts)
    assert good.score is not None and good.score >= 3, good.reasoning
    assert bad.score is not None and bad.score <= 2, bad.reasoning
    assert decided in bad.reasoning


def test_an_id_a_key_fact_names_counts_when_cited() -> None:
    verdict = judge(
        "correctness",
        "Which policy covers expenses?",
        "Expenses are due within 30 days [POL-21].",
        LEDGERLY,
        facts=("POL-21", "30 days"),
    )
    assert verdict.score == 5.0, verdict.reasoning


def test_a_negation_is_not_grounded_in_the_positive_statement() -> None:
    verdict = judge(
        "groundedness",
        "Do expenses need to be submitted?",
        "Expenses do not need to be submitted in Ledgerly within 30 days.",
        LEDGERLY,
    )
    assert verdict.score is not None and verdict.score <= 2 and "negation differs" in verdict.reasoning


def test_a_count_swapped_is_not_grounded_but_a_name_number_is_no_count() -> None:
    swapped = judge(
        "groundedness", "Who is in Kings of Leon?", "Kings of Leon are two Followill brothers and a cousin.", FOLLOWILL
    )
    assert swapped.score is not None and swapped.score <= 2 and "the answer has 2 followill" in swapped.reasoning
    apollo = judge(
        "groundedness",
        "Which mission landed first?",
        "Apollo 11 made the first crewed landing.",
        ["Apollo 11 made the first crewed landing in July 1969; Apollo 12 made the second."],
    )
    assert apollo.score == 5.0, apollo.reasoning


def test_spelled_hundreds_meet_digits() -> None:
    verdict = judge(
        "correctness", "How many days did it take?", "Four hundred days.", ["It took 400 days."], "400 days."
    )
    assert verdict.score == 5.0, verdict.reasoning


@pytest.mark.parametrize("answer", ["Use 768 dims [docs/setup.md].", "Use 768 dims [1].", "Use 768 dims."])
def test_a_cited_path_or_number_does_not_lower_correctness_without_a_reference(answer: str) -> None:
    verdict = judge("correctness", "How many dims?", answer, ["Use 768 dims."])
    assert verdict.score == 5.0, verdict.reasoning


def test_around_four_hundred_meets_about_400() -> None:
    verdict = judge(
        "correctness",
        "How many delegates came?",
        "Around four hundred delegates came.",
        ["About 400 delegates attended."],
        "about 400",
    )
    assert verdict.score == 5.0, verdict.reasoning


BRIDGE = ["The Golden Gate Bridge opened to traffic on 27 May 1937 in San Francisco, after four years of building."]


@pytest.mark.parametrize(
    "answer, grounded",
    [
        ("The Golden Gate Bridge opened on 27 May 1937 in San Francisco.", True),
        ("The Golden Gate Bridge was not opened until 27 May 1937.", True),  # "not ... until" states when it opened
        ("It took no longer than four years to build the Golden Gate Bridge, which opened on 27 May 1937.", True),
        ("No. The Golden Gate Bridge opened on 27 May 1937.", True),  # a bare "No." is a polarity, not a claim
        ("The Golden Gate Bridge did not open on 27 May 1937 in San Francisco.", False),  # the text's own verb, negated
        (
            "The Golden Gate Bridge was never inaugurated on 27 May 1937 in San Francisco.",
            False,
        ),  # another verb, denied
    ],
)
def test_a_clause_denied_as_a_whole_contradicts_the_text_and_not_until_does_not(answer: str, grounded: bool) -> None:
    verdict = judge("groundedness", "When did the Golden Gate Bridge open?", answer, BRIDGE)
    assert verdict.score is not None and (verdict.score >= 3) is grounded, verdict.reasoning
    if not grounded:
        assert "contradicted" in verdict.reasoning


def test_a_denial_meets_one_statement_not_a_sentence_that_shares_its_names_out() -> None:
    """True: the prize went to the others, in one statement; what is said of Franklin is another."""
    prize = ["Watson, Crick and Wilkins received the Nobel Prize in 1962; Franklin had died in 1958."]
    verdict = judge(
        "groundedness", "Did Franklin share the prize?", "Franklin did not share the 1962 Nobel Prize.", prize
    )
    assert verdict.score is not None and verdict.score >= 3, verdict.reasoning
    wrong = judge(
        "groundedness", "Who received the prize?", "Watson and Crick were not awarded the 1962 Nobel Prize.", prize
    )
    assert wrong.score is not None and wrong.score <= 2 and "denies" in wrong.reasoning, wrong.reasoning


@pytest.mark.parametrize(
    "answer",
    [
        "The falls drop nine hundred and seventy-nine metres in all.",
        "Two thousand five hundred visitors came, and the falls drop 979 metres.",
    ],
)
def test_a_number_written_in_words_is_one_number(answer: str) -> None:
    falls = ["Angel Falls has a total height of 979 metres. It had 2,500 visitors that year."]
    verdict = judge("groundedness", "How high are the falls?", answer, falls)
    assert verdict.score == 5.0, verdict.reasoning


SCHOOL = [
    "Carle Place Middle/High School is a public high school in the hamlet of Carle Place in Nassau County, New York."
]
RANGERS = ["Kimberly Ann Hart is a character played by actress Amy Jo Johnson during the first three seasons."]
BEER = ["The Reinheitsgebot is a series of regulations limiting the ingredients in beer in Germany."]


@pytest.mark.parametrize(
    "question, contexts, reference, right, wrong, decided",
    [
        (  # a name opening the answer is a name too
            "In which New York county is the sister school?",
            SCHOOL,
            "Nassau County",
            "Nassau, New York.",
            "Suffolk County is the sister school's location.",
            "the answer has Suffolk where the reference has Nassau",
        ),
        (  # the reference's words, in an order no text writes: someone else
            "Which actress played Kimberly Ann Hart?",
            RANGERS,
            "Amy Jo Johnson",
            "Kimberly was played by Amy Jo Johnson.",
            "Kimberly was played by Amy Johnson.",
            "the answer names 'Amy Johnson' where the reference names 'Amy Jo Johnson'",
        ),
        (  # beside the place is not in it
            "In which US state was the squadron based?",
            ["The squadron was based at McClellan Air Force Base, located near Sacramento, California."],
            "California",
            "It was based in California.",
            "It was based at McClellan Air Force Base, which was located near California.",
            "the answer has 'near California' where the reference has California",
        ),
        (  # a reference of a few common words: each of them is the answer
            "What does the brewery have to limit to comply with German regulations?",
            BEER,
            "ingredients in beer",
            "It must limit the ingredients of its beer.",
            "The brewery must limit their beer's purity.",
            "so short a reference: each word counts",
        ),
    ],
)
def test_a_short_reference_is_met_word_for_word(
    question: str, contexts: list[str], reference: str, right: str, wrong: str, decided: str
) -> None:
    good = judge("correctness", question, right, contexts, reference)
    bad = judge("correctness", question, wrong, contexts, reference)
    assert good.score is not None and good.score >= 3, good.reasoning
    assert bad.score is not None and bad.score < 3, bad.reasoning
    assert decided in bad.reasoning


@pytest.mark.parametrize(
    "answer, reference, correct",
    [("No.", "no", True), ("yes", "yes", True), ("Yes.", "no", False), ("no", "yes", False)],
)
def test_a_bare_yes_or_no_is_grounded_and_its_polarity_decides(answer: str, reference: str, correct: bool) -> None:
    question = "Are The New Pornographers and Kings of Leon both American rock bands?"
    grounded = judge("groundedness", question, answer, BANDS, reference)
    assert grounded.score == 5.0 and "bare yes/no" in grounded.reasoning, grounded.reasoning
    verdict = judge("correctness", question, answer, BANDS, reference)
    assert verdict.score is not None and (verdict.score >= 3) is correct, verdict.reasoning


HANDBOOK = [
    "Employees submit expenses in Ledgerly within 30 days of purchase [POL-21]. Time off is requested in Rota at least two weeks ahead [POL-08]."
]


@pytest.mark.parametrize("facts", [("expenses in Ledgerly", "time off in Rota"), ()])
def test_two_names_traded_between_facts_are_a_contradiction(facts: tuple[str, ...]) -> None:
    question = "Where do I submit expenses and where do I request time off?"
    reference = "Expenses in Ledgerly, time off in Rota."
    for right in (
        "Submit expenses in Ledgerly [POL-21] and request time off in Rota [POL-08].",
        "Expenses go through Ledgerly (POL-21); for leave, use Rota.",
    ):
        good = judge("correctness", question, right, HANDBOOK, reference, facts)
        assert good.score is not None and good.score >= 3, good.reasoning
    bad = judge(
        "correctness", question, "Submit expenses in Rota and request time off in Ledgerly.", HANDBOOK, reference, facts
    )
    assert bad.score is not None and bad.score <= 2, bad.reasoning
    assert "the answer puts Rota with expenses and Ledgerly with time, the other way round" in bad.reasoning, (
        bad.reasoning
    )


@pytest.mark.parametrize(
    "answer, passes",
    [
        ("Submit them in Ledgerly within 30 days [POL-21].", True),
        ("Submit them in Ledgerly within 30 days.", True),  # the source left uncited: no name swapped
        ("Submit them in Ledgerly within 30 days [POL-22].", False),
        ("Submit them in Ledgerly within 30 days (see POL-22).", False),
    ],
)
def test_an_id_the_reference_names_is_a_fact_and_another_id_of_its_kind_contradicts_it(
    answer: str, passes: bool
) -> None:
    handbook = [*LEDGERLY, "Receipts over 800 EUR need a manager's approval [POL-22]."]
    verdict = judge(
        "correctness", "How long do I have to submit expenses?", answer, handbook, "Within 30 days, per POL-21."
    )
    assert verdict.score is not None and (verdict.score >= 3) is passes, verdict.reasoning
    if not passes:
        assert "the answer names POL-22 where the reference names POL-21" in verdict.reasoning


def test_a_clause_denied_as_a_whole_contradicts_a_reference_without_its_verb() -> None:
    question = "Where and when do I submit expenses?"
    wrong = judge(
        "correctness",
        question,
        "Expenses do not need to be submitted in Ledgerly within 30 days.",
        LEDGERLY,
        "In Ledgerly within 30 days (POL-21).",
    )
    assert (
        wrong.score is not None
        and wrong.score <= 2
        and "the answer denies what the reference states" in wrong.reasoning
    ), wrong.reasoning
    right = judge(
        "correctness",
        question,
        "In Ledgerly, within 30 days; receipts are not needed under 10 EUR.",
        LEDGERLY,
        "In Ledgerly within 30 days (POL-21).",
    )
    assert right.score is not None and right.score >= 3, right.reasoning


MAGAZINES = ["Time was first published in March 1923 in New York. The New Yorker first appeared in February 1925."]


@pytest.mark.parametrize(
    "answer, passes",
    [
        ("Time was started first, in 1923, two years ahead of The New Yorker.", True),
        ("Time came first; The New Yorker followed in 1925.", True),
        ("The New Yorker was started first, with its first issue in February 1925, ahead of Time.", False),
    ],
)
def test_an_answer_naming_both_options_chooses_the_one_its_first_clause_names(answer: str, passes: bool) -> None:
    question = "Which magazine was started first, Time or The New Yorker?"
    verdict = judge("correctness", question, answer, MAGAZINES, "Time")
    assert verdict.score is not None and (verdict.score >= 3) is passes, verdict.reasoning
    if not passes:
        assert "the answer chooses New, Yorker where the reference chooses Time" in verdict.reasoning, verdict.reasoning
