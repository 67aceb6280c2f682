"""The offline lexical judge on seed 000's worked example (SPEC section 6, ``lexical``)."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_rageval.judges.base import ALL_METRICS, CLASSIFIERS, SCALES, Judge, JudgeError, JudgeInput, Verdict
from pytest_rageval.judges.judge_check import CALIBRATION_CASES
from pytest_rageval.judges.lexical import (
    CONTRADICTION_CAP,
    LEXICAL_METRICS,
    LexicalJudge,
    content_tokens,
    is_refusal,
    split_claims,
)

# --------------------------------------------------------------------------- seed 000

STIP = CALIBRATION_CASES[0]  # seed 000's question, three chunks, faithful and hallucinated answers
QUESTION = STIP.question
CONTEXTS = STIP.contexts
CHUNK_TALLY, CHUNK_SNAPSHOT, CHUNK_FORUM = CONTEXTS
FAITHFUL = STIP.faithful_answer
HALLUCINATED = STIP.hallucinated_answer
REFERENCE = (
    "The STIP proposal was proposed by the Arbitrum Foundation. Its current status is 'executed' "
    "\u2014 it passed the Tally on-chain vote after clearing the Snapshot temperature check."
)
KEY_FACTS = ("Arbitrum Foundation", "executed", "50 million ARB")


def judge(metric: str, answer: str, **kw: object) -> Verdict:
    """One lexical verdict over seed 000's question and contexts (overridable)."""
    fields: dict[str, object] = {"question": QUESTION, "answer": answer, "contexts": CONTEXTS, **kw}
    return asyncio.run(LexicalJudge().judge(metric, JudgeInput(**fields)))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- protocol


def test_describe_and_supports() -> None:
    j: Judge = LexicalJudge()  # checked statically: Judge is not runtime_checkable
    assert j.name == "lexical" and j.heuristic is True
    info = j.describe()
    assert info == {
        "name": "lexical",
        "model": "lexical-heuristic",
        "base_url": None,
        "prompt_versions": {m: "lexical/v9" for m in LEXICAL_METRICS},
        "temperature": 0.0,
        "seed": None,
        "json_mode": None,
        "heuristic": True,
    }
    assert {m for m in ALL_METRICS if j.supports(m)} == set(ALL_METRICS) - {"reasoning_quality"}
    assert not j.supports("nonsense")
    assert asyncio.run(j.aclose()) is None


def test_reasoning_quality_raises_judge_error() -> None:
    with pytest.raises(JudgeError, match="the lexical judge does not score reasoning_quality") as info:
        judge("reasoning_quality", FAITHFUL)
    assert info.value.metric == "reasoning_quality"


@pytest.mark.parametrize("metric", LEXICAL_METRICS)
@pytest.mark.parametrize("answer", [FAITHFUL, HALLUCINATED, "", "I don't know."])
def test_every_verdict_is_a_costless_heuristic_on_scale(metric: str, answer: str) -> None:
    v = judge(metric, answer, key_facts=KEY_FACTS, reference_answer=REFERENCE)
    assert v.metric == metric
    assert v.reasoning.endswith("(heuristic)")
    assert (v.prompt_tokens, v.completion_tokens, v.cost_usd) == (0, 0, 0.0)
    raw = json.loads(v.raw)
    assert raw["metric"] == metric
    assert v.raw == json.dumps(raw, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    if metric in CLASSIFIERS:
        assert v.score is None and isinstance(v.label, bool)
    else:
        low, high = SCALES[metric]
        assert v.score is not None and low <= v.score <= high


@pytest.mark.parametrize("metric", LEXICAL_METRICS)
def test_deterministic(metric: str) -> None:
    first = judge(metric, HALLUCINATED, key_facts=KEY_FACTS, reference_answer=REFERENCE)
    again = asyncio.run(
        LexicalJudge().judge(
            metric,
            JudgeInput(QUESTION, HALLUCINATED, CONTEXTS, key_facts=KEY_FACTS, reference_answer=REFERENCE),
            repeat_index=3,
        )
    )
    assert first == again


# --------------------------------------------------------------------------- groundedness / faithfulness


def test_faithful_answer_is_grounded() -> None:
    v = judge("groundedness", FAITHFUL)
    assert v.score is not None and v.score >= 4
    assert v.unsupported_claims == []
    assert len(v.supported_claims) == 3
    assert v.reasoning.startswith("3 of 3 claims share >=50% of their words with the retrieved text")
    f = judge("faithfulness", FAITHFUL)
    assert (f.score, f.label) == (1.0, True)


def test_hallucinated_answer_is_not_grounded() -> None:
    v = judge("groundedness", HALLUCINATED)
    assert v.score is not None and v.score <= 1
    assert v.supported_claims == []
    assert "It was vetoed by the Security Council." in v.unsupported_claims
    assert any("Offchain Labs" in claim and "100 million" in claim for claim in v.unsupported_claims)
    f = judge("faithfulness", HALLUCINATED)
    assert (f.score, f.label) == (0.0, False)
    assert "It was vetoed by the Security Council." in f.unsupported_claims


def test_a_wrong_number_makes_a_claim_unsupported() -> None:
    right = judge("groundedness", "The STIP program allocated 50 million ARB tokens.")
    wrong = judge("groundedness", "The STIP program allocated 70 million ARB tokens.")
    assert (right.score, wrong.score) == (5.0, 0.0)


def test_mixed_answer_scores_in_between() -> None:
    v = judge(
        "groundedness",
        "The STIP proposal was authored by the Arbitrum Foundation. It was vetoed by the Security Council.",
    )
    assert v.score == 2.5
    assert v.unsupported_claims == ["It was vetoed by the Security Council."]
    assert judge("faithfulness", v.supported_claims[0] + " It was vetoed by the Security Council.").label is False


def test_claims_are_supported_across_chunks_but_not_without_context() -> None:
    assert judge("groundedness", FAITHFUL, contexts=(CHUNK_TALLY, CHUNK_FORUM)).score == pytest.approx(3.3)
    empty = judge("groundedness", FAITHFUL, contexts=())
    assert empty.score == 0.0 and "no retrieved context" in empty.reasoning


def test_empty_answer_has_no_claims() -> None:
    v = judge("groundedness", "  \n")
    assert v.score == 0.0
    assert v.reasoning == "empty answer: no claims to check (heuristic)"


def test_claims_ignore_citations_and_split_bullets() -> None:
    answer = (
        "Here is what I found:\n"
        "- The STIP proposal was executed [1].\n"
        "- It allocated 50 million ARB tokens (source: forum post); delegates raised concerns.\n\n"
        "Sources: [1] tally.md"
    )
    assert split_claims(answer) == [
        "The STIP proposal was executed.",
        "It allocated 50 million ARB tokens",
        "delegates raised concerns.",
    ]
    assert judge("groundedness", answer).score == 5.0


def test_tokens_keep_numbers_and_normalise_words() -> None:
    tokens = content_tokens("The Foundation's proposals were voted on 2023-11-15 (ID 47832).")
    assert {"2023", "november", "15", "47832"} <= tokens  # an ISO date meets "November 15, 2023"
    assert content_tokens("proposal") <= tokens and content_tokens("voting") <= tokens
    assert not tokens & {"the", "were", "on"}


# --------------------------------------------------------------------------- correctness / completeness


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (FAITHFUL, 5.0),
        ("The STIP proposal has been executed.", 1.7),
        (HALLUCINATED, 0.0),
    ],
)
def test_correctness_with_key_facts(answer: str, expected: float) -> None:
    v = judge("correctness", answer, key_facts=KEY_FACTS)
    assert v.score == expected
    completeness = judge("completeness", answer, key_facts=KEY_FACTS)
    assert completeness.score == pytest.approx(expected / 5, abs=0.01)


def test_correctness_partial_names_missing_facts() -> None:
    v = judge("correctness", "The STIP proposal has been executed.", key_facts=KEY_FACTS)
    assert 0 < v.score < 5  # type: ignore[operator]
    assert "1 of 3 key facts" in v.reasoning and "Arbitrum Foundation" in v.reasoning


def test_correctness_with_reference_answer() -> None:
    good = judge("correctness", FAITHFUL, reference_answer=REFERENCE)
    bad = judge("correctness", HALLUCINATED, reference_answer=REFERENCE)
    same = judge("correctness", REFERENCE, reference_answer=REFERENCE)
    assert same.score == 5.0
    assert good.score >= 3 > bad.score  # type: ignore[operator]
    assert "of the reference answer's content words" in good.reasoning
    # with key facts, the key facts decide: a longer or shorter wording of the reference costs nothing
    both = judge("correctness", FAITHFUL, reference_answer=REFERENCE, key_facts=KEY_FACTS)
    assert both.score == 5.0 and both.reasoning.startswith("3 of 3 key facts present")


def test_correctness_fallback_says_so() -> None:
    v = judge("correctness", FAITHFUL)
    assert v.score is not None and v.score >= 4
    assert v.reasoning.startswith("no reference answer or key facts")
    assert judge("correctness", "I don't know.").score == 0.0
    assert judge("correctness", "").reasoning == "empty answer (heuristic)"


def test_completeness_without_key_facts_uses_the_question() -> None:
    assert judge("completeness", FAITHFUL).score == pytest.approx(0.667)
    assert judge("completeness", "Bananas are yellow.").score == 0.0
    assert judge("completeness", "I could not find the STIP proposal status.").score == 0.0


# --------------------------------------------------------------------------- relevancy


def test_relevancy() -> None:
    on_topic = judge("relevancy", FAITHFUL)
    assert (on_topic.score, on_topic.label) == (1.0, True)
    assert judge("relevancy", HALLUCINATED).label is True  # on topic, however wrong (seed 000 scenario A)
    assert judge("relevancy", "The Treasury Management proposal is in the Snapshot phase.").label is False
    refusal = judge("relevancy", "I could not find the status of the STIP proposal.")
    assert (refusal.score, refusal.label) == (0.0, False)
    assert "refusal" in refusal.reasoning


# --------------------------------------------------------------------------- abstention


@pytest.mark.parametrize(
    "answer",
    [
        "I could not find this in the notes.",
        "The notes do not mention it",
        "I don't know.",
        "I\u2019m not sure which proposal you mean.",
        "There is no information about the STIP in the provided context.",
        "Not enough information to answer.",
        "I am unable to answer that.",
        "I can't answer that from the documents.",
        "The context has insufficient information.",
        "The budget is not mentioned in the documents.",
        "No relevant documents were retrieved.",
        "",
        "   ",
    ],
)
def test_refusals(answer: str) -> None:
    assert is_refusal(answer)
    v = judge("abstention", answer)
    assert v.label is True and v.score is None


@pytest.mark.parametrize(
    "answer",
    [
        "The proposal was not executed",
        "The proposal does not include a budget.",
        "Delegates said the funding was insufficient.",
        FAITHFUL,
        HALLUCINATED,
    ],
)
def test_non_refusals(answer: str) -> None:
    assert not is_refusal(answer)
    v = judge("abstention", answer)
    assert v.label is False and v.score is None


# --------------------------------------------------------------------------- conflict_ack


def test_conflict_acknowledged() -> None:
    v = judge("conflict_ack", "Earlier posts said 2024-01, but the later update says 2024-03")
    assert v.label is True and v.score is None
    assert json.loads(v.raw)["dates"] == [[2024, 1, None], [2024, 3, None]]


@pytest.mark.parametrize(
    "answer",
    [
        "The migration is scheduled for 2024-03.",
        "The STIP proposal was executed in November 2023.",
        "It passed but funding was delayed.",
    ],
)
def test_conflict_not_acknowledged(answer: str) -> None:
    assert judge("conflict_ack", answer).label is False


def test_conflict_acknowledged_by_two_dates_alone() -> None:
    two_sources = "The forum post gives 2024-01; the governance page gives March 2024."
    assert judge("conflict_ack", two_sources).label is True
    # the same date written two ways is one date
    assert judge("conflict_ack", "It ended on 2023-11-15 (November 15, 2023).").label is False


# --------------------------------------------------------------------------- issue 7: honest defaults

FORUM = ("The Lisbon Fintech Forum takes place in Lisbon in May. Registration opens in March and costs 120 EUR.",)
FORUM_Q = "Where and when does the Lisbon Fintech Forum take place?"


def forum(metric: str, answer: str) -> Verdict:
    """A verdict on the issue's example: reference "Lisbon, in May.", key facts Lisbon and May."""
    inp = JudgeInput(FORUM_Q, answer, FORUM, reference_answer="Lisbon, in May.", key_facts=("Lisbon", "May"))
    return asyncio.run(LexicalJudge().judge(metric, inp))


@pytest.mark.parametrize(
    "answer",
    [
        "The forum takes place in Lisbon in May.",
        "It takes place in Lisbon in May [LFP-001].",
        "It is held in Lisbon, in May [GRANT-7].",
        "In May, in Lisbon (doc: abc).",
        "The forum is in Lisbon in May [guides/setup.md].",
        "Lisbon hosts it in May [1][2].",
        "It takes place in Lisbon in May (LFP-001, LFP-002).",
        "It takes place in Lisbon in May.\n\nSources: [LFP-001] Forum page",
    ],
)
def test_a_correct_paraphrase_citing_its_sources_scores_full_marks(answer: str) -> None:
    correctness, groundedness = forum("correctness", answer), forum("groundedness", answer)
    assert correctness.score == 5.0, correctness.reasoning  # "May" is a month, not a stopword
    assert groundedness.score == 5.0, groundedness.reasoning  # the citation's number is no claim


@pytest.mark.parametrize(
    ("answer", "metric", "why"),
    [
        ("It takes place in Porto in May.", "groundedness", "not in the retrieved text: porto"),
        ("It takes place in Lisbon in June.", "groundedness", "not in the retrieved text: June"),
        ("It takes place in Lisbon in June.", "correctness", "the answer has June where the fact has May"),
        (
            "Registration costs 150 EUR; the forum is in Lisbon in May.",
            "groundedness",
            "not in the retrieved text: 150",
        ),
        ("The forum does not take place in Lisbon.", "groundedness", "negation differs on plac, tak"),
    ],
)
def test_contradictions_score_below_the_default_threshold(answer: str, metric: str, why: str) -> None:
    verdict = forum(metric, answer)
    assert verdict.score is not None and verdict.score <= CONTRADICTION_CAP < 3
    assert why in verdict.reasoning


def test_a_negated_key_fact_is_contradicted() -> None:
    facts = ("passed with 58% For",)
    ok = judge("correctness", "It passed with 58% of the votes For.", key_facts=facts)
    flipped = judge("correctness", "It did not pass: only 58% voted For.", key_facts=facts)
    assert ok.score == 5.0
    assert flipped.score == 0.0 and "contradicted: 'passed with 58% For' (the answer negates pass)" in flipped.reasoning
    negative = ("no Tally vote was required",)
    assert judge("correctness", "No Tally vote was needed.", key_facts=negative).score == 5.0
    assert judge("correctness", "A Tally vote was required.", key_facts=negative).score == 0.0


def test_modal_may_is_a_stopword_and_the_month_is_not() -> None:
    assert "may" in content_tokens("The forum is in May.")
    assert "may" not in content_tokens("The forum may move.")


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("50,000,000 ARB", "50 million ARB"),
        ("50,000,000 ARB", "50M ARB"),
        ("3,290,000,000 ARB", "3.29 billion ARB"),
        ("37,500,000 ARB", "37.5M ARB"),
        ("2024-06-28", "June 28, 2024"),
        ("2024-06-28", "28th Jun 2024"),
        ("12 members", "twelve members"),
        ("25 days", "twenty-five days"),
        ("58% For", "58 percent For"),
        ("the 5th of each month", "the 5 of each month"),
        ("71.20%", "71.2%"),
    ],
)
def test_one_number_many_spellings(one: str, other: str) -> None:
    assert content_tokens(one) == content_tokens(other)


def test_wrong_numbers_stay_wrong() -> None:
    assert content_tokens("50 million") != content_tokens("5 million")
    assert content_tokens("58%") != content_tokens("58")  # a share is not a count
    assert content_tokens("2024-06-28") != content_tokens("2024-06-27")


def test_a_swap_across_chunks_is_a_contradiction() -> None:
    contexts = ("The STIP budget was a hard cap of 50,000,000 ARB.", "The STIP Bridge was allocated 37,500,000 ARB.")
    question = "What was the STIP budget cap and what was the STIP Bridge budget?"
    right = "The STIP was capped at 50M ARB, and the STIP Bridge got 37.5M ARB."
    swapped = "The STIP cap was 37,500,000 ARB and the STIP Bridge received 50,000,000 ARB."
    assert judge("groundedness", right, question=question, contexts=contexts).score == 5.0
    verdict = judge("groundedness", swapped, question=question, contexts=contexts)
    assert verdict.score == 0.0
    assert "never occur together in one retrieved chunk" in verdict.reasoning


def test_a_verbatim_quote_is_never_contradicted_by_another_chunk() -> None:
    contexts = (
        "The Tally vote ran from 2024-05-10 to 2024-05-24. It passed with 86% For.",
        "Because the conversion only uses funds already controlled by the Foundation, no Tally vote was required.",
    )
    answer = "The Tally vote ran from 2024-05-10 to 2024-05-24. No Tally vote was required for the conversion."
    assert judge("groundedness", answer, contexts=contexts).score == 5.0


def test_numbers_written_as_words_are_loose_talk_not_figures() -> None:
    question = "When does nominee registration open?"
    contexts = ("Nominee registration will now open on 2024-09-29 instead of 2024-09-15.",)
    spelled = "Registration now opens on September 29, 2024, two weeks later than September 15."
    assert judge("groundedness", spelled, question=question, contexts=contexts).score == 5.0
    digits = "Registration now opens on September 29, 2024, 14 days later than September 15."
    assert judge("groundedness", digits, question=question, contexts=contexts).score == 0.0


def test_reference_without_key_facts_is_judged_by_recall_not_f1() -> None:
    long_answer = "The Lisbon Fintech Forum, which many fintech people attend, takes place every year in the city of Lisbon, and it is held in May."
    inp = JudgeInput(FORUM_Q, long_answer, FORUM, reference_answer="Lisbon, in May.")
    assert asyncio.run(LexicalJudge().judge("correctness", inp)).score == 5.0
    wrong = JudgeInput(FORUM_Q, "It is held in Lisbon in May 2025.", FORUM, reference_answer="Lisbon, in May 2024.")
    verdict = asyncio.run(LexicalJudge().judge("correctness", wrong))
    assert verdict.score == CONTRADICTION_CAP and "contradicts the reference" in verdict.reasoning


def test_configured_citation_patterns_are_removed_too() -> None:
    answer = "It takes place in Lisbon in May <<ref:forum-7>>."
    inp = JudgeInput(FORUM_Q, answer, FORUM, key_facts=("Lisbon", "May"))
    assert asyncio.run(LexicalJudge().judge("groundedness", inp)).score == 0.0  # "7" is not in the text
    custom = LexicalJudge(citation_patterns=["", r"<<ref:[\w-]+>>"])
    assert asyncio.run(custom.judge("groundedness", inp)).score == 5.0
    assert custom.describe()["citation_patterns"] == [r"<<ref:[\w-]+>>"]
    assert "citation_patterns" not in LexicalJudge().describe()


def test_an_invalid_citation_pattern_names_its_line() -> None:
    with pytest.raises(ValueError, match=r"rageval_citation_patterns: line 2: invalid regular expression '\[unclosed'"):
        LexicalJudge(citation_patterns=[r"<<ref:\w+>>", "[unclosed"])
