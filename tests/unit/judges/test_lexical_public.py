"""The lexical judge on answers over public encyclopedic passages (tests/data/lexical_public.jsonl): the common
hallucinations (one swapped name, number or date, a negation, the wrong side of a yes/no or an "A or B" question)
next to correct answers, paraphrases, id citations and hedged answers. bench/lexical_agreement.py prints it.

The floors are what was measured (docs/explanation/judges.md, "What it cannot see, and how well it agrees"): per
kind, the share of answers that get the human verdict.
The holdout half was written before the rules it is measured on and not tuned on but for three paraphrases;
lexical_holdout2.jsonl was written afterwards, blind to the rules, and never tuned on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pytest_rageval.judges.agreement import JudgedItem, agreement_rows, format_table, judge_items, load_labelled
from pytest_rageval.judges.base import JudgeInput
from pytest_rageval.judges.lexical import LexicalJudge

PUBLIC = Path(__file__).resolve().parent / "data" / "lexical_public.jsonl"
#: Measured (python bench/lexical_agreement.py): answers per kind that get the human verdict, of those written.
KIND_FLOOR = {
    "correct": (16, 16),
    "paraphrase": (15, 16),
    "cite-id": (16, 16),
    "hedged": (16, 16),
    "yes-no-right": (11, 11),
    "a-or-b-right": (9, 10),
    "swap-entity": (16, 16),
    "swap-number": (15, 16),
    "swap-date": (16, 16),
    "negation": (15, 16),
    "yes-no-wrong": (11, 11),
    "a-or-b-wrong": (10, 10),
}
SPLIT_FLOOR = {"split dev": (85, 86), "split holdout": (81, 84), "all": (166, 170)}
#: The second held-out set (tests/data/lexical_holdout2.jsonl), written blind to the rules after lexical/v4: measured
#: at 114 of 120 then; its missed items led to three rules of lexical/v5 (so it is held out no longer): kept from getting worse.
HOLDOUT2 = PUBLIC.with_name("lexical_holdout2.jsonl")
HOLDOUT2_FLOOR = {
    "correct": (12, 12),
    "paraphrase": (11, 12),
    "cite-id": (12, 12),
    "hedged": (12, 12),
    "yes-no-right": (6, 6),
    "a-or-b-right": (6, 6),
    "swap-entity": (11, 12),
    "swap-number": (12, 12),
    "swap-date": (12, 12),
    "negation": (12, 12),
    "yes-no-wrong": (6, 6),
    "a-or-b-wrong": (6, 6),
    "all": (118, 120),
}
#: The third held-out set (tests/data/lexical_holdout3.jsonl), written blind to the rules of lexical/v5, with harder
#: paraphrases (numbers in words, derived numbers) and right answers that hold a negation: measured blind at 112 of
#: 132 (right answers 55 of 72 pass, wrong ones 57 of 60 fail); one of its false alarms then made the rule that a
#: denial must meet one statement of a sentence, and one paraphrase the reading of compound number words
#: ("nine hundred and seventy-nine"): 114 of 132; lexical/v6 (an answer's opening name is a name) 115. Kept from
#: getting worse.
HOLDOUT3 = PUBLIC.with_name("lexical_holdout3.jsonl")
HOLDOUT3_FLOOR = {
    "correct": (12, 12),
    "paraphrase": (6, 12),
    "cite-id": (12, 12),
    "hedged": (11, 12),
    "correct-negative": (6, 12),
    "yes-no-right": (4, 6),
    "a-or-b-right": (6, 6),
    "swap-entity": (12, 12),
    "swap-number": (10, 12),
    "swap-date": (12, 12),
    "negation": (12, 12),
    "yes-no-wrong": (6, 6),
    "a-or-b-wrong": (6, 6),
    "all": (115, 132),
}


@pytest.fixture(scope="module")
def judged() -> list[JudgedItem]:
    return judge_items(LexicalJudge(), load_labelled(PUBLIC))


def test_the_set_holds_every_kind_on_both_splits(judged: list[JudgedItem]) -> None:
    for split in ("dev", "holdout"):
        kinds = {j.item.kind for j in judged if j.item.split == split}
        assert kinds == set(KIND_FLOOR), split
    assert len({j.item.id for j in judged}) == len(judged)
    right = ("correct", "paraphrase", "cite-id", "hedged", "yes-no-right", "a-or-b-right")
    assert all(j.item.human_pass == (j.item.kind in right) for j in judged)


@pytest.mark.parametrize("group", [*KIND_FLOOR, *SPLIT_FLOOR])
def test_agreement_stays_at_or_above_what_was_measured(judged: list[JudgedItem], group: str) -> None:
    rows = {row.group: row for row in agreement_rows(judged)}
    agree, n = {**KIND_FLOOR, **SPLIT_FLOOR}[group]
    assert rows[group].n == n
    assert rows[group].agree >= agree, f"{group}:\n{format_table(list(rows.values()))}"


def test_swaps_fail_with_the_word_that_decided(judged: list[JudgedItem]) -> None:
    """Both directions at once: at least 90% of the right answers pass and 90% of the wrong ones fail."""
    right = [j for j in judged if j.item.human_pass]
    wrong = [j for j in judged if not j.item.human_pass]
    assert sum(j.judge_pass for j in right) >= 0.9 * len(right)
    assert sum(not j.judge_pass for j in wrong) >= 0.9 * len(wrong)


#: The fourth held-out set (tests/data/lexical_holdout4.jsonl), in the shape of a public hallucination benchmark's
#: QA part (two linked paragraphs, a multi-hop question, a short right answer; answered with it, in a sentence, and
#: hallucinated), written blind to the rules of lexical/v6 and measured once with them: right answers pass 76 of 80,
#: hallucinated ones fail 36 of 40. Three of its misses (an answer naming both options of a comparison) made the
#: rule of lexical/v8 that the first clause's option is the one chosen: 39 of 40 since. Kept from getting worse.
HOLDOUT4 = PUBLIC.with_name("lexical_holdout4.jsonl")
HOLDOUT4_FLOOR = {"right-short": (40, 40), "right-sentence": (36, 40), "hallucinated": (39, 40), "all": (115, 120)}
#: The fifth held-out set, in the same shape (44 topics), written before any rule was measured on it and measured
#: with lexical/v9: with the reference, right answers pass 84 of 88 and hallucinated ones fail 44 of 44.
HOLDOUT5 = PUBLIC.with_name("lexical_holdout5.jsonl")
HOLDOUT5_FLOOR = {"right-short": (42, 44), "right-sentence": (42, 44), "hallucinated": (44, 44), "all": (128, 132)}
HOLDOUTS = {
    "holdout2": (HOLDOUT2, HOLDOUT2_FLOOR),
    "holdout3": (HOLDOUT3, HOLDOUT3_FLOOR),
    "holdout4": (HOLDOUT4, HOLDOUT4_FLOOR),
    "holdout5": (HOLDOUT5, HOLDOUT5_FLOOR),
}


@pytest.fixture(scope="module")
def judged_holdouts() -> dict[str, list[JudgedItem]]:
    return {name: judge_items(LexicalJudge(), load_labelled(path)) for name, (path, _) in HOLDOUTS.items()}


@pytest.mark.parametrize(
    ("holdout", "group"), [(name, group) for name, (_, floor) in HOLDOUTS.items() for group in floor]
)
def test_the_later_holdouts_stay_at_or_above_what_was_measured(
    judged_holdouts: dict[str, list[JudgedItem]], holdout: str, group: str
) -> None:
    rows = {row.group: row for row in agreement_rows(judged_holdouts[holdout])}
    agree, n = HOLDOUTS[holdout][1][group]
    assert rows[group].n == n
    assert rows[group].agree >= agree, f"{holdout} {group}:\n{format_table(list(rows.values()))}"


#: Groundedness alone, without the reference, on the sets in HaluEval's QA shape (lexical/v9): (right answers
#: that pass, hallucinated ones that fail). Kept from getting worse.
GROUNDEDNESS_ALONE_FLOOR = {HOLDOUT4: (76, 20), HOLDOUT5: (86, 36)}


@pytest.mark.parametrize("path", sorted(GROUNDEDNESS_ALONE_FLOOR), ids=lambda p: p.stem)
def test_groundedness_alone_stays_at_or_above_what_was_measured(path: Path) -> None:
    right = wrong = 0
    for item in load_labelled(path):
        verdict = asyncio.run(
            LexicalJudge().judge("groundedness", JudgeInput(item.question, item.answer, item.contexts))
        )
        grounded = verdict.score is not None and verdict.score >= 3
        right += item.human_pass and grounded
        wrong += not item.human_pass and not grounded
    passing, failing = GROUNDEDNESS_ALONE_FLOOR[path]
    assert right >= passing and wrong >= failing, (right, wrong)
