"""The offline lexical judge (SPEC section 6): deterministic token-overlap heuristics.

No network, no I/O, standard library only; the same input always gives the same
verdict (``repeat_index`` is ignored). It stands in for the LLM judge when no
judge model is configured, and every verdict's reasoning ends with "(heuristic)".

Tokens: lowercase words and numbers; contractions expanded (``don't`` -> ``do
not``), possessive ``'s`` dropped, a small English stopword list removed (``not``,
``no`` and ``never`` are kept), and a light suffix stripper (plurals, ``-ed``/
``-ing``, ``-ly``/``-al``/``-ion``, a final ``-e``) applied identically to every
text, so ``authored`` meets ``Author`` and ``proposed`` meets ``proposal``. A token
holding a digit is a *number* (``50``, ``47832``, the parts ``2023``/``11``/``15``
of ``2023-11-15``; leading zeros and thousands commas dropped), never stemmed,
and must match exactly: that is what catches "100 million" against "50 million".

Scores (thresholds are the module constants below):

- groundedness 0-5: the answer is split into claims (sentences, bullet items,
  ``;`` parts; citation markers, headings and a trailing ``Sources:`` list
  dropped). A claim is supported when >= ``CLAIM_SUPPORT`` of its distinct content
  tokens, and every number in it, occur in the *union* of the retrieved contexts
  (a sentence often joins facts from two chunks). Score = 5 * supported / claims,
  one decimal; no claims -> 0, "empty answer". Citations are not required.
- correctness 0-5: the mean of the available parts times 5, one decimal: the share
  of key facts covered by the answer (>= ``FACT_COVERAGE`` of a fact's tokens and all
  its numbers) and the token F1 (distinct content tokens) with the reference answer.
  With neither, the share of the answer's tokens found in question + contexts
  (0 for a refusal), and the reasoning says so.
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
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Optional

from pytest_rageval.judges.base import JudgeError, JudgeInput, Verdict

__all__ = [
    "CLAIM_SUPPORT",
    "FACT_COVERAGE",
    "FAITHFUL_MIN",
    "LEXICAL_METRICS",
    "RELEVANCY_MIN",
    "LexicalJudge",
    "content_tokens",
    "is_refusal",
    "split_claims",
]

#: A claim is supported when this share of its content tokens is in the retrieved text.
CLAIM_SUPPORT = 0.6
#: A key fact is covered when this share of its content tokens is in the answer.
FACT_COVERAGE = 0.6
#: faithfulness passes when groundedness reaches this (0-5 scale).
FAITHFUL_MIN = 4.0
#: relevancy passes when the answer covers this share of the question's content tokens.
RELEVANCY_MIN = 0.5

#: What the lexical judge scores; reasoning_quality needs a reader, not token overlap.
LEXICAL_METRICS: tuple[str, ...] = (
    "groundedness",
    "correctness",
    "faithfulness",
    "relevancy",
    "completeness",
    "abstention",
    "conflict_ack",
)

_SUFFIX = " (heuristic)"

# --------------------------------------------------------------------------- tokens

_STOPWORDS = frozenset(
    """
    a an the and or nor but if then else so of to in on at by for with from into onto
    about as than via per is are was were be been being am do does did doing done have
    has had having will would shall should can could may might must this that these
    those it its itself they them their theirs themselves he him his she her hers we us
    our ours you your yours me my mine who whom whose which what when where why how
    there here also just only very too such other some any each all both either neither
    more most much many few own same again further once up down out over under after
    before between during through above below off while because until against however
    although though whether yes ok okay please according etc eg ie re ve ll
    """.split()
)

_APOSTROPHES = ("\u2019", "\u2018", "\u02bc", "`")
_CONTRACTION = re.compile(r"n't\b|'(?:m|re|ve|ll|d|s)\b")
_EXPANSIONS = {"n't": " not", "'m": " am", "'re": " are", "'ve": " have", "'ll": " will", "'d": " would", "'s": ""}
_BARE_NEGATIONS = {"cannot": "can not", "cant": "can not"} | {
    word: word[:-2] + " not"
    for word in "dont doesnt didnt isnt arent wasnt werent couldnt wouldnt shouldnt hasnt havent hadnt".split()
}
_BARE_NEGATION = re.compile(r"\b(?:" + "|".join(_BARE_NEGATIONS) + r")\b")
_DIGIT_GROUPS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_TOKEN = re.compile(r"[^\W_]+(?:\.\d+)*")


def _normalise(text: str) -> str:
    """Lowercase, straight apostrophes, contractions expanded (``can't``/``cannot``/``dont`` -> ``can not``/
    ``do not``), possessive ``'s`` and digit-group commas dropped."""
    text = text.lower()
    for mark in _APOSTROPHES:
        if mark in text:
            text = text.replace(mark, "'")
    if "'" in text:
        text = text.replace("won't", "will not").replace("can't", "can not")
        text = _CONTRACTION.sub(lambda m: _EXPANSIONS[m.group(0)], text)
    text = _BARE_NEGATION.sub(lambda m: _BARE_NEGATIONS[m.group(0)], text)
    return _DIGIT_GROUPS.sub("", text) if "," in text else text


def _is_number(token: str) -> bool:
    """A token holding a digit (the tokeniser yields letters and digits only): matched exactly, never stemmed."""
    return not token.isalpha()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """A light, consistent suffix stripper (not Porter): plural, -ed/-ing, -ly/-al/-ion, final -e."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "ches", "shes", "xes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    stripped = False
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word, stripped = word[: -len(suffix)], True
            break
    for suffix in ("ly", "al", "ion"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word, stripped = word[: -len(suffix)], True
    if not stripped and word.endswith("e") and len(word) >= 4:
        word = word[:-1]
    return word


@lru_cache(maxsize=16384)
def _tokens(text: str) -> tuple[str, ...]:
    """Content tokens of ``text`` in order, duplicates kept."""
    out: list[str] = []
    for raw in _TOKEN.findall(_normalise(text)):
        if raw.isalpha():
            if len(raw) > 1 and raw not in _STOPWORDS:
                out.append(_stem(raw))
        else:
            out.append((raw.lstrip("0") or "0") if raw.isdigit() else raw)
    return tuple(out)


def content_tokens(text: str) -> frozenset[str]:
    """The distinct content tokens of ``text`` (stopwords dropped, words stemmed, numbers kept)."""
    return frozenset(_tokens(text))


@lru_cache(maxsize=1024)
def _vocabulary(texts: tuple[str, ...]) -> frozenset[str]:
    """The union of the content tokens of several texts."""
    vocab: set[str] = set()
    for text in texts:
        vocab.update(_tokens(text))
    return frozenset(vocab)


@dataclass(frozen=True)
class _Overlap:
    """How much of a text's content tokens another text holds."""

    covered: int
    total: int
    missing_numbers: tuple[str, ...]

    @property
    def share(self) -> float:
        return self.covered / self.total if self.total else 0.0

    def passes(self, minimum: float) -> bool:
        """At least ``minimum`` of the tokens present and every number present."""
        return self.total > 0 and not self.missing_numbers and self.covered >= minimum * self.total - 1e-9


def _overlap(tokens: frozenset[str], vocabulary: frozenset[str]) -> _Overlap:
    """Share of ``tokens`` found in ``vocabulary``, with the numbers that are not."""
    missing = tuple(sorted(t for t in tokens if _is_number(t) and t not in vocabulary))
    return _Overlap(len(tokens & vocabulary), len(tokens), missing)


def _f1(candidate: frozenset[str], reference: frozenset[str]) -> float:
    """Token F1 over distinct content tokens (a word repeated in the reference counts once)."""
    common = len(candidate & reference)
    if not common:
        return 0.0
    precision, recall = common / len(candidate), common / len(reference)
    return 2 * precision * recall / (precision + recall)


# --------------------------------------------------------------------------- claims

_CITATIONS = (
    re.compile(r"\[\^\w+\]"),  # footnotes [^1]
    re.compile(r"\[\s*\d+(?:\s*[,;\u2013-]\s*\d+)*\s*\]"),  # [1, 2], [1-3]
    re.compile(r"\[\s*(?:sources?|docs?|documents?|chunks?|refs?|references?|citations?|context)\b[^\]]*\]", re.I),
    re.compile(r"\[[^\]\s]*[/.][^\]\s]*\]"),  # [notes/stip.md]
    re.compile(
        r"\(\s*(?:sources?|see|refs?|references?|cited|citations?|docs?|documents?|chunks?)\s*[:\s][^)]*\)", re.I
    ),
    re.compile(r"\u3010[^\u3011]*\u3011"),  # 【4:0†source】
)
_MD_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_MD_NOISE = re.compile(r"\*\*|__|`")
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+(?=[.,;:!?])")
_SOURCES_LINE = re.compile(r"^\s*(?:sources?|references?|citations?)\s*:", re.I)
_BULLET = re.compile(r"^\s*(?:[-*+\u2022\u25cf\u2023]|\d{1,3}[.)]|[a-z][.)])\s+", re.I)
_HEADING = re.compile(r"^\s*#{1,6}\s")
_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_INITIALS = re.compile(r"(?:[a-z]\.)*[a-z]")  # "J", "U.S"
_ABBREVIATIONS = frozenset("e.g i.e etc vs mr mrs ms dr st approx fig inc ltd jr sr cf al".split())


def _strip_citations(text: str) -> str:
    """Drop citation markers ([1], (source: ...), 【...】) and keep link texts."""
    text = _MD_LINK.sub(r"\1", text)
    for pattern in _CITATIONS:
        text = pattern.sub("", text)
    return _SPACE_BEFORE_PUNCT.sub("", _MD_NOISE.sub("", text))


def _blocks(text: str) -> list[str]:
    """Paragraphs and bullet items up to a ``Sources:`` line; wrapped lines of one paragraph are joined."""
    blocks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if _SOURCES_LINE.match(_BULLET.sub("", line)):
            break  # a trailing source list is not a claim
        if not line.strip() or _HEADING.match(line):
            blocks.append(" ".join(current))
            current = []
            continue
        if _BULLET.match(line):
            blocks.append(" ".join(current))
            current = [_BULLET.sub("", line)]
        else:
            current.append(line.strip())
    blocks.append(" ".join(current))
    return [b for b in blocks if b.strip()]


def _sentences(block: str) -> list[str]:
    """Split at sentence ends followed by a capital or digit, not after an abbreviation or initial."""
    pieces: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(block):
        before = block[start : match.start()].rsplit(None, 1)
        word = before[-1].lower().rstrip(".") if before else ""
        if word in _ABBREVIATIONS or _INITIALS.fullmatch(word):
            continue
        pieces.append(block[start : match.end()])
        start = match.end()
    pieces.append(block[start:])
    return pieces


def split_claims(answer: str) -> list[str]:
    """The answer's claims: sentences, bullet items and ``;``-separated parts with content words.

    Citation markers are removed first; headings, ``Sources:`` lines and lead-ins ending with
    ``:`` are not claims.
    """
    claims: list[str] = []
    for block in _blocks(_strip_citations(answer)):
        for sentence in _sentences(block):
            for part in sentence.split(";"):
                part = part.strip(" \t-\u2013\u2014,")
                if part and not part.endswith(":") and _tokens(part):
                    claims.append(part)
    return claims


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


def _refusal_match(answer: str) -> Optional[str]:
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
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sept", "sep"), ("october", "oct"), ("november", "nov"), ("december", "dec"),
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

DateKey = tuple[int, Optional[int], Optional[int]]


def _date_key(match: re.Match[str]) -> DateKey:
    """(year, month, day) of a date match; month/day None when not given."""
    g = match.groupdict()

    def num(value: Optional[str]) -> Optional[int]:
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


# --------------------------------------------------------------------------- judge


def _raw(data: dict[str, Any]) -> str:
    """Compact, key-sorted JSON of the computed numbers."""
    return json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _verdict(metric: str, reasoning: str, data: dict[str, Any], **fields: Any) -> Verdict:
    """A Verdict with the heuristic suffix, the raw numbers and no tokens or cost."""
    return Verdict(metric=metric, reasoning=reasoning + _SUFFIX, raw=_raw({"metric": metric, **data}), **fields)


@dataclass(frozen=True)
class _Grounding:
    supported: list[str]
    unsupported: list[str]
    shares: list[float]

    @property
    def score(self) -> float:
        total = len(self.supported) + len(self.unsupported)
        return round(5.0 * len(self.supported) / total, 1) if total else 0.0


def _grounding(inp: JudgeInput) -> _Grounding:
    """Check each claim against the union of the retrieved contexts."""
    vocab = _vocabulary(tuple(inp.contexts))
    supported: list[str] = []
    unsupported: list[str] = []
    shares: list[float] = []
    for claim in split_claims(inp.answer):
        overlap = _overlap(content_tokens(claim), vocab)
        shares.append(round(overlap.share, 3))
        (supported if overlap.passes(CLAIM_SUPPORT) else unsupported).append(claim)
    return _Grounding(supported, unsupported, shares)


def _fact_coverage(facts: tuple[str, ...], answer: str) -> tuple[int, list[str]]:
    """How many key facts the answer covers, and the ones it misses."""
    vocab = content_tokens(answer)
    missed = [f for f in facts if not _overlap(content_tokens(f), vocab).passes(FACT_COVERAGE)]
    return len(facts) - len(missed), missed


class LexicalJudge:
    """Offline, deterministic judge built on token overlap (SPEC section 6, ``lexical``).

    Scores groundedness, correctness, faithfulness, relevancy, completeness, abstention
    and conflict_ack. It does not score reasoning_quality: clarity and logic are not
    visible in token overlap, so ``supports("reasoning_quality")`` is False and judging
    it raises JudgeError. Every verdict is labelled a heuristic; ``repeat_index`` is
    ignored because the answer never varies.
    """

    name = "lexical"
    heuristic = True
    PROMPT_VERSION = "lexical/v1"

    def __init__(self) -> None:
        self._scorers: dict[str, Callable[[JudgeInput], Verdict]] = {
            "groundedness": self._groundedness,
            "correctness": self._correctness,
            "faithfulness": self._faithfulness,
            "relevancy": self._relevancy,
            "completeness": self._completeness,
            "abstention": self._abstention,
            "conflict_ack": self._conflict_ack,
        }

    def describe(self) -> dict[str, Any]:
        """What config.json records about this judge."""
        return {
            "name": self.name,
            "model": "lexical-heuristic",
            "base_url": None,
            "prompt_versions": {metric: self.PROMPT_VERSION for metric in LEXICAL_METRICS},
            "temperature": 0.0,
            "seed": None,
            "json_mode": None,
            "heuristic": True,
        }

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
        g = _grounding(inp)
        total = len(g.supported) + len(g.unsupported)
        data = {"claims": total, "supported": len(g.supported), "shares": g.shares,
                "threshold": CLAIM_SUPPORT, "contexts": len(inp.contexts), "score": g.score}
        if not total:
            reasoning = "empty answer: no claims to check"
        else:
            reasoning = (f"{len(g.supported)} of {total} claims share >={CLAIM_SUPPORT:.0%} of their content "
                         f"words (and every number) with the retrieved text")
            if not inp.contexts:
                reasoning += "; no retrieved context"
        return _verdict("groundedness", reasoning, data, score=g.score,
                        supported_claims=g.supported, unsupported_claims=g.unsupported)

    def _correctness(self, inp: JudgeInput) -> Verdict:
        answer_tokens = _tokens(inp.answer)
        data: dict[str, Any] = {"key_facts": None, "reference_f1": None, "fallback_overlap": None}
        if not answer_tokens:
            return _verdict("correctness", "empty answer", {**data, "score": 0.0}, score=0.0)
        parts: list[float] = []
        notes: list[str] = []
        if inp.key_facts:
            covered, missed = _fact_coverage(tuple(inp.key_facts), inp.answer)
            parts.append(covered / len(inp.key_facts))
            data["key_facts"] = {"covered": covered, "total": len(inp.key_facts)}
            notes.append(f"{covered} of {len(inp.key_facts)} key facts present"
                         + (f" (missing: {'; '.join(missed)})" if missed else ""))
        if inp.reference_answer and _tokens(inp.reference_answer):
            f1 = _f1(frozenset(answer_tokens), content_tokens(inp.reference_answer))
            parts.append(f1)
            data["reference_f1"] = round(f1, 3)
            notes.append(f"token F1 with the reference answer {f1:.2f}")
        if not parts:
            refusal = is_refusal(inp.answer)
            share = 0.0 if refusal else _overlap(
                frozenset(answer_tokens), _vocabulary((inp.question, *inp.contexts))).share
            parts.append(share)
            data["fallback_overlap"] = round(share, 3)
            notes.append("no reference answer or key facts: " + (
                "the answer is a refusal" if refusal else
                f"{share:.0%} of the answer's content words appear in the question and retrieved text"))
        score = round(5.0 * sum(parts) / len(parts), 1)
        data["score"] = score
        return _verdict("correctness", "; ".join(notes), data, score=score)

    def _completeness(self, inp: JudgeInput) -> Verdict:
        if not _tokens(inp.answer):
            return _verdict("completeness", "empty answer", {"score": 0.0}, score=0.0)
        if inp.key_facts:
            covered, missed = _fact_coverage(tuple(inp.key_facts), inp.answer)
            score = round(covered / len(inp.key_facts), 3)
            reasoning = f"{covered} of {len(inp.key_facts)} key facts present" + (
                f" (missing: {'; '.join(missed)})" if missed else "")
            return _verdict("completeness", reasoning,
                            {"key_facts": {"covered": covered, "total": len(inp.key_facts)}, "score": score},
                            score=score)
        if is_refusal(inp.answer):
            return _verdict("completeness", "no key facts; the answer is a refusal",
                            {"refusal": True, "score": 0.0}, score=0.0)
        overlap = _overlap(content_tokens(inp.question), content_tokens(inp.answer))
        score = round(overlap.share, 3) if overlap.total else 1.0
        reasoning = (f"no key facts: the answer covers {overlap.covered} of {overlap.total} content words "
                     "of the question")
        return _verdict("completeness", reasoning,
                        {"question_words": overlap.total, "covered": overlap.covered, "score": score}, score=score)

    # ---- 0/1 metrics

    def _faithfulness(self, inp: JudgeInput) -> Verdict:
        g = _grounding(inp)
        passing = g.score >= FAITHFUL_MIN
        total = len(g.supported) + len(g.unsupported)
        reasoning = (f"groundedness {g.score:g}/5 ({len(g.supported)} of {total} claims supported) "
                     f"{'>=' if passing else '<'} {FAITHFUL_MIN:g}" if total else "empty answer")
        data = {"groundedness": g.score, "claims": total, "supported": len(g.supported),
                "threshold": FAITHFUL_MIN, "score": float(passing)}
        return _verdict("faithfulness", reasoning, data, score=float(passing), label=passing,
                        supported_claims=g.supported, unsupported_claims=g.unsupported)

    def _relevancy(self, inp: JudgeInput) -> Verdict:
        refusal = _refusal_match(inp.answer)
        overlap = _overlap(content_tokens(inp.question), content_tokens(inp.answer))
        share = overlap.share if overlap.total else 1.0
        passing = refusal is None and share >= RELEVANCY_MIN
        if refusal is not None:
            reasoning = "empty answer" if not refusal else f"the answer is a refusal ({refusal!r})"
        else:
            reasoning = (f"the answer contains {overlap.covered} of {overlap.total} content words of the "
                         f"question ({share:.0%}, needs {RELEVANCY_MIN:.0%})")
        data = {"question_words": overlap.total, "covered": overlap.covered, "share": round(share, 3),
                "refusal": refusal is not None, "threshold": RELEVANCY_MIN, "score": float(passing)}
        return _verdict("relevancy", reasoning, data, score=float(passing), label=passing)

    # ---- classifiers

    def _abstention(self, inp: JudgeInput) -> Verdict:
        phrase = _refusal_match(inp.answer)
        if phrase is None:
            reasoning = "no refusal phrase found"
        else:
            reasoning = f"refusal phrase {phrase!r}" if phrase else "empty answer"
        return _verdict("abstention", reasoning, {"refusal": phrase is not None, "phrase": phrase},
                        label=phrase is not None)

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
