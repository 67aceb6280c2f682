"""``rageval calibrate --invariance``: does the judge give the same verdict for the same answer?

Each labelled answer is judged again under changes of two kinds:

* **meaning-preserving** (the verdict should not move): the retrieved chunks in another order; the answer's
  whitespace changed; its trailing punctuation changed; a word of it in markdown emphasis (``**x**``, ``_x_``);
  for correctness, the retrieved text replaced by another item's (a correctness verdict compares the answer
  with the reference). The figure is the *flip rate*: the share of the items whose pass/fail verdict moved.
* **meaning-changing** (the verdict should fail): a number of the answer changed, a name swapped for another
  name, a yes/no flipped, a negation added. The figure is the *detection rate*: of the items whose verdict
  passed unchanged, the share that fail once changed.

Every change is chosen from the item's id (a SHA-256 of change name and id), never from random state: two
runs over the same set ask the judge the same questions. A change that cannot be made on an item (one chunk
to reorder, no number in the answer...) leaves it out of that change's figures.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .base import Judge, JudgeError, Verdict
from .calibration_measure import LabelledAnswer, passes
from .lexical_text import MONTHS

__all__ = ["CHANGES", "Change", "InvarianceFigures", "as_json", "format_invariance", "invariance", "perturb"]

PRESERVING = "preserves"
CHANGING = "changes"


def _seed(change: str, item_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{change}\0{item_id}".encode()).digest()[:8], "big")


def _pick(change: str, item_id: str, options: Sequence[Any]) -> Any:
    return options[_seed(change, item_id) % len(options)]


# --------------------------------------------------------------------------- meaning-preserving changes


def _reordered(item: LabelledAnswer, items: Sequence[LabelledAnswer]) -> LabelledAnswer | None:
    """The chunks in another order: a rotation chosen by the id (never the identity)."""
    if len(set(item.contexts)) < 2:
        return None
    shift = 1 + _seed("chunks-reordered", item.id) % (len(item.contexts) - 1)
    contexts = item.contexts[shift:] + item.contexts[:shift]
    if contexts == item.contexts:
        contexts = tuple(reversed(item.contexts))
    return replace(item, contexts=contexts)


_GAP = re.compile(r"(?<=\S) (?=\S)")


def _whitespace(item: LabelledAnswer, items: Sequence[LabelledAnswer]) -> LabelledAnswer | None:
    """Spaces doubled between words, a newline and indentation around the answer."""
    if not item.answer.strip():
        return None
    return replace(item, answer="\n  " + _GAP.sub("  ", item.answer.strip()) + " \n")


_TRAILING = re.compile(r"[.!:;]+$")


def _punctuation(item: LabelledAnswer, items: Sequence[LabelledAnswer]) -> LabelledAnswer | None:
    """The answer's final full stop (or colon...) dropped, or one added where it had none."""
    answer = item.answer.rstrip()
    if not answer or answer.endswith(("?", ")", "]", "`", '"')):
        return None
    changed = _TRAILING.sub("", answer) if _TRAILING.search(answer) else answer + "."
    return replace(item, answer=changed) if changed.strip() else None


_PLAIN_WORD = re.compile(r"(?<![\w\[(`*/.-])[A-Za-z]{4,}(?![\w\])`*/.-])")


def _emphasis(item: LabelledAnswer, items: Sequence[LabelledAnswer]) -> LabelledAnswer | None:
    """One word of the answer in ``**bold**`` and another (or the same) in ``_italics_``, words chosen by the id."""
    words = list(_PLAIN_WORD.finditer(item.answer))
    if not words:
        return None
    bold = _pick("emphasis-bold", item.id, words)
    italic = _pick("emphasis-italic", item.id, words)
    spans = sorted({(bold.start(), bold.end(), "**"), (italic.start(), italic.end(), "_")}, reverse=True)
    answer, last = item.answer, None
    for start, end, mark in spans:
        if last is not None and end > last:  # the same word twice: bold only
            continue
        answer = answer[:start] + mark + answer[start:end] + mark + answer[end:]
        last = start
    return replace(item, answer=answer)


def _other_contexts(item: LabelledAnswer, items: Sequence[LabelledAnswer]) -> LabelledAnswer | None:
    """The retrieved text of another item (chosen by the id) in place of the item's own: a verdict that compares
    the answer with a reference must not move."""
    if not (item.reference_answer or item.key_facts):
        return None
    others = [other.contexts for other in items if other.contexts and set(other.contexts) != set(item.contexts)]
    if not others:
        return None
    return replace(item, contexts=_pick("other-contexts", item.id, others))


# --------------------------------------------------------------------------- meaning-changing changes

_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")
_SPELLED = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_SPELLED_WORD = re.compile(r"\b(" + "|".join(_SPELLED) + r")\b", re.I)


def _other_number(text: str) -> str:
    """Another number written like ``text``: the leading digit moved by one ("1837" -> "2837", "9" -> "8")."""
    first = int(text[0])
    return str(first + 1 if first < 9 else 8) + text[1:]


def _number(item: LabelledAnswer, items: Sequence[LabelledAnswer]) -> LabelledAnswer | None:
    """One number of the answer (in digits, or "two" to "twelve") changed to another."""
    found = [(m.start(), m.end(), _other_number(m.group(0))) for m in _NUMBER.finditer(item.answer)]
    for m in _SPELLED_WORD.finditer(item.answer):
        word = m.group(0)
        at = _SPELLED.index(word.lower())
        other = _SPELLED[at + 1] if at + 1 < len(_SPELLED) else _SPELLED[at - 1]
        found.append((m.start(), m.end(), other.capitalize() if word[0].isupper() else other))
    if not found:
        return None
    start, end, other = _pick("number-changed", item.id, sorted(found))
    return replace(item, answer=item.answer[:start] + other + item.answer[end:])


_NAME = re.compile(r"(?<![\w\[(-])[A-Z][a-z]{2,}(?:\s+[A-Z][a-z]{2,})*(?![\w\])-])")
_OPENING = re.compile(r"(?:^|[.!?:]\s+|\n\s*)$")


def _names(text: str) -> list[re.Match[str]]:
    """Capitalised words (runs of them) that do not open a sentence ("The Porto fair" names Porto)."""
    found = []
    at = 0
    while (match := _NAME.search(text, at)) is not None:
        if _OPENING.search(text[: match.start()]):
            at = match.start() + len(match.group(0).split()[0])  # the run without its opening word
            continue
        if match.group(0) not in MONTHS:  # a month is a date, not a name
            found.append(match)
        at = match.end()
    return found


def _name(item: LabelledAnswer, items: Sequence[LabelledAnswer]) -> LabelledAnswer | None:
    """A name of the answer (one the reference or a key fact names, when it has some) swapped for a name that
    no text of the item holds, taken from the other items' answers."""
    expected = " ".join([item.reference_answer or "", *item.key_facts])
    names = _names(item.answer)
    decisive = [m for m in names if m.group(0) in expected] or names
    if not decisive:
        return None
    own = " ".join([item.question, item.answer, expected, *item.contexts])
    pool = sorted(
        {m.group(0) for other in items for m in _names(other.answer) if other.id != item.id and m.group(0) not in own}
    )
    if not pool:
        return None
    chosen = _pick("name-swapped", item.id, decisive)
    rival = _pick("name-swapped-rival", item.id, pool)
    return replace(item, answer=item.answer[: chosen.start()] + rival + item.answer[chosen.end() :])


_POLARITY = re.compile(r"^(\W*(?:the\s+(?:short\s+)?answer\s+is\s+)?)(yes|no)\b", re.I)


def _yes_no(item: LabelledAnswer, items: Sequence[LabelledAnswer]) -> LabelledAnswer | None:
    """An answer opening with yes or no, opening with the other."""
    match = _POLARITY.match(item.answer)
    if match is None:
        return None
    word = match.group(2)
    other = "no" if word.lower() == "yes" else "yes"
    other = other.capitalize() if word[0].isupper() else other
    return replace(item, answer=item.answer[: match.start(2)] + other + item.answer[match.end(2) :])


_AUXILIARY = re.compile(r"\b(is|are|was|were|can|could|will|would|should|must|has|have|had|does|do|did)\b(?!\s+not\b)")


def _negation(item: LabelledAnswer, items: Sequence[LabelledAnswer]) -> LabelledAnswer | None:
    """Add "not" after the answer's first auxiliary verb ("was" -> "was not"); without one, the answer denied."""
    body = item.answer
    polarity = _POLARITY.match(body)
    start = polarity.end() if polarity else 0
    match = _AUXILIARY.search(body, start)
    if match is not None:
        return replace(item, answer=body[: match.end()] + " not" + body[match.end() :])
    text = body[start:].lstrip(" ,.:;")
    if not text:
        return None
    lead = body[:start].rstrip()
    return replace(item, answer=(lead + " " if lead else "") + "It is not true that " + text[0].lower() + text[1:])


# --------------------------------------------------------------------------- the changes


@dataclass(frozen=True)
class Change:
    """One change of a labelled answer: its name, whether it preserves or changes the meaning, the metrics it
    applies to (empty: every metric) and how it is made (None when it cannot be made on an item)."""

    name: str
    kind: str
    make: Callable[[LabelledAnswer, Sequence[LabelledAnswer]], LabelledAnswer | None]
    metrics: frozenset[str] = frozenset()
    description: str = ""

    def applies(self, metric: str) -> bool:
        return not self.metrics or metric in self.metrics


CHANGES: tuple[Change, ...] = (
    Change("chunks-reordered", PRESERVING, _reordered, description="the retrieved chunks in another order"),
    Change("whitespace", PRESERVING, _whitespace, description="spaces doubled, a newline around the answer"),
    Change("trailing-punctuation", PRESERVING, _punctuation, description="the final full stop dropped or added"),
    Change("emphasis", PRESERVING, _emphasis, description="words in **bold** and _italics_"),
    Change(
        "other-contexts",
        PRESERVING,
        _other_contexts,
        frozenset({"correctness"}),
        description="another item's retrieved text (correctness only)",
    ),
    Change("number-changed", CHANGING, _number, description="a number of the answer changed"),
    Change("name-swapped", CHANGING, _name, description="a name swapped for another name"),
    Change("yes-no-flipped", CHANGING, _yes_no, description="yes for no or no for yes"),
    Change("negation-added", CHANGING, _negation, description="a negation added"),
)


def perturb(change: Change, item: LabelledAnswer, items: Sequence[LabelledAnswer]) -> LabelledAnswer | None:
    """``item`` under ``change`` (None when it cannot be made or changes nothing)."""
    changed = change.make(item, items)
    return None if changed is None or changed == item else changed


# --------------------------------------------------------------------------- measuring


@dataclass
class InvarianceFigures:
    """One change on one metric: items it applied to, how many moved, judge errors, the ids that moved (for a
    meaning-preserving change) or were missed (for a meaning-changing one)."""

    kind: str
    n: int = 0
    moved: int = 0
    errors: int = 0
    ids: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float | None:
        return self.moved / self.n if self.n else None

    def as_dict(self) -> dict[str, Any]:
        if self.kind == PRESERVING:
            return {
                "n": self.n,
                "flips": self.moved,
                "flip_rate": _round(self.rate),
                "errors": self.errors,
                "flipped": list(self.ids),
            }
        return {
            "n": self.n,
            "detected": self.moved,
            "detection_rate": _round(self.rate),
            "errors": self.errors,
            "missed": list(self.ids),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


async def _verdict(judge: Judge, metric: str, item: LabelledAnswer, gate: asyncio.Semaphore) -> bool | None:
    async with gate:
        try:
            result: Verdict = await judge.judge(metric, item.judge_input())
        except JudgeError:
            return None
    return passes(metric, result)


async def invariance(
    judge: Judge,
    items: Sequence[LabelledAnswer],
    metrics: Iterable[str],
    *,
    changes: Sequence[Change] = CHANGES,
    concurrency: int = 8,
) -> dict[str, dict[str, InvarianceFigures]]:
    """Per change and per metric the judge scores, the figures over the items labelled for the metric."""
    gate = asyncio.Semaphore(max(1, concurrency))
    out: dict[str, dict[str, InvarianceFigures]] = {change.name: {} for change in changes}
    for metric in metrics:
        if not judge.supports(metric):
            continue
        labelled = [item for item in items if metric in item.labels]
        originals = await asyncio.gather(*(_verdict(judge, metric, item, gate) for item in labelled))
        for change in changes:
            if not change.applies(metric):
                continue
            figures = out[change.name].setdefault(metric, InvarianceFigures(change.kind))
            asked = [
                (item, original, changed)
                for item, original in zip(labelled, originals, strict=True)
                if (changed := perturb(change, item, items)) is not None and (change.kind == PRESERVING or original)
            ]
            verdicts = await asyncio.gather(*(_verdict(judge, metric, changed, gate) for _, _, changed in asked))
            for (item, original, _), verdict in zip(asked, verdicts, strict=True):
                if original is None or verdict is None:
                    figures.errors += 1
                    continue
                figures.n += 1
                moved = verdict != original if change.kind == PRESERVING else not verdict
                figures.moved += moved
                if moved == (change.kind == PRESERVING):
                    figures.ids.append(item.id)
    return {name: per_metric for name, per_metric in out.items() if per_metric}


def as_json(figures: Mapping[str, Mapping[str, InvarianceFigures]]) -> dict[str, Any]:
    """calibration.json's ``invariance`` section: per change its kind, what it does and per metric its figures."""
    by_name = {change.name: change for change in CHANGES}
    return {
        name: {
            "kind": by_name[name].kind if name in by_name else next(iter(per_metric.values())).kind,
            "description": by_name[name].description if name in by_name else "",
            "metrics": {metric: f.as_dict() for metric, f in per_metric.items()},
        }
        for name, per_metric in figures.items()
    }


def format_invariance(figures: Mapping[str, Mapping[str, InvarianceFigures]], *, shown: int = 5) -> list[str]:
    """A table: change, what it does to the meaning, metric, items, flips or detections, the rate; then the ids
    that flipped under a meaning-preserving change (the first ``shown`` of each)."""
    header = f"{'change':<22} {'meaning':<9} {'metric':<14} {'n':>4} {'flips':>6} {'flip rate':>9} {'detected':>8} {'detection':>9} {'errors':>6}"
    lines = [header, "-" * len(header)]
    flipped: list[str] = []
    for name, per_metric in figures.items():
        for metric, f in per_metric.items():
            rate = "-" if f.rate is None else f"{f.rate:.3f}"
            if f.kind == PRESERVING:
                lines.append(
                    f"{name:<22} {f.kind:<9} {metric:<14} {f.n:>4} {f.moved:>6} {rate:>9} {'':>8} {'':>9} {f.errors:>6}"
                )
                if f.ids:
                    more = f" and {len(f.ids) - shown} more" if len(f.ids) > shown else ""
                    flipped.append(f"{name} flips {metric} of: {', '.join(f.ids[:shown])}{more}")
            else:
                lines.append(
                    f"{name:<22} {f.kind:<9} {metric:<14} {f.n:>4} {'':>6} {'':>9} {f.moved:>8} {rate:>9} {f.errors:>6}"
                )
    return lines + flipped
