"""Text analysis for the lexical judge: canonical numbers and dates, tokens, negation, citations, claims.

Pure and deterministic (no sets are iterated into results without sorting). Every
text the judge compares (answer, contexts, question, key facts, reference) goes
through the same steps, so two spellings of one fact meet:

1. canonical form (case kept): ``2024-06-28`` -> ``28 June 2024``; ``Jun 28`` ->
   ``June 28``; ``50,000,000`` / ``50 million`` / ``50M`` -> ``50000000``; ``3.29
   billion`` -> ``3290000000``; ``5th`` -> ``5``; ``twelve`` -> ``12``; ``58 percent`` ->
   ``58%``; the modal verb ``may`` (lowercase) is dropped, the month ``May`` kept.
2. lowercase, straight apostrophes, contractions expanded (``don't`` -> ``do not``),
   possessive ``'s`` dropped.
3. tokens: words (stopwords dropped, a light suffix stripper applied) and *exact*
   tokens, which are never stemmed and must match as they are: numbers (``71.2``,
   ``58%``) and month names.

Negation: ``not``, ``no``, ``never``, ``without``... put the content words after them,
up to the end of the clause (punctuation, ``but``, ``and``, ``because``...), in a
*negated scope* (at most ``NEGATION_SCOPE`` words); comparing scopes is how "was not executed" meets "was executed".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from re import Pattern

__all__ = [
    "DEFAULT_CITATION_PATTERNS",
    "Analysis",
    "analyse",
    "analyse_fact",
    "clauses",
    "compile_citation_patterns",
    "content_tokens",
    "context_sentences",
    "display",
    "exact_class",
    "is_exact",
    "names",
    "normalise",
    "spelled_numbers",
    "split_claims",
    "strip_citations",
]

# --------------------------------------------------------------------------- canonical form

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_ABBREVIATIONS = {m[:3]: m for m in MONTHS} | {"Sept": "September"}
_ABBREVIATED = "|".join(sorted(_MONTH_ABBREVIATIONS, key=len, reverse=True))
_MONTH_BEFORE_NUMBER = re.compile(rf"\b({_ABBREVIATED})\.?(?=\s+\d)")
_MONTH_AFTER_NUMBER = re.compile(rf"(?<=\d )({_ABBREVIATED})\b\.?")
_ISO_DATE = re.compile(r"(?<![\w.-])((?:19|20)\d\d)-(0[1-9]|1[0-2])(?:-(0[1-9]|[12]\d|3[01]))?(?![\w-]|\.\d)")
_DIGIT_GROUPS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_MAGNITUDE_WORDS = {"hundred": 2, "thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_MAGNITUDE_SUFFIXES = {"k": 3, "m": 6, "mn": 6, "b": 9, "bn": 9}
_MAGNITUDE = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*(hundred|thousand|million|billion|trillion)\b|(k|mn|m|bn|b)(?![\w]))", re.I
)
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.I)
_PERCENT = re.compile(r"(?<=\d)\s*(?:percent|per cent)\b", re.I)
_MODAL_MAY = re.compile(r"\bmay\b")  # lowercase: the verb; "May" (capitalised) is the month
_UNITS = {
    w: n
    for n, w in enumerate(
        "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
    if w != "_"
}  # "one" stays a word: "the one who..." is no number
_TENS = {w: 10 * n for n, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_NUMBER_WORD = re.compile(
    r"\b(?:(" + "|".join(_TENS) + r")(?:[-\s](one|" + "|".join(u for u in _UNITS if _UNITS[u] < 10) + r"))?"
    r"|(" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r"))\b",
    re.I,
)
_UNIT_OR_ONE = {**_UNITS, "one": 1}
_SMALL_WORD = (
    r"(?:(?:"
    + "|".join(_TENS)
    + r")(?:-(?:"
    + "|".join(u for u in _UNIT_OR_ONE if _UNIT_OR_ONE[u] < 10)
    + r"))?|"
    + "|".join(sorted(_UNIT_OR_ONE, key=len, reverse=True))
    + r")"
)
_SCALE_WORD = r"(?:hundred|thousand|million|billion)"
#: A number written in words past its first scale word: "nine hundred and seventy-nine", "two thousand five hundred".
_SPELLED_COMPOUND = re.compile(
    rf"\b{_SMALL_WORD}\s+{_SCALE_WORD}(?:(?:\s+and)?\s+{_SMALL_WORD}(?:\s+{_SCALE_WORD})?)+\b", re.I
)


def _spelled_compound(match: re.Match[str]) -> str:
    """The value of a number written in words: "nine hundred and seventy-nine" -> 979."""
    total = current = 0
    for word in re.split(r"[\s-]+", match.group(0).lower()):
        if word == "and":
            continue
        if word == "hundred":
            current *= 100
        elif word in _MAGNITUDE_WORDS:
            total, current = total + current * 10 ** _MAGNITUDE_WORDS[word], 0
        else:
            current += _UNIT_OR_ONE.get(word, 0) + _TENS.get(word, 0)
    return str(total + current)


def _magnitude(match: re.Match[str]) -> str:
    word = (match.group(2) or "").lower()
    power = _MAGNITUDE_WORDS[word] if word else _MAGNITUDE_SUFFIXES[match.group(3).lower()]
    try:
        value = Decimal(match.group(1)).scaleb(power)
    except InvalidOperation:  # pragma: no cover - the pattern only admits decimals
        return match.group(0)
    return format(value.normalize(), "f") if value == value.to_integral_value() else format(value, "f")


def _number_word(match: re.Match[str]) -> str:
    if match.group(3):
        return str(_UNITS[match.group(3).lower()])
    return str(_TENS[match.group(1).lower()] + (_UNIT_OR_ONE[match.group(2).lower()] if match.group(2) else 0))


def _iso_date(match: re.Match[str]) -> str:
    year, month, day = match.group(1), MONTHS[int(match.group(2)) - 1], match.group(3)
    return f"{int(day)} {month} {year}" if day else f"{month} {year}"


@lru_cache(maxsize=16384)
def canonical(text: str) -> str:
    """``text`` with dates, amounts, ordinals, number words and percentages in one spelling (case kept)."""
    text = _ISO_DATE.sub(_iso_date, text)
    text = _MONTH_BEFORE_NUMBER.sub(lambda m: _MONTH_ABBREVIATIONS[m.group(1)], text)
    text = _MONTH_AFTER_NUMBER.sub(lambda m: _MONTH_ABBREVIATIONS[m.group(1)], text)
    if "," in text:
        text = _DIGIT_GROUPS.sub("", text)
    text = _SPELLED_COMPOUND.sub(_spelled_compound, text)
    text = _NUMBER_WORD.sub(_number_word, text)
    text = _MAGNITUDE.sub(_magnitude, text)
    text = _ORDINAL.sub(r"\1", text)
    text = _PERCENT.sub("%", text)
    return _MODAL_MAY.sub("", text)


_APOSTROPHES = ("\u2019", "\u2018", "\u02bc", "`")
_CONTRACTION = re.compile(r"n't\b|'(?:m|re|ve|ll|d|s)\b")
_EXPANSIONS = {"n't": " not", "'m": " am", "'re": " are", "'ve": " have", "'ll": " will", "'d": " would", "'s": ""}
_BARE_NEGATIONS = {"cannot": "can not", "cant": "can not"} | {
    word: word[:-2] + " not"
    for word in "dont doesnt didnt isnt arent wasnt werent couldnt wouldnt shouldnt hasnt havent hadnt".split()
}
_BARE_NEGATION = re.compile(r"\b(?:" + "|".join(_BARE_NEGATIONS) + r")\b")


def normalise(text: str) -> str:
    """Lowercase, straight apostrophes, contractions expanded (``can't``/``cannot``/``dont`` -> ``can not``/
    ``do not``), possessive ``'s`` dropped."""
    text = text.lower()
    for mark in _APOSTROPHES:
        if mark in text:
            text = text.replace(mark, "'")
    if "'" in text:
        text = text.replace("won't", "will not").replace("can't", "can not")
        text = _CONTRACTION.sub(lambda m: _EXPANSIONS[m.group(0)], text)
    return _BARE_NEGATION.sub(lambda m: _BARE_NEGATIONS[m.group(0)], text)


# --------------------------------------------------------------------------- tokens

STOPWORDS = frozenset(
    """
    a an the and or nor but if then else so of to in on at by for with from into onto
    about as than via per is are was were be been being am do does did doing done have
    has had having will would shall should can could might must this that these
    those it its itself they them their theirs themselves he him his she her hers we us
    our ours you your yours me my mine who whom whose which what when where why how
    there here also just only very too such other some any each all both either neither
    more most much many few own same again further once up down out over under after
    before between during through above below off while because until against however
    although though whether yes ok okay please according etc eg ie re ve ll
    """.split()
)
#: Words that carry a key fact's meaning ("71.2% For", "push the price down", "after the quarter").
_FACT_WORDS = frozenset(
    "for against before after over under up down more most few all both only once again off out above below "
    "between during until same other own further".split()
)
FACT_STOPWORDS = STOPWORDS - _FACT_WORDS
NEGATIONS = frozenset("not no never none nor neither without nobody nothing".split())
#: How many content words after a negation it covers ("was not executed", "no Tally vote").
NEGATION_SCOPE = 2
#: Verbs that a negation following them turns into a denial of the whole clause ("did not", "was never").
AUXILIARIES = frozenset(
    "is was are were be been do does did has have had can could will would shall should may might must".split()
)
#: What after a negation word states something positive: "not only", "no later than", "not ... until".
_NOT_NEGATING_NEXT = frozenset("only just merely simply least".split())
_COMPARATIVES = frozenset("later earlier sooner more less fewer longer".split())
_UNTIL = frozenset({"until", "till"})
_CLAUSE_BREAKS = frozenset("but and although though while whereas because since so yet however instead".split())
_SCAN = re.compile(r"[^\W_]+(?:\.\d+)*%?|[,;:.!?()\[\]]")


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


_MONTH_TOKENS = frozenset(_stem(m.lower()) for m in MONTHS)


def _number(raw: str) -> str:
    """One spelling of a number token: no leading zeros, no trailing decimal zeros."""
    percent = "%" if raw.endswith("%") else ""
    body = raw.rstrip("%")
    if body.isdigit():
        body = body.lstrip("0") or "0"
    elif re.fullmatch(r"\d+\.\d+", body):
        whole, _, frac = body.partition(".")
        whole, frac = whole.lstrip("0") or "0", frac.rstrip("0")
        body = f"{whole}.{frac}" if frac else whole
    return body + percent


def _token(raw: str, stop: frozenset[str]) -> str | None:
    """The token of one scanned word (None for a stopword or a single letter)."""
    if raw.isalpha():
        return _stem(raw) if len(raw) > 1 and raw not in stop else None
    return _number(raw)


def exact_class(token: str) -> str | None:
    """``"percent"``, ``"number"`` or ``"month"`` for a token that must match exactly, else None."""
    if token in _MONTH_TOKENS:
        return "month"
    if token.isalpha():
        return None
    return "percent" if token.endswith("%") else "number"


_MONTH_DISPLAY = {_stem(m.lower()): m for m in MONTHS}


def display(token: str) -> str:
    """A token as a reader wants it in a reason: months spelled out, words as stemmed."""
    return _MONTH_DISPLAY.get(token, token)


def is_exact(token: str) -> bool:
    """Numbers and month names are compared exactly: "100 million" never meets "50 million"."""
    return exact_class(token) is not None


@dataclass(frozen=True)
class Analysis:
    """A text's content tokens (in order, duplicates kept), their set, and what is negated."""

    tokens: tuple[str, ...]
    distinct: frozenset[str]
    negated: frozenset[str]  # tokens inside a negation's scope
    negation: bool  # the text holds a negation word
    sentential: bool = False  # a negation right after an auxiliary ("did not", "was never"): it denies the clause

    @property
    def plain(self) -> frozenset[str]:
        """The distinct tokens other than negation words."""
        return self.distinct - NEGATIONS


#: demonym endings and the endings of the place they name: "Tanzanian" -> Tanzania, "Canadian" -> Canada,
#: "Italian" -> Italy, "Kenyan" -> Kenya, "Japanese" -> Japan, "Chinese" -> China, "Pakistani" -> Pakistan
_DEMONYMS = (("ian", ("", "a", "y", "ia")), ("an", ("", "a", "o")), ("ese", ("", "a")), ("i", ("",)))


def demonym_roots(token: str) -> frozenset[str]:
    """The place names a capitalised demonym ``token`` may come from (empty for shorter or other words)."""
    if len(token) < 6 or not token.isalpha():
        return frozenset()
    for ending, places in _DEMONYMS:
        if token.endswith(ending):
            stem = token[: -len(ending)]
            return frozenset(stem + place for place in places if len(stem + place) >= 4)
    return frozenset()


def _capitalised(text: str) -> frozenset[str]:
    return frozenset(normalise(word) for word in _WORD.findall(text) if word[0].isupper())


def _not_negating(raws: Sequence[str], at: int) -> bool:
    """Whether the negation word at ``raws[at]`` starts a construction that states something positive:
    "not only", "no later than", or "not ... until" in the same clause ("was not published until 1859")."""
    following = raws[at + 1 : at + 3]
    if following[:1] and following[0] in _NOT_NEGATING_NEXT:
        return True
    if len(following) == 2 and following[0] in _COMPARATIVES and following[1] == "than":
        return True
    for raw in raws[at + 1 :]:
        if not raw[0].isalnum() or raw in _CLAUSE_BREAKS:
            return False
        if raw in _UNTIL:
            return True
    return False


def _scan(text: str, stop: frozenset[str]) -> Analysis:
    tokens: list[str] = []
    negated: set[str] = set()
    negation = sentential = False
    scope = 0  # content words still inside the current negation's scope
    capitals = _capitalised(canonical(text))
    places: set[str] = set()  # what its capitalised demonyms name ("Tanzanian" states Tanzania)
    raws = [match.group(0) for match in _SCAN.finditer(normalise(canonical(text)))]
    for at, raw in enumerate(raws):
        if not raw[0].isalnum() or raw in _CLAUSE_BREAKS:
            scope = 0
            if not raw[0].isalnum():
                continue
        if raw in NEGATIONS and not _not_negating(raws, at):
            negation, scope = True, NEGATION_SCOPE
            sentential = sentential or (at > 0 and raws[at - 1] in AUXILIARIES)
            tokens.append(raw)
            continue
        token = _token(raw, stop)
        if token is None:
            continue
        tokens.append(token)
        if raw in capitals:
            places |= demonym_roots(raw)
        if scope:
            negated.add(token)
            scope -= 1
    return Analysis(tuple(tokens), frozenset(tokens) | places, frozenset(negated), negation, sentential)


@lru_cache(maxsize=16384)
def analyse(text: str) -> Analysis:
    """Tokens of an answer claim, a context or a question (the full stopword list)."""
    return _scan(text, STOPWORDS)


@lru_cache(maxsize=16384)
def analyse_fact(text: str) -> Analysis:
    """Tokens for key-fact coverage: words like "for", "down", "after" carry a fact's meaning and stay."""
    return _scan(text, FACT_STOPWORDS)


def content_tokens(text: str) -> frozenset[str]:
    """The distinct content tokens of ``text`` (stopwords dropped, words stemmed, numbers and months exact)."""
    return analyse(text).distinct


_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")
_AFTER_BREAK = re.compile(r"[:.!?(\"\u201c]\s*$")


def spelled_numbers(text: str) -> frozenset[str]:
    """Numbers ``text`` writes only as words ("two weeks"): loose talk more often than a figure to check."""
    spelled = {_number_word(m) for m in _NUMBER_WORD.finditer(text)}
    return frozenset(spelled - analyse(_NUMBER_WORD.sub(" ", text)).distinct) if spelled else frozenset()


_CLAUSE_SPLIT = re.compile(r"(?<!\d),|,(?!\d)|[;:()]|\s(?:and|but|while|whereas|although|though)\s", re.I)


def clauses(claim: str) -> list[str]:
    """The parts of a claim between commas, colons and conjunctions ("X got 5, and Y got 7"); a number written in
    words is one number ("nine hundred and seventy-nine" is not split at its "and")."""
    return [part for part in _CLAUSE_SPLIT.split(_SPELLED_COMPOUND.sub(_spelled_compound, claim)) if part.strip()]


def names(claim: str) -> frozenset[str]:
    """Tokens of the capitalised words of ``claim`` that do not open it or follow a colon: names, places, ids.

    A claim whose words are found in the retrieved text but whose name is not ("takes place in
    Porto" against "takes place in Lisbon") has swapped an entity.
    """
    text = canonical(claim)
    found: set[str] = set()
    first = True
    for match in _WORD.finditer(text):
        word = match.group(0)
        opens = first or bool(_AFTER_BREAK.search(text[: match.start()]))
        first = False
        if opens or not word[0].isupper() or word == "I":
            continue
        found.update(analyse(word).tokens)  # the word's own tokens, not the places a demonym names
    return frozenset(found)


# --------------------------------------------------------------------------- citations

_ID = r"[A-Za-z0-9][\w.:#/-]*"
_ID_LIST = rf"{_ID}(?:\s*[,;]\s*{_ID})*"
DEFAULT_CITATION_PATTERNS: tuple[str, ...] = (
    r"\[\^\w+\]",  # footnotes [^1]
    r"\[\s*\d+(?:\s*[,;\u2013-]\s*\d+)*\s*\]",  # [1], [1, 2], [1-3]
    r"(?i)\[\s*(?:sources?|docs?|documents?|chunks?|refs?|references?|citations?|context)\b[^\]]*\]",  # [source: x]
    rf"\[\s*(?=[^\]\s,;]*[\d_:#/.-]){_ID_LIST}\s*\]",  # ids and paths: [LFP-001], [GRANT-7], [guides/setup.md]
    r"(?i)\(\s*(?:sources?|see|refs?|references?|cited|citations?|docs?|documents?|chunks?)\s*[:\s][^)]*\)",
    r"\(\s*[A-Z][A-Z0-9_]*-\d[\w-]*(?:\s*[,;]\s*[A-Z][A-Z0-9_]*-\d[\w-]*)*\s*\)",  # (DOC-12), (LFP-001, LFP-002)
    r"\u3010[^\u3011]*\u3011",  # 【4:0†source】
)
_DEFAULT_COMPILED = tuple(re.compile(p) for p in DEFAULT_CITATION_PATTERNS)
_MD_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_MD_NOISE = re.compile(r"\*\*|__|`")
_MD_EMPHASIS = re.compile(r"(?<![\w*])([*_])(?=[^\s*_])(.+?)(?<=[^\s*_])\1(?![\w*])")  # *x*, _x_; not allow_origins
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+(?=[.,;:!?])")


def compile_citation_patterns(
    lines: Iterable[str], where: str = "rageval_citation_patterns"
) -> tuple[Pattern[str], ...]:
    """Compile extra citation patterns (one regex a line; blank lines skipped).

    Raises ValueError naming ``where``, the line number and the regex error.
    """
    compiled: list[Pattern[str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            compiled.append(re.compile(line.strip()))
        except re.error as exc:
            raise ValueError(f"{where}: line {number}: invalid regular expression {line.strip()!r}: {exc}") from None
    return tuple(compiled)


def strip_citations(text: str, extra: Sequence[Pattern[str]] = ()) -> str:
    """Drop citation markers (built-in forms, then ``extra``) and markdown emphasis (``**x**``, ``*x*``, ``_x_``,
    code marks); keep link texts."""
    text = _MD_LINK.sub(r"\1", text)
    for pattern in (*extra, *_DEFAULT_COMPILED):
        text = pattern.sub("", text)
    return _SPACE_BEFORE_PUNCT.sub("", _MD_EMPHASIS.sub(r"\2", _MD_NOISE.sub("", text)))


# --------------------------------------------------------------------------- claims

_SOURCES_LINE = re.compile(r"^\s*(?:sources?|references?|citations?)\s*:", re.I)
_BULLET = re.compile(r"^\s*(?:[-*+\u2022\u25cf\u2023]|\d{1,3}[.)]|[a-z][.)])\s+", re.I)
_HEADING = re.compile(r"^\s*#{1,6}\s")
_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_INITIALS = re.compile(r"(?:[a-z]\.)*[a-z]")  # "J", "U.S"
_ABBREVIATIONS = frozenset("e.g i.e etc vs mr mrs ms dr st approx fig inc ltd jr sr cf al".split())


def _blocks(text: str, *, sources_end: bool = True) -> list[str]:
    """Paragraphs and bullet items (up to a ``Sources:`` line); wrapped lines of one paragraph are joined."""
    blocks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if sources_end and _SOURCES_LINE.match(_BULLET.sub("", line)):
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


def split_claims(answer: str, citation_patterns: Sequence[Pattern[str]] = ()) -> list[str]:
    """The answer's claims: sentences, bullet items and ``;``-separated parts with content words.

    Citation markers are removed first; headings, ``Sources:`` lines, lead-ins ending with
    ``:`` that something follows and a bare "Yes." or "No." are not claims. The answer's last part
    is a claim however it ends: "You can declare them with BackgroundTasks:" (a sentence that
    introduced a code block the answer left out) states what it says.
    """
    parts = [
        part.strip(" \t-\u2013\u2014,")
        for block in _blocks(strip_citations(answer, citation_patterns))
        for sentence in _sentences(block)
        for part in sentence.split(";")
    ]
    parts = [part for part in parts if part and analyse(part).plain]  # "No." alone is a polarity, not a claim
    last = len(parts) - 1
    return [
        part.rstrip(":").rstrip() if at == last else part
        for at, part in enumerate(parts)
        if at == last or not part.endswith(":")
    ]


@lru_cache(maxsize=1024)
def context_sentences(contexts: tuple[str, ...]) -> tuple[tuple[str, Analysis], ...]:
    """Every sentence of the retrieved contexts with its analysis, in context order."""
    return tuple(
        (sentence, analyse(sentence))
        for context in contexts
        for block in _blocks(context, sources_end=False)
        for sentence in _sentences(block)
        if analyse(sentence).tokens
    )
