"""The offline lexical judge: deterministic token-overlap heuristics.

No network, no I/O, standard library only; the same input always gives the same
verdict (``repeat_index`` is ignored). It stands in for the LLM judge when no
judge model is configured, and every verdict's reasoning ends with "(heuristic)".
Text analysis (canonical numbers and dates, tokens, negation scopes, citation
markers, claims) is in ``lexical_text``.

What it may fail on its own, and what it never fails: it judges *facts*, not
wording. A correct answer that paraphrases the reference, reorders the facts,
adds true detail from the retrieved text or cites its sources (``[1]``,
``[LFP-001]``, ``(doc: abc)``, ``[guides/setup.md]``...) keeps the scores of the
plain answer. It fails an answer that contradicts the key facts or the retrieved
text: a number, date, month or name the retrieved text does not hold, a swapped
number, a flipped negation, a missing key fact. It cannot see synonyms: a key fact
worded unlike the answer ("monthly" against "one report per month") is missed, so
key facts should be short phrases a correct answer must contain (names, numbers, dates).

Scores (thresholds are the module constants below):

- groundedness 0-5: the answer is split into claims (sentences, bullet items,
  ``;`` parts; citation markers, headings and a trailing ``Sources:`` list dropped).
  Each claim is checked against the union of the retrieved contexts and the question
  (a sentence often joins facts from two chunks, or restates the question):
  *unsupported* when fewer than ``CLAIM_SUPPORT`` of its content tokens occur there,
  or when a number, month or capitalised name of it does not and the rest of its
  clause matches no context sentence; *contradicted* when such a token is absent
  but the rest of its clause matches a context sentence (a swapped value), when the
  numbers and names of a clause never occur together in one context (a value
  swapped between chunks), or when a clause negates what its best-matching context
  sentences state (or states what they negate). Score = 5 * supported / claims, one
  decimal, at most ``CONTRADICTION_CAP`` when a claim is contradicted; no claims -> 0,
  "empty answer", but for a bare "yes"/"no" to a yes/no question -> 5 (it claims the
  question's own words; correctness weighs its polarity).
- correctness 0-5: with key facts, 5 * the share of key facts the answer states
  (every number/date/month of the fact present; of its other words at least
  ``FACT_COVERAGE``, or half when the fact has a number; the same polarity), at most
  ``CONTRADICTION_CAP`` when a key fact is contradicted (its words are there with
  another number of the same kind, or negated). Without key facts, the reference
  answer is one graded fact: 5 * min(1, share of its tokens in the answer /
  ``FACT_COVERAGE``), capped the same way; a reference of at most ``SHORT_REFERENCE``
  content tokens is graded 5 * share, unless the answer holds half its names and numbers. With neither, the share of the answer's
  tokens found in question + contexts (0 for a refusal), and the reasoning says so. With a reference or key
  facts, correctness compares the answer with them and the question only: the retrieved text never changes it.
- faithfulness 0/1: groundedness >= ``FAITHFUL_MIN``.
- relevancy 0/1: not a refusal and the answer holds >= ``RELEVANCY_MIN`` of the
  question's content tokens.
- completeness 0-1: key-fact coverage; without key facts, question-token
  coverage (0 for a refusal).
- abstention: ``is_refusal(answer)``; score None.
- conflict_ack: True with one strong marker ("earlier", "updated", "conflict",
  "whereas", "superseded"...), two different dates/years, or two weak markers
  ("but", "however", "later", "while"...). A heuristic: start and end dates of
  one event also count as two dates.
- reasoning_quality: not scored (JudgeError).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from re import Pattern
from typing import Any

from pytest_rageval.evaluation import registry

from .base import Judge, JudgeError, JudgeInput, Verdict
from .lexical_rules import (
    anchored,
    answer_polarity,
    bare_polarity,
    is_yes_no_question,
    lowercase_words,
    mangled_name,
    near_the_reference,
    negated_reference,
    number_pairs,
    number_swap,
    option_conflict,
    polarity_conflict,
    polarity_of_fact,
    rival_ids,
    rival_names,
    rival_numbers,
    same_choice,
    substituted,
    swapped_pairing,
    swapped_subject,
    without_ids,
)
from .lexical_text import (
    Analysis,
    analyse,
    analyse_fact,
    clauses,
    compile_citation_patterns,
    content_tokens,
    context_sentences,
    demonym_roots,
    display,
    exact_class,
    names,
    spelled_numbers,
    split_claims,
    strip_citations,
)
from .lexical_text import normalise as _normalise

__all__ = [
    "CLAIM_SUPPORT",
    "CONTRADICTION_CAP",
    "FACT_COVERAGE",
    "FAITHFUL_MIN",
    "LEXICAL_METRICS",
    "RELEVANCY_MIN",
    "LexicalJudge",
    "content_tokens",
    "is_refusal",
    "split_claims",
]

#: A reference answer of at most this many content words ("ingredients in beer") is graded by the plain share of
#: its words the answer holds, each word of so short an answer being the answer; but for one whose names and
#: numbers the answer all holds ("the Victorian period" for "Victorian era"): they anchor it.
SHORT_REFERENCE = 3
#: A claim is supported when this share of its content tokens is in the retrieved text (or the question).
CLAIM_SUPPORT = 0.5
#: the share of a claim's words the retrieved text must hold when every number and name of the claim is there
ANCHORED_CLAIM_SUPPORT = 0.25
#: A key fact without a number is covered when this share of its words is in the answer.
FACT_COVERAGE = 0.6
#: The most a contradicted claim or key fact leaves of groundedness/correctness: below the default threshold 3.
CONTRADICTION_CAP = 2.0
#: faithfulness passes when groundedness reaches this (0-5 scale).
FAITHFUL_MIN = 4.0
#: relevancy passes when the answer covers this share of the question's content tokens.
RELEVANCY_MIN = 0.5

#: What the lexical judge scores: the verdicts the registry gives a lexical scorer (reasoning_quality, which
#: needs a reader, not token overlap, has none).
LEXICAL_METRICS: tuple[str, ...] = tuple(registry.lexical_scorers())

_SUFFIX = " (heuristic)"

# --------------------------------------------------------------------------- refusals

_SOURCE_NOUN = (
    r"(?:notes?|documents?|documentation|context|sources?|texts?|passages?|excerpts?|chunks?"
    r"|materials?|records?|data|information|files?|pages?|articles?|knowledge base|search results?|results)"
)
_REFUSAL_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"^\W*(?:n/?a|unknown|no answer)\W*$",
        r"\b(?:i|we) (?:do|did) not know\b",
        r"\b(?:i|we) (?:am|are) not (?:sure|certain)\b",
        r"\b(?:can|could) not (?:find|locate)\b",
        r"\b(?:unable|not able) to (?:find|locate|answer|determine|confirm|verify|provide|say|tell)\b",
        r"\b(?:i|we) (?:can|could) not (?:answer|determine|confirm|verify|say|tell|provide|help|see|identify)\b",
        r"\b(?:can|could) not be (?:answered|determined|found|confirmed|verified)\b",
        r"\bno (?:relevant |specific |such )?(?:information|data|details?|mention|record)\b",
        r"\bno relevant\b",
        r"\b(?:not enough|insufficient|not sufficient) (?:information|context|data|details?|evidence)\b",
        r"\b(?:information|context|data) (?:is|was|are) "
        r"(?:insufficient|not sufficient|unavailable|not available|missing)\b",
        r"\bnot (?:mentioned|stated|specified|covered|discussed|described) (?:in|anywhere)\b",
        rf"\bnot (?:found|available|provided|included) in (?:the |any |these |those )?(?:\w+ )?{_SOURCE_NOUN}\b",
        rf"\b{_SOURCE_NOUN} (?:do|does|did) not (?:mention|say|state|specify|contain|include|cover|discuss"
        r"|describe|address|provide|give|tell|indicate)\b",
        r"\b(?:i|we) (?:do|did) not have (?:enough |any |sufficient |the )?"
        r"(?:information|data|details?|context|knowledge|access)\b",
        r"\b(?:i|we) (?:do|did|could|can) not (?:see|find) (?:any )?"
        r"(?:information|mention|data|details?|reference)\b",
        rf"\b(?:unclear|not clear) from (?:the )?(?:provided |given |retrieved )?{_SOURCE_NOUN}\b",
    )
)


def _refusal_match(answer: str) -> str | None:
    """The refusal phrase found in ``answer`` ("" for an empty answer), else None."""
    text = " ".join(_normalise(answer).split())
    if not text:
        return ""
    for pattern in _REFUSAL_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(0).strip()
    return None


def is_refusal(answer: str) -> bool:
    """Whether ``answer`` declines to answer ("I don't know", "the notes do not mention it", empty...).

    Patterns target missing information, not negation in general: "The proposal was not
    executed" is an answer, not a refusal.
    """
    return _refusal_match(answer) is not None


# --------------------------------------------------------------------------- conflicts

_STRONG_MARKERS = re.compile(
    r"\b(?:conflict\w*|contradict\w*|disagree\w*|discrepan\w*|inconsisten\w*|supersed\w*|outdated"
    r"|out of date|updated?|revised|revision|amended|previously|earlier|older|newer|differ(?:s|ed|ing|ences?)?"
    r"|whereas|on the other hand|changed)\b"
)
_WEAK_MARKERS = re.compile(r"\b(?:but|however|although|though|while|later|instead|yet|originally|initially|now)\b")
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_DATES = re.compile(
    r"\b(?P<iy>(?:19|20)\d{2})[-/.](?P<im>0?[1-9]|1[0-2])(?:[-/.](?P<id>0?[1-9]|[12]\d|3[01]))?\b"
    rf"|\b(?P<mm>{_MONTH})\s+(?:(?P<md>\d{{1,2}})(?:st|nd|rd|th)?,?\s+)?(?P<my>(?:19|20)\d{{2}})\b"
    rf"|\b(?P<dd>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<dm>{_MONTH}),?\s+(?P<dy>(?:19|20)\d{{2}})\b"
    r"|\b(?P<y>(?:19|20)\d{2})\b"
)

DateKey = tuple[int, int | None, int | None]


def _date_key(match: re.Match[str]) -> DateKey:
    """(year, month, day) of a date match; month/day None when not given."""
    g = match.groupdict()

    def num(value: str | None) -> int | None:
        return int(value) if value else None

    if g["iy"]:
        return int(g["iy"]), num(g["im"]), num(g["id"])
    if g["mm"]:
        return int(g["my"]), _MONTHS[g["mm"].rstrip(".")], num(g["md"])
    if g["dm"]:
        return int(g["dy"]), _MONTHS[g["dm"].rstrip(".")], num(g["dd"])
    return int(g["y"]), None, None


def _distinct_dates(text: str) -> list[DateKey]:
    """Distinct dates and years in ``text``; a bare year also named in a fuller date is not counted twice."""
    keys = {_date_key(m) for m in _DATES.finditer(text.lower())}
    fuller_years = {k[0] for k in keys if k[1] is not None}
    return sorted(k for k in keys if k[1] is not None or k[0] not in fuller_years)


# --------------------------------------------------------------------------- claims against the contexts


def _raw(data: dict[str, Any]) -> str:
    """Compact, key-sorted JSON of the computed numbers."""
    return json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _verdict(metric: str, reasoning: str, data: dict[str, Any], **fields: Any) -> Verdict:
    """A Verdict with the heuristic suffix, the raw numbers and no tokens or cost."""
    return Verdict(metric=metric, reasoning=reasoning + _SUFFIX, raw=_raw({"metric": metric, **data}), **fields)


#: The correctness of an answer that chooses as the reference does on a yes/no or "A or B" question, whatever
#: detail it leaves out.
CHOICE_SCORE = 4.0

#: Words of obligation inside a negation's scope that the positive side says with "must" (a stopword) or not at
#: all: "do not need to be submitted" negates "must be submitted".
_OBLIGATION = frozenset({"need", "requir", "abl", "oblig", "necessary", "necessari", "have", "ha"})


def _flips(claim: Analysis, sentence: Analysis) -> frozenset[str]:
    """What one side negates and the other states un-negated (the whole negated scope), else nothing.

    "no Tally vote" is not flipped by "the Snapshot vote passed"; "did not resign" is by "resigned";
    "do not need to be submitted" is by "must be submitted" (words of obligation aside).
    """
    for negating, other in ((claim, sentence), (sentence, claim)):
        scope = negating.negated - _OBLIGATION if negating.negated - _OBLIGATION else negating.negated
        if scope and scope <= other.distinct and not scope & other.negated:
            return scope
    return frozenset()


def _substitution(claim: str, absent: frozenset[str], sentences: Sequence[tuple[str, Analysis]]) -> bool:
    """Whether a clause holding an ``absent`` number or name otherwise matches one context sentence.

    "The festival is held in Porto in July" against "The festival takes place in Lisbon in July"
    swapped a name (a contradiction); "it also passed the Snapshot check" against a text that
    never speaks of it is merely unsupported.
    """
    for clause in clauses(claim):
        words = analyse(clause).plain
        if not words & absent:
            continue
        rest = words - absent
        best = max((len(rest & s.plain) for _, s in sentences), default=0)
        if best >= 2 and best >= 0.5 * len(rest):
            return True
    return False


def _negation_conflict(claim: str, sentences: Sequence[tuple[str, Analysis]]) -> str | None:
    """Why a clause of ``claim`` contradicts the context sentences that speak of the same thing, else None.

    Each clause is compared with the context sentences sharing the most words with it (at least
    two); it contradicts them when every one of those flips its negation. A clause that some
    best-matching sentence states with the same polarity (a verbatim quote) is not contradicted.
    """
    for clause in clauses(claim):
        words = analyse(clause)
        overlaps = [(len(words.plain & s.plain), text, s) for text, s in sentences]
        best = max((n for n, _, _ in overlaps), default=0)
        if best < 2:
            continue
        matches = [(text, s) for n, text, s in overlaps if n == best]
        flips = [_flips(words, s) for _, s in matches]
        if all(flips):
            return f"negation differs on {', '.join(sorted(flips[0]))} from: {matches[0][0].strip()}"
        if best >= 3 and _denies(clause, words, [text for text, _ in matches]):
            denied = " ".join(display(t) for t in words.tokens if t in words.negated) or "it"
            return f"the answer denies ({denied}) what the text states: {matches[0][0].strip()}"
    return None


#: Where a context sentence holds two statements: "Watson and Crick received the prize in 1962; Franklin had died".
_STATEMENT_SPLIT = re.compile(r";|\s(?:but|while|whereas|although|though)\s", re.I)


def _denies(clause: str, words: Analysis, sentences: Sequence[str]) -> bool:
    """Whether a clause negated as a whole ("did not take place on 17 December 1903 near Kitty Hawk") says of its
    numbers, dates and names what one un-negated statement holding all of them states, in words of its own. A
    sentence whose statements share them out ("Franklin did not share the 1962 prize" against "Watson and Crick
    received it in 1962; Franklin had died") does not count."""
    if not words.sentential:
        return False
    opening = clause.split(None, 1)[:1]  # the subject's name opens the clause: "Franklin did not share ..."
    capitalised = analyse(opening[0]).plain if opening and opening[0][:1].isupper() else frozenset()
    anchors = (frozenset(t for t in words.plain if exact_class(t)) | names(clause) | capitalised) - words.negated
    return bool(anchors) and all(
        any(not part.negation and anchors <= part.distinct for part in map(analyse, _STATEMENT_SPLIT.split(text)))
        for text in sentences
    )


def _unmatched_clause(
    claim: str,
    question: frozenset[str],
    chunks: Sequence[frozenset[str]],
    pairs: Sequence[frozenset[tuple[str, str]]] = (),
) -> str | None:
    """A clause whose numbers and names never occur together in one retrieved chunk, while a chunk holding its
    names counts the same thing with another number.

    That is how a swap shows: "the STIP Bridge received 50,000,000 ARB" when 50,000,000 ARB is
    the STIP's budget, in another chunk, and the STIP Bridge's chunk says 37,500,000 ARB. A clause
    joining facts of two chunks ("Victoria's 63-year reign, from 1837") is no swap. Only clauses with
    a number and a name are checked; words that only the question holds are left out.
    """
    from_question = question.difference(*chunks)
    for clause in clauses(claim):
        tokens = analyse(clause).distinct
        exact = {t for t in tokens if exact_class(t)} - spelled_numbers(clause)
        anchors = (exact | names(clause)) - from_question
        named = anchors - exact
        if not (anchors & exact and named) or any(anchors <= chunk for chunk in chunks):
            continue
        counted = {word for number, word in number_pairs(clause) if number in exact}
        homes = [i for i, chunk in enumerate(chunks) if named <= chunk]
        if not counted or any(w in counted and n not in exact for i in homes if i < len(pairs) for n, w in pairs[i]):
            return clause.strip()
    return None


@dataclass(frozen=True)
class ClaimCheck:
    """One claim of the answer and what the retrieved text says to it."""

    claim: str
    status: str  # "supported", "unsupported" or "contradicted"
    share: float
    why: str = ""


@dataclass(frozen=True)
class _Evidence:
    """What claims are checked against: the question, the retrieved chunks and their sentences."""

    question: frozenset[str]
    chunks: tuple[frozenset[str], ...]
    sentences: tuple[tuple[str, Analysis], ...]
    pairs: tuple[frozenset[tuple[str, str]], ...] = ()  # each chunk's (number, the word it counts): lexical_rules

    @property
    def vocabulary(self) -> frozenset[str]:
        return self.question.union(*self.chunks)


def check_claim(claim: str, evidence: _Evidence) -> ClaimCheck:
    """Whether ``claim`` is supported by, absent from, or contradicted by the retrieved text."""
    analysis = analyse(claim)
    tokens = analysis.distinct
    vocabulary = evidence.vocabulary
    share = len(tokens & vocabulary) / len(tokens)
    exact = {t for t in tokens if exact_class(t)} - spelled_numbers(claim)
    anchors = exact | names(claim)
    # a claim whose numbers and names are all in the retrieved text needs fewer of its other words there
    # ("some 20,000 craftsmen" against "some 20,000 artisans"): its facts are anchored, its wording is free
    needed = ANCHORED_CLAIM_SUPPORT if anchors and anchors <= vocabulary else CLAIM_SUPPORT
    if share < needed - 1e-9:
        absent = sorted(display(t) for t in tokens - vocabulary)
        return ClaimCheck(claim, "unsupported", share, "not in the retrieved text: " + ", ".join(absent))
    missing = frozenset(t for t in anchors - vocabulary if not demonym_roots(t) & vocabulary)
    if missing:
        status = "contradicted" if _substitution(claim, frozenset(missing), evidence.sentences) else "unsupported"
        return ClaimCheck(
            claim, status, share, "not in the retrieved text: " + ", ".join(sorted(display(t) for t in missing))
        )
    conflict = _negation_conflict(claim, evidence.sentences)
    if conflict is not None:
        return ClaimCheck(claim, "contradicted", share, conflict)
    swap = number_swap(claim, evidence.pairs)
    if swap is not None:
        return ClaimCheck(claim, "contradicted", share, swap)
    clause = _unmatched_clause(claim, evidence.question, evidence.chunks, evidence.pairs)
    if clause is not None:
        return ClaimCheck(
            claim,
            "contradicted",
            share,
            f"the numbers and names of {clause!r} never occur together in one retrieved chunk",
        )
    return ClaimCheck(claim, "supported", share)


@dataclass(frozen=True)
class _Grounding:
    checks: tuple[ClaimCheck, ...]

    @property
    def supported(self) -> list[str]:
        return [c.claim for c in self.checks if c.status == "supported"]

    @property
    def unsupported(self) -> list[str]:
        return [c.claim for c in self.checks if c.status != "supported"]

    @property
    def contradicted(self) -> list[ClaimCheck]:
        return [c for c in self.checks if c.status == "contradicted"]

    @property
    def score(self) -> float:
        if not self.checks:
            return 0.0
        score = round(5.0 * len(self.supported) / len(self.checks), 1)
        return min(score, CONTRADICTION_CAP) if self.contradicted else score


def _grounding(inp: JudgeInput, citations: Sequence[Pattern[str]]) -> _Grounding:
    """Check each claim against the union of the retrieved contexts and the question."""
    evidence = _Evidence(
        analyse(inp.question).distinct,
        tuple(analyse(c).distinct for c in inp.contexts),
        context_sentences(tuple(inp.contexts)),
        tuple(number_pairs(c) for c in inp.contexts),
    )
    return _Grounding(tuple(check_claim(c, evidence) for c in split_claims(inp.answer, citations)))


# --------------------------------------------------------------------------- key facts against the answer


@dataclass(frozen=True)
class FactCheck:
    """One key fact (or the reference answer) and whether the answer states it."""

    fact: str
    status: str  # "covered", "missing" or "contradicted"
    share: float  # share of the fact's tokens found in the answer
    why: str = ""


def check_fact(fact: str, answer: Analysis, common: frozenset[str] = frozenset()) -> FactCheck:
    """Whether ``answer`` states ``fact``: its numbers/dates/months exactly, enough of its words, same polarity.

    ``common`` are words the question or the retrieved text writes in lower case ("oceans"): a fact whose
    other words are all there needs only half of its words ("the Atlantic" states "Atlantic Ocean").
    """
    f = analyse_fact(fact)
    if not f.plain:
        return FactCheck(fact, "missing", 0.0, "no content words to look for")
    exact = sorted(t for t in f.plain if exact_class(t))
    words = f.plain - frozenset(exact)
    present = f.plain & answer.distinct
    share = len(present) / len(f.plain)
    missing_exact = [t for t in exact if t not in answer.distinct]
    found_words = len(words & answer.distinct)
    rare = words - common
    needed = len(words) // 2 if exact or (rare and rare <= answer.distinct) else FACT_COVERAGE * len(words) - 1e-9
    words_ok = found_words >= needed
    if words_ok and not missing_exact:
        if f.negation and not (answer.negated & f.negated or (answer.negation and not f.negated)):
            return FactCheck(fact, "contradicted", share, "the fact is negative, the answer is not")
        negated = sorted(answer.negated & f.plain) if not f.negation else []
        if negated:
            return FactCheck(fact, "contradicted", share, "the answer negates " + ", ".join(negated))
        return FactCheck(fact, "covered", share)
    if missing_exact and (not words or found_words >= max(1, math.ceil(len(words) / 2))):
        classes = {exact_class(t) for t in missing_exact}
        rivals = sorted(t for t in answer.distinct if exact_class(t) in classes and t not in f.distinct)
        if rivals:
            return FactCheck(
                fact,
                "contradicted",
                share,
                f"the answer has {', '.join(map(display, rivals))} where the fact has {', '.join(map(display, missing_exact))}",
            )
    return FactCheck(fact, "missing", share)


def answer_text_for_facts(answer: str, citations: Sequence[Pattern[str]], expected: Sequence[str] = ()) -> str:
    """The answer as key facts see it: citation markers removed (their numbers are no facts), but for the ids
    among them that the reference or a key fact names (``[POL-21]`` where a key fact is ``POL-21``)."""
    stripped = strip_citations(answer, citations)
    if not expected:
        return stripped
    cited = analyse_fact(answer).distinct - analyse_fact(stripped).distinct
    named = frozenset().union(*(analyse_fact(text).distinct for text in expected))
    kept = sorted(cited & named)
    return stripped + (" " + " ".join(kept) if kept else "")


def _common_words(inp: JudgeInput) -> frozenset[str]:
    """The fact tokens of words the question writes in lower case (never the retrieved text's: what else was
    retrieved does not change a key fact's verdict)."""
    return analyse_fact(" ".join(lowercase_words([inp.question]))).distinct


def decisive_conflict(inp: JudgeInput, answer: str) -> str | None:
    """Why the answer contradicts the reference on a word that decides (lexical_rules), else None. Names are
    taken from the key facts when there are some (a reference's other names may be left out), else from the
    reference answer. The retrieved text is not read: what else was retrieved never changes the verdict."""
    expected = [text for text in (inp.reference_answer, *inp.key_facts) if text]
    named = list(inp.key_facts) or expected
    reason = (
        polarity_conflict(inp.question, expected, answer)
        or option_conflict(inp.question, expected, answer)
        or negated_reference(expected, answer)
        or rival_ids(expected, inp.answer)
        # an id the answer leaves uncited is no name it swapped: the id rule above judges ids
        or rival_names(inp.question, [without_ids(text) for text in named], answer)
        or mangled_name(inp.question, named, answer)
        or near_the_reference(expected, answer)
        or swapped_pairing(inp.question, list(inp.key_facts) or reference_clauses(inp.reference_answer), answer)
        or swapped_subject(inp.question, expected, answer)
    )
    if reason is None and inp.key_facts and inp.reference_answer:
        # the reference's other counts count too: "58-year reign" where it says 63 years (its other names and
        # numbers may be left out, and an answer's extra detail is no rival of them)
        reason = rival_numbers(inp.reference_answer, answer) or substituted(inp.question, inp.reference_answer, answer)
    return reason


def reference_clauses(reference: str | None) -> list[str]:
    """The reference answer's clauses, each one fact: "Expenses in Ledgerly, time off in Rota." gives two."""
    return [
        clause for claim in split_claims(reference or "") for clause in clauses(claim) if analyse_fact(clause).plain
    ]


def _fact_checks(
    facts: Sequence[str], answer: Analysis, answer_text: str = "", common: frozenset[str] = frozenset()
) -> list[FactCheck]:
    """Each key fact checked against the answer; a fact that is just "yes" or "no" against the word the answer
    opens with."""
    checks = []
    for fact in facts:
        wanted = polarity_of_fact(fact)
        if wanted is None:
            checks.append(check_fact(fact, answer, common))
            continue
        given = answer_polarity(answer_text)
        status = "missing" if given is None else "covered" if given == wanted else "contradicted"
        why = f"the answer says {'yes' if given else 'no'}" if status == "contradicted" else ""
        checks.append(FactCheck(fact, status, 1.0 if status == "covered" else 0.0, why))
    return checks


def _describe_facts(checks: Sequence[FactCheck]) -> str:
    covered = sum(c.status == "covered" for c in checks)
    text = f"{covered} of {len(checks)} key facts present"
    missing = [c.fact for c in checks if c.status == "missing"]
    if missing:
        text += f" (missing: {'; '.join(missing)})"
    for c in checks:
        if c.status == "contradicted":
            text += f"; contradicted: {c.fact!r} ({c.why})"
    return text


# --------------------------------------------------------------------------- judge


class LexicalJudge(Judge):
    """Offline, deterministic judge built on token overlap (``lexical``).

    Scores groundedness, correctness, faithfulness, relevancy, completeness, abstention
    and conflict_ack. It does not score reasoning_quality: clarity and logic are not
    visible in token overlap, so ``supports("reasoning_quality")`` is False and judging
    it raises JudgeError. Every verdict is labelled a heuristic; ``repeat_index`` is
    ignored because the answer never varies.

    ``citation_patterns``: extra regular expressions of citation markers (ini
    ``rageval_citation_patterns``), removed from answers like the built-in forms;
    an invalid one raises ValueError naming its line.
    """

    PROMPT_VERSION = "lexical/v9"

    def __init__(self, citation_patterns: Sequence[str] = ()) -> None:
        super().__init__(name="lexical", heuristic=True)
        self.citation_patterns = tuple(p.strip() for p in citation_patterns if p.strip())
        self._citations = compile_citation_patterns(self.citation_patterns)
        # the scorers by the names the registry's judge specs give them (JudgeSpec.lexical)
        by_name: dict[str, Callable[[JudgeInput], Verdict]] = {
            "groundedness": self._groundedness,
            "correctness": self._correctness,
            "faithfulness": self._faithfulness,
            "relevancy": self._relevancy,
            "completeness": self._completeness,
            "abstention": self._abstention,
            "conflict_ack": self._conflict_ack,
        }
        self._scorers = {verdict: by_name[scorer] for verdict, scorer in registry.lexical_scorers().items()}

    def describe(self) -> dict[str, Any]:
        """What config.json records about this judge."""
        info: dict[str, Any] = {
            "name": self.name,
            "model": "lexical-heuristic",
            "base_url": None,
            "prompt_versions": {metric: self.PROMPT_VERSION for metric in LEXICAL_METRICS},
            "temperature": 0.0,
            "seed": None,
            "json_mode": None,
            "heuristic": True,
        }
        if self.citation_patterns:
            info["citation_patterns"] = list(self.citation_patterns)
        return info

    def supports(self, metric: str) -> bool:
        """Every judge metric except reasoning_quality."""
        return metric in self._scorers

    async def judge(self, metric: str, inp: JudgeInput, *, repeat_index: int = 0) -> Verdict:
        """Score ``metric`` for one case; raises JudgeError for a metric it does not score."""
        scorer = self._scorers.get(metric)
        if scorer is None:
            raise JudgeError(metric, f"the lexical judge does not score {metric}")
        return scorer(inp)

    async def aclose(self) -> None:
        """Nothing to release."""

    # ---- scale metrics

    def _groundedness(self, inp: JudgeInput) -> Verdict:
        g = _grounding(inp, self._citations)
        total = len(g.checks)
        data = {
            "claims": total,
            "supported": len(g.supported),
            "contradicted": len(g.contradicted),
            "shares": [round(c.share, 3) for c in g.checks],
            "threshold": CLAIM_SUPPORT,
            "contexts": len(inp.contexts),
            "score": g.score,
        }
        if bare_polarity(strip_citations(inp.answer, self._citations)) is not None and is_yes_no_question(inp.question):
            # "No." to "Are both bands American?": the answer claims the question's own words, with a polarity
            # that correctness weighs against the reference
            data["score"] = 5.0
            reasoning = "a bare yes/no answer: it claims nothing beyond the question's own words"
            return _verdict("groundedness", reasoning, data, score=5.0, supported_claims=[], unsupported_claims=[])
        if not total:
            reasoning = "empty answer: no claims to check"
        else:
            reasoning = f"{len(g.supported)} of {total} claims share >={CLAIM_SUPPORT:.0%} of their words with the retrieved text"
            for check in g.contradicted:  # the reason first: failure messages shorten long reasonings
                reasoning += f"; contradicted ({check.why}): {check.claim!r}"
            if g.contradicted:
                reasoning += f"; a contradiction caps the score at {CONTRADICTION_CAP:g}"
            if not inp.contexts:
                reasoning += "; no retrieved context"
        return _verdict(
            "groundedness",
            reasoning,
            data,
            score=g.score,
            supported_claims=g.supported,
            unsupported_claims=g.unsupported,
        )

    def _correctness(self, inp: JudgeInput) -> Verdict:
        expected = [text for text in (inp.reference_answer, *inp.key_facts) if text]
        answer_text = answer_text_for_facts(inp.answer, self._citations, expected)
        answer = analyse_fact(answer_text)
        data: dict[str, Any] = {"key_facts": None, "reference_coverage": None, "fallback_overlap": None}
        if not answer.tokens and answer_polarity(answer_text) is None:  # "yes" is no content word, but an answer
            return _verdict("correctness", "empty answer", {**data, "score": 0.0}, score=0.0)
        if inp.key_facts:
            checks = _fact_checks(inp.key_facts, answer, answer_text, _common_words(inp))
            covered = sum(c.status == "covered" for c in checks)
            contradicted = any(c.status == "contradicted" for c in checks)
            score = round(5.0 * covered / len(checks), 1)
            data["key_facts"] = {
                "covered": covered,
                "total": len(checks),
                "contradicted": sum(c.status == "contradicted" for c in checks),
            }
            reasoning = _describe_facts(checks)
        elif inp.reference_answer and analyse_fact(inp.reference_answer).plain:
            # the reference's ids are judged by the id rule (decisive_conflict): "POL-21" is no number to match
            graded = without_ids(inp.reference_answer)
            graded = graded if analyse_fact(graded).plain else inp.reference_answer
            check = check_fact(graded, answer)
            contradicted = check.status == "contradicted"
            short = len(analyse_fact(graded).plain) <= SHORT_REFERENCE and not anchored(
                graded, answer_text, [inp.question]
            )
            score = round(5.0 * (check.share if short else min(1.0, check.share / FACT_COVERAGE)), 1)
            data["reference_coverage"] = round(check.share, 3)
            reasoning = f"no key facts: the answer holds {check.share:.0%} of the reference answer's content words " + (
                "(so short a reference: each word counts)" if short else f"(full marks from {FACT_COVERAGE:.0%})"
            )
            if contradicted:
                reasoning += f"; contradicts the reference: {check.why}"
        else:
            refusal = is_refusal(inp.answer)
            vocabulary = frozenset().union(*(analyse(t).distinct for t in (inp.question, *inp.contexts)))
            tokens = analyse(answer_text).distinct  # citation markers (ids, paths) are not content
            share = 0.0 if refusal or not tokens else len(tokens & vocabulary) / len(tokens)
            contradicted = False
            score = round(5.0 * share, 1)
            data["fallback_overlap"] = round(share, 3)
            reasoning = (
                "no key facts, and no content word in the reference answer: "
                if inp.reference_answer
                else "no reference answer or key facts: "
            ) + (
                "the answer is a refusal"
                if refusal
                else f"{share:.0%} of the answer's content words appear in the question and retrieved text"
            )
        decisive = decisive_conflict(inp, answer_text) if expected and not contradicted else None
        if decisive is not None:
            contradicted = True
            reasoning += f"; contradicts the reference: {decisive}"
        chosen = same_choice(inp.question, expected, answer_text) if expected and not contradicted else None
        if chosen is not None and score < CHOICE_SCORE:  # "A or B?" and "is it?" are answered by the choice
            score = CHOICE_SCORE
            reasoning += f"; the answer chooses {chosen}, as the reference does (at least {CHOICE_SCORE:g})"
        if contradicted and score > CONTRADICTION_CAP:
            score = CONTRADICTION_CAP
            reasoning += f"; a contradiction caps the score at {CONTRADICTION_CAP:g}"
        data["score"] = score
        return _verdict("correctness", reasoning, data, score=score)

    def _completeness(self, inp: JudgeInput) -> Verdict:
        if not analyse(inp.answer).tokens:
            return _verdict("completeness", "empty answer", {"score": 0.0}, score=0.0)
        if inp.key_facts:
            answer_text = answer_text_for_facts(inp.answer, self._citations, inp.key_facts)
            checks = _fact_checks(inp.key_facts, analyse_fact(answer_text), answer_text, _common_words(inp))
            covered = sum(c.status == "covered" for c in checks)
            score = round(covered / len(checks), 3)
            return _verdict(
                "completeness",
                _describe_facts(checks),
                {"key_facts": {"covered": covered, "total": len(checks)}, "score": score},
                score=score,
            )
        if is_refusal(inp.answer):
            return _verdict(
                "completeness", "no key facts; the answer is a refusal", {"refusal": True, "score": 0.0}, score=0.0
            )
        question, answer = content_tokens(inp.question), content_tokens(inp.answer)
        covered = len(question & answer)
        score = round(covered / len(question), 3) if question else 1.0
        reasoning = f"no key facts: the answer covers {covered} of {len(question)} content words of the question"
        return _verdict(
            "completeness",
            reasoning,
            {"question_words": len(question), "covered": covered, "score": score},
            score=score,
        )

    # ---- 0/1 metrics

    def _faithfulness(self, inp: JudgeInput) -> Verdict:
        g = _grounding(inp, self._citations)
        passing = g.score >= FAITHFUL_MIN
        total = len(g.checks)
        reasoning = (
            f"groundedness {g.score:g}/5 ({len(g.supported)} of {total} claims supported) {'>=' if passing else '<'} {FAITHFUL_MIN:g}"
            if total
            else "empty answer"
        )
        data = {
            "groundedness": g.score,
            "claims": total,
            "supported": len(g.supported),
            "threshold": FAITHFUL_MIN,
            "score": float(passing),
        }
        return _verdict(
            "faithfulness",
            reasoning,
            data,
            score=float(passing),
            label=passing,
            supported_claims=g.supported,
            unsupported_claims=g.unsupported,
        )

    def _relevancy(self, inp: JudgeInput) -> Verdict:
        refusal = _refusal_match(inp.answer)
        question, answer = content_tokens(inp.question), content_tokens(inp.answer)
        covered = len(question & answer)
        share = covered / len(question) if question else 1.0
        passing = refusal is None and share >= RELEVANCY_MIN
        if refusal is not None:
            reasoning = "empty answer" if not refusal else f"the answer is a refusal ({refusal!r})"
        else:
            reasoning = f"the answer contains {covered} of {len(question)} content words of the question ({share:.0%}, needs {RELEVANCY_MIN:.0%})"
        data = {
            "question_words": len(question),
            "covered": covered,
            "share": round(share, 3),
            "refusal": refusal is not None,
            "threshold": RELEVANCY_MIN,
            "score": float(passing),
        }
        return _verdict("relevancy", reasoning, data, score=float(passing), label=passing)

    # ---- classifiers

    def _abstention(self, inp: JudgeInput) -> Verdict:
        phrase = _refusal_match(inp.answer)
        if phrase is None:
            reasoning = "no refusal phrase found"
        else:
            reasoning = f"refusal phrase {phrase!r}" if phrase else "empty answer"
        return _verdict(
            "abstention", reasoning, {"refusal": phrase is not None, "phrase": phrase}, label=phrase is not None
        )

    def _conflict_ack(self, inp: JudgeInput) -> Verdict:
        text = " ".join(_normalise(inp.answer).split())
        strong = sorted({m.group(0) for m in _STRONG_MARKERS.finditer(text)})
        weak = sorted({m.group(0) for m in _WEAK_MARKERS.finditer(text)})
        dates = _distinct_dates(inp.answer)
        acknowledged = bool(strong) or len(dates) >= 2 or len(weak) >= 2
        if acknowledged:
            signals = strong + weak + ([f"{len(dates)} different dates"] if len(dates) >= 2 else [])
            reasoning = "the answer names both sides: " + ", ".join(signals)
        else:
            reasoning = "no conflict wording and fewer than two different dates"
        data = {"strong": strong, "weak": weak, "dates": [list(d) for d in dates], "label": acknowledged}
        return _verdict("conflict_ack", reasoning, data, label=acknowledged)
