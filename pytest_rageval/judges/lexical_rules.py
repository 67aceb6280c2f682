"""Decisive checks of the lexical judge: the words that make an answer wrong however many others it shares.

Pure. Each check returns why the answer contradicts the reference (a reason naming the word that decided),
or None. ``judges.lexical`` applies them to correctness whenever a reference answer or key facts exist:

* **polarity**: a yes/no question ("Are A and B both ...?") whose reference opens with "yes" or "no",
  answered with the other;
* **option**: an "A or B" question whose reference names one option, answered with the other;
* **negation**: the answer's clauses that speak most of the reference negate what it states;
* **rival names**: names, numbers, dates and ids of the key facts (or the reference) that the answer
  lacks, while it holds names of its own that neither the reference nor the question has ("the Baroque
  era" for "the Victorian era"); **rival numbers**: a number of the reference replaced by another;
* **swapped subject**: a phrase the question asks about and the reference repeats ("cookie parameters"),
  written by the answer with another noun first ("header parameters").

None of them reads the retrieved text: a correctness verdict compares the answer with the reference.

``same_choice`` is the other side: the answer chooses as the reference does on a yes/no or "A or B"
question. ``number_swap`` serves groundedness: a number that counts what the retrieved text counts
with another number ("two Followill brothers" against "three").
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from .lexical_text import (
    analyse,
    analyse_fact,
    canonical,
    clauses,
    demonym_roots,
    display,
    exact_class,
    names,
    normalise,
    spelled_numbers,
    split_claims,
)

__all__ = [
    "answer_polarity",
    "lowercase_words",
    "negated_reference",
    "number_pairs",
    "number_swap",
    "option_conflict",
    "polarity_conflict",
    "polarity_of_fact",
    "rival_names",
    "rival_numbers",
    "same_choice",
    "substituted",
    "swapped_subject",
]

_AUXILIARIES = frozenset(
    "is are was were do does did can could has have had will would should shall may might must".split()
)
_YES = frozenset("yes yeah yep correct true indeed".split())
_LEAD = re.compile(r"[a-z]+")
_OPTION_SPLIT = re.compile(r"\s+or\s+", re.I)
_OPTION_END = re.compile(r"[?,;:]")
_OPTION_WORDS = 5  # words of each side of " or " that name an option
_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")


#: "The answer is no." says no: the words before the polarity.
_LEAD_IN = r"^\W*(?:the\s+(?:short\s+)?answer\s+is\b\W*)?"
_ANSWER_IS = re.compile(_LEAD_IN)
_BARE = re.compile(_LEAD_IN + r"[a-z]+\W*$")


def _first_word(text: str) -> str | None:
    match = _LEAD.search(_ANSWER_IS.sub("", normalise(text)))
    return match.group(0) if match else None


def bare_polarity(answer: str) -> bool | None:
    """True for an answer that is only "yes" ("Yes.", "The answer is yes."), False for only "no", else None."""
    return _polarity(answer) if _BARE.match(normalise(answer)) else None


def _polarity(text: str) -> bool | None:
    first = _first_word(text)
    if first in _YES:
        return True
    if first in ("no", "nope"):
        return False
    return None


def is_yes_no_question(question: str) -> bool:
    """A question opening with an auxiliary verb and naming no alternatives ("Are both bands American?")."""
    return _first_word(question) in _AUXILIARIES and not _OPTION_SPLIT.search(question)


def polarity_conflict(question: str, expected: Sequence[str], answer: str) -> str | None:
    """The answer opens with yes where the reference (or a key fact) opens with no, or the other way round."""
    if not is_yes_no_question(question):
        return None
    wanted = next((p for p in (_polarity(text) for text in expected) if p is not None), None)
    given = _polarity(answer)
    if wanted is None or given is None or wanted == given:
        return None
    return f"the answer says {'yes' if given else 'no'} where the reference says {'yes' if wanted else 'no'}"


def polarity_of_fact(fact: str) -> bool | None:
    """True for a key fact that is just "yes", False for just "no", else None."""
    words = _LEAD.findall(normalise(fact))
    return (words[0] in _YES) if len(words) == 1 and words[0] in _YES | {"no"} else None


def answer_polarity(answer: str) -> bool | None:
    """Whether the answer opens with yes (True) or no (False), else None."""
    return _polarity(answer)


def same_choice(question: str, expected: Sequence[str], answer: str) -> str | None:
    """What a yes/no or "A or B" question is answered with, when the answer chooses as the reference does:
    "yes", "no" or the option's words; else None."""
    if is_yes_no_question(question):
        wanted = next((p for p in (_polarity(text) for text in expected) if p is not None), None)
        given = _polarity(answer)
        return ("yes" if given else "no") if wanted is not None and wanted == given else None
    options = _options(question)
    if options is None:
        return None
    expected_option = next((i for i in (_chosen_option(text, options) for text in expected) if i is not None), None)
    chosen = _chosen_option(answer, options)
    return _surface(options[chosen], [question]) if chosen is not None and expected_option == chosen else None


def _options(question: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """The tokens naming each option of an "A or B" question (names where it has them), or None."""
    parts = _OPTION_SPLIT.split(question, maxsplit=1)
    if len(parts) != 2:
        return None
    left_words = re.split(r"\s+", _OPTION_END.split(parts[0])[-1].strip())[-_OPTION_WORDS:]
    right_words = re.split(r"\s+", _OPTION_END.split(parts[1])[0].strip())[:_OPTION_WORDS]
    sides = []
    for words in (left_words, right_words):
        text = " ".join(words)
        capitalised = " ".join(w for w in words if w[:1].isupper())
        tokens = analyse(capitalised).distinct if capitalised else frozenset()
        if not tokens:
            tokens = analyse(text).distinct
        sides.append(tokens)
    left, right = sides[0] - sides[1], sides[1] - sides[0]
    return (left, right) if left and right else None


def _names_option(tokens: frozenset[str], options: tuple[frozenset[str], frozenset[str]]) -> int | None:
    hits = [bool(option & tokens) and len(option & tokens) * 2 >= len(option) for option in options]
    return hits.index(True) if hits.count(True) == 1 else None


def _chosen_option(answer: str, options: tuple[frozenset[str], frozenset[str]]) -> int | None:
    """The option an answer chooses: the one it names, or, when it names both, the one its first clause names
    alone ("The New Yorker was started first, ... ahead of Time")."""
    chosen = _names_option(analyse(answer).distinct, options)
    if chosen is not None:
        return chosen
    first = next((clause for claim in split_claims(answer) for clause in clauses(claim)), "")
    return _names_option(analyse(first).distinct, options)


def option_conflict(question: str, expected: Sequence[str], answer: str) -> str | None:
    """The answer chooses the option of an "A or B" question that the reference does not (:func:`_chosen_option`)."""
    options = _options(question)
    if options is None:
        return None
    wanted = next((i for i in (_chosen_option(text, options) for text in expected) if i is not None), None)
    given = _chosen_option(answer, options)
    if wanted is None or given is None or wanted == given:
        return None
    return f"the answer chooses {_surface(options[given], [question])} where the reference chooses {_surface(options[wanted], [question])}"


Pair = tuple[str, str]


_NAMED_NUMBER = re.compile(r"\b[A-Z][\w-]*[\s-]+(\d[\d.,]*)\b")  # "Apollo 11", "Part 2", "POL-21": a name, not a count
_YEAR = re.compile(r"1\d{3}|20\d{2}")


def number_pairs(text: str) -> frozenset[Pair]:
    """Each count of ``text`` (a number in digits or words) with the content word after it: "two Followill
    brothers" gives ("2", "followill"). Years and numbers that belong to a name ("Apollo 11") count nothing."""
    named = {m.group(1).replace(",", "") for m in _NAMED_NUMBER.finditer(canonical(text))}
    tokens = analyse(text).tokens
    return frozenset(
        (a, b)
        for a, b in itertools.pairwise(tokens)
        if exact_class(a) == "number" and not exact_class(b) and a not in named and not _YEAR.fullmatch(a)
    )


def number_swap(claim: str, chunks: Sequence[frozenset[Pair]]) -> str | None:
    """A number of ``claim`` that counts a word which the retrieved text counts with another number, and never
    with this one: "two Followill brothers" against "three Followill brothers"."""
    seen = frozenset().union(*chunks)
    for number, word in sorted(number_pairs(claim)):
        if (number, word) in seen:
            continue
        rivals = sorted({n for n, w in seen if w == word and n != number})
        if rivals:
            return f"the answer has {display(number)} {display(word)} where the retrieved text has {', '.join(rivals)}"
    return None


#: An opening word that reads as a verb or an adverb ("Founded in 1997, ...", "Originally ...") is not a name.
_VERB_OR_ADVERB = re.compile(r"(?:ed|ing|ly)$")


def _salient(text: str, lowercase: frozenset[str] = frozenset(), opening: bool = False) -> frozenset[str]:
    """Names, numbers, dates and ids of ``text`` (spelled-out small numbers are loose talk: left out); with
    ``opening``, a capitalised first word too when it is written in lower case nowhere in ``lowercase`` (the
    tokens of lower-case words around it): "Glassroth v. Moore" opens with a name, "Turnout rose" does not."""
    exact = {t for t in analyse(text).distinct if exact_class(t)} - spelled_numbers(text)
    first = _WORD.search(text)
    opener: frozenset[str] = frozenset()
    if opening and first and first.group(0)[0].isupper() and not _VERB_OR_ADVERB.search(first.group(0)):
        opener = (
            analyse(first.group(0)).plain - lowercase
        )  # its own words, no places it names; "No" or "None" is no name
    return frozenset(exact) | names(text) | opener


def anchored(reference: str, answer: str, around: Sequence[str]) -> bool:
    """Whether ``reference`` has names or numbers (its capitalised opening word too, when ``around`` never writes it
    in lower case) and ``answer`` holds at least half of them: "Nassau" for "Nassau County"."""
    salient = _salient(reference, _lowercase_tokens([reference, *around]), opening=True)
    return bool(salient) and 2 * len(salient & analyse(answer).distinct) >= len(salient)


def lowercase_words(texts: Sequence[str]) -> list[str]:
    """The words written in lower case in ``texts``: common words, never names."""
    return [m.group(0) for text in texts for m in _WORD.finditer(text) if m.group(0).islower()]


def _lowercase_tokens(texts: Sequence[str]) -> frozenset[str]:
    return analyse(" ".join(lowercase_words(texts))).distinct


def _surface(tokens: frozenset[str], texts: Sequence[str]) -> str:
    """The words of ``texts`` behind ``tokens`` (stems), as written: "Baroque", not "baroqu"."""
    words: dict[str, str] = {}
    for text in texts:
        for match in _WORD.finditer(text):
            for token in analyse(match.group(0)).distinct & tokens:
                words.setdefault(token, match.group(0))
    return ", ".join(sorted({words.get(t, display(t)) for t in tokens}))


def negated_reference(expected: Sequence[str], answer: str) -> str | None:
    """The answer's clauses that speak most of what the reference states all negate it: "did not land" where the
    reference says "landed". A negation in a clause about something else (an answer quoting more than one
    text) decides nothing."""
    parts = [clause for claim in split_claims(answer) for clause in clauses(claim)] or [answer]
    for text in expected:
        reference = analyse_fact(text)
        if reference.negation:
            continue
        overlaps = [(len(analyse_fact(part).plain & reference.plain), part) for part in parts]
        best = max(n for n, _ in overlaps)
        if best < 2:
            continue
        negated = [analyse_fact(part).negated & reference.plain for n, part in overlaps if n == best]
        if all(negated):
            return f"the answer negates {', '.join(sorted(map(display, negated[0])))}, which the reference states"
        # a clause denied as a whole ("Expenses do not need to be submitted in Ledgerly within 30 days") that holds
        # at least two of the reference's words denies it, whichever verb it negates
        denied = [part for n, part in overlaps if n == best and analyse_fact(part).sentential]
        if best >= 2 and len(denied) == sum(n == best for n, _ in overlaps):
            return f"the answer denies what the reference states: {denied[0].strip()!r}"
    return None


def rival_numbers(reference: str, answer: str) -> str | None:
    """A number of the reference that the answer never states, while it says the same thing with another number
    of the same kind: it counts the same word with it ("58 years" where the reference has "63 years"; a unit
    such as "ARB" counts many things: left out), or a clause of it holds the words of the reference's clause
    ("the first recorded ascent in 1861" where it says "the first recorded ascent was made in 1889"). The
    answer's other numbers are detail the reference did not give; numbers written as words state the
    reference's own ("three days")."""
    given = analyse(answer).distinct
    counted = {word: number for number, word in number_pairs(answer)}
    common = _lowercase_tokens([reference])
    for number, word in sorted(number_pairs(reference)):
        rival = counted.get(word) if word in common else None
        if number not in given and rival is not None and rival != number:
            ours, theirs = _surface(frozenset({rival}), [answer]), _surface(frozenset({number}), [reference])
            return f"the answer has {ours} {display(word)} where the reference has {theirs}"
    wanted = analyse(reference).distinct
    loose = spelled_numbers(answer)
    parts = [analyse(clause) for claim in split_claims(answer) for clause in clauses(claim)]
    for clause in clauses(reference):
        said = analyse(clause)
        missing = {t for t in said.distinct if exact_class(t) and t not in given} - spelled_numbers(clause)
        words = frozenset(t for t in said.plain if not exact_class(t))
        for number in sorted(missing):
            for part in parts:
                rivals = sorted(t for t in part.distinct - wanted - loose if exact_class(t) == exact_class(number))
                if rivals and len(words & part.plain) >= max(2, (len(words) + 1) // 2):
                    return f"the answer has {display(rivals[0])} where the reference has {display(number)}"
    return None


def substituted(question: str, reference: str, answer: str) -> str | None:
    """A name of the reference that the answer leaves out, while it writes another name beside the same word:
    "the Cunard Line's Titanic" where the reference says "the White Star Line's Titanic",
    "Steve Wozniak and Mike Markkula" where it says "Steve Wozniak and Ronald Wayne". The answer's other names,
    beside words of their own, are detail the reference did not give (numbers: ``rival_numbers``)."""
    asked = analyse(question).distinct
    wanted_tokens = analyse(reference).tokens
    known = frozenset(wanted_tokens) | asked
    lowercase = _lowercase_tokens([question, reference, answer])
    salient = _salient(reference, lowercase, opening=True) - asked
    given = analyse(answer)
    rivals = _salient(answer, lowercase, opening=True) - known
    pairs = frozenset(itertools.pairwise(given.tokens))

    for left, right in itertools.pairwise(wanted_tokens):
        for missing, neighbour, side in ((left, right, 0), (right, left, 1)):
            if (
                missing not in salient
                or exact_class(missing)
                or missing in given.distinct
                or neighbour not in given.distinct
            ):
                continue
            found = sorted(
                p[side] for p in pairs if p[1 - side] == neighbour and p[side] in rivals and not exact_class(p[side])
            )
            if found:
                ours, theirs = _surface(frozenset(found[:1]), [answer]), _surface(frozenset({missing}), [reference])
                return f"the answer has {ours} where the reference has {theirs}"
    return None


def rival_names(question: str, expected: Sequence[str], answer: str, *, names_only: bool = False) -> str | None:
    """The reference's names the answer lacks (but for the question's own), and the names it holds instead
    (neither in the reference nor in the question): a swapped entity, however many other words it shares.
    With ``names_only``, only a name in place of a name counts (no number either side)."""
    asked = analyse(question).distinct
    reference = frozenset().union(*(analyse(text).distinct for text in expected))
    lowercase = _lowercase_tokens([question, *expected])
    wanted = frozenset().union(*(_salient(text, lowercase, opening=True) for text in expected)) - asked
    missing = wanted - analyse(answer).distinct
    # an answer's opening name counts too: "Suffolk County is ..." where the reference says "Nassau County"
    lowercase |= _lowercase_tokens([answer])
    rivals = frozenset(
        t
        for t in _salient(answer, lowercase, opening=True) - reference - asked
        if not demonym_roots(t) & (reference | asked)
    )
    if names_only:  # "Kilby" is no rival of a reference's "23 December"
        rivals = frozenset(t for t in rivals if not exact_class(t))
        missing = frozenset(t for t in missing if not exact_class(t))
    if not missing or not rivals:
        return None
    return f"the answer has {_surface(rivals, [answer])} where the reference has {_surface(missing, expected)}"


_NAME_RUN = re.compile(r"[A-Z][\w'-]*(?:[ \t]+[A-Z][\w'-]*)+")


def mangled_name(question: str, expected: Sequence[str], answer: str) -> str | None:
    """A name of two or more capitalised words, all of them the reference's, that neither the reference nor the
    question writes in that order: "Amy Johnson" where the reference says "Amy Jo Johnson" is someone else."""
    reference = frozenset().union(*(analyse(text).distinct for text in expected))
    written = [analyse(text).tokens for text in (*expected, question)]
    for match in _NAME_RUN.finditer(answer):
        run = analyse(match.group(0)).tokens
        if len(run) < 2 or not set(run) <= reference:
            continue
        if not any(_contains(tokens, run) for tokens in written):
            named = next(
                (
                    m.group(0)
                    for text in expected
                    for m in _NAME_RUN.finditer(text)
                    if set(run) <= set(analyse(m.group(0)).tokens)
                ),
                None,
            )
            return f"the answer names {match.group(0)!r} where the reference names {named or ' '.join(expected)!r}"
    return None


def _contains(tokens: Sequence[str], run: Sequence[str]) -> bool:
    n = len(run)
    return any(tuple(tokens[i : i + n]) == tuple(run) for i in range(len(tokens) - n + 1))


_NEAR = r"(?:near|nearby|outside(?:\s+of)?|close\s+to|next\s+to|beyond|around)"


def near_the_reference(expected: Sequence[str], answer: str) -> str | None:
    """The answer puts the reference's place beside itself: "located near California" where the reference is
    "California" (a reference that says "near Kitty Hawk" itself is met by it)."""
    for text in expected:
        for word in sorted({m.group(0) for m in _WORD.finditer(text) if m.group(0)[:1].isupper()}):
            pattern = re.compile(rf"\b{_NEAR}\s+(?:the\s+)?{re.escape(word)}\b", re.I)
            found = pattern.search(answer)
            if found and not any(pattern.search(other) for other in expected):
                return f"the answer has {found.group(0)!r} where the reference has {word}"
    return None


def swapped_pairing(question: str, facts: Sequence[str], answer: str) -> str | None:
    """Two facts whose names the answer trades: a clause holds the words of each with the name of the other and
    without its own ("Submit expenses in Rota and request time off in Ledgerly" where the facts are "expenses in
    Ledgerly" and "time off in Rota"), however many of each fact's words the answer holds somewhere."""
    if len(facts) < 2:
        return None
    lowercase = _lowercase_tokens([question, *facts, answer])
    named = [_salient(fact, lowercase, opening=True) for fact in facts]
    words = [analyse_fact(fact).plain - name for fact, name in zip(facts, named, strict=True)]
    parts = [analyse(clause).distinct for claim in split_claims(answer) for clause in clauses(claim)]

    def traded(fact_words: frozenset[str], own: frozenset[str], other: frozenset[str]) -> frozenset[str]:
        """The words of one fact that some clause holds with the other fact's name and without its own."""
        return frozenset().union(*(part & fact_words for part in parts if part & other and not part & own))

    for i, j in itertools.combinations(range(len(facts)), 2):
        name_i, name_j = named[i] - named[j], named[j] - named[i]
        words_i, words_j = words[i] - words[j] - named[j], words[j] - words[i] - named[i]
        if not (name_i and name_j and words_i and words_j):
            continue
        # both ways: each fact's words stand with the other's name
        with_j, with_i = traded(words_i, name_i, name_j), traded(words_j, name_j, name_i)
        if with_j and with_i:
            return (
                f"the answer puts {_surface(name_j, [facts[j]])} with {_surface(with_j, [answer])} and "
                f"{_surface(name_i, [facts[i]])} with {_surface(with_i, [answer])}, the other way round from the reference"
            )
    return None


#: A document or policy id: capitals, a hyphen, digits ("POL-21", "LFP-001", "GRANT-7"; not "mid-1990s").
_ID = re.compile(r"\b([A-Z][A-Z0-9]*)-(\d+[A-Za-z0-9]*)\b")


def without_ids(text: str) -> str:
    """``text`` with its ids left out."""
    return _ID.sub(" ", text)


def rival_ids(expected: Sequence[str], answer: str) -> str | None:
    """The answer names (or cites) an id of the kind the reference names, but never the reference's own:
    "[POL-22]" where the reference says POL-21."""
    wanted = {m.group(0): m.group(1) for text in expected for m in _ID.finditer(text)}
    given = {m.group(0): m.group(1) for m in _ID.finditer(answer)}
    if not wanted or wanted.keys() & given.keys():
        return None
    rivals = sorted(i for i, prefix in given.items() if prefix in wanted.values())
    if not rivals:
        return None
    return f"the answer names {', '.join(rivals)} where the reference names {', '.join(sorted(wanted))}"


_PIECE = re.compile(r"[^\W_]+|[^\w\s]")
#: A first word shaped like an adjective, a verb or an adverb ("main", "central", "primary", "encircled", "now"):
#: one of those in place of another is most often a synonym. A noun before a noun ("cookie parameters") is not.
_NOT_A_NOUN = re.compile(
    r"(?:al|ary|ic|ive|ous|ful|ible|able|ian|ese|ern|ish|less|ed|ing|ly|(?<![su])s)$"
    r"|^(?:main|chief|key|major|minor|big|small|large|new|old|first|last|top|high|low|now|still|then|soon|seem)$"
)


def _modifier_pairs(text: str) -> frozenset[Pair]:
    """The lower-case nouns of ``text`` written right before another content word ("cookie parameters"; "Header
    parameters" opening a sentence), with it: the tokens of both."""
    pieces = _PIECE.findall(text)
    found: set[Pair] = set()
    for at, (first, second) in enumerate(itertools.pairwise(pieces)):
        opening = at == 0 or pieces[at - 1] in (".", "!", "?", ":")
        lower = first.islower() or (opening and first[1:].islower())
        if not (lower and first.isalpha() and second.isalpha()) or _NOT_A_NOUN.search(first.lower()):
            continue
        a, b = analyse(first).tokens, analyse(second).tokens
        if len(a) == 1 and len(b) == 1:
            found.add((a[0], b[0]))
    return frozenset(found)


def swapped_subject(question: str, expected: Sequence[str], answer: str) -> str | None:
    """A phrase the question asks about and the reference repeats ("cookie parameters"), that the answer writes
    with another noun first ("header parameters"), never writing the question's: the answer speaks of something
    else, however many other words it shares."""
    phrases = sorted(_modifier_pairs(question) & frozenset().union(*(_modifier_pairs(text) for text in expected)))
    known = analyse(question).distinct.union(*(analyse(text).distinct for text in expected))
    given = analyse(answer).distinct
    written = sorted(_modifier_pairs(answer))
    for subject, head in phrases:
        if subject in given:
            continue
        rival = next((word for word, other in written if other == head and word not in known), None)
        if rival is not None:
            ours = f"{_surface(frozenset({rival}), [answer])} {_surface(frozenset({head}), [answer])}"
            theirs = f"{_surface(frozenset({subject}), [question])} {_surface(frozenset({head}), [question])}"
            return f"the answer has {ours!r} where the question and the reference have {theirs!r}"
    return None
