"""A case card's "Since baseline" section: metric deltas, the old and new answer with a word diff, the
retrieved list old vs new.

Pure: the current record, the baseline's metrics.json entry of the case and (when the baseline's results.jsonl
is there) its old record come in, an :class:`~.markup.Html` fragment goes out. Every text is escaped where it
joins a fragment; the diff marks words with ``<ins>``/``<del>`` around escaped text. A diff costs at most
``MAX_DIFF_WORDS`` words a side (difflib is quadratic in the worst case): longer answers are diffed on their
first ``MAX_DIFF_WORDS`` words and the section says so.
"""

from __future__ import annotations

import difflib
import hashlib
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_rageval.evaluation.stored_chunk import heading_text

from .markup import EMPTY, Html, badge, escape, fmt, fmt_delta, is_number, join, num_td, outcome_class, table

__all__ = ["MAX_DIFF_WORDS", "chunk_moves", "render_since", "word_diff"]

#: words of each answer the diff looks at; the rest is shown unmarked
MAX_DIFF_WORDS = 1500

_WORD = re.compile(r"\S+\s*|\s+")
#: per-case values that differ run to run by nature (the card's details show them)
_NOT_COMPARED = frozenset({"latency_ms", "ttft_ms"})


#: upper bound of difflib's inner steps per answer pair (a sum of match-candidate counts; about 0.1 s): repetitive
#: answers ('a a a ...' against 'b a b a ...') would otherwise take minutes
DIFF_BUDGET = 300_000


class _OverBudget(Exception):
    pass


class _BudgetedMatcher(difflib.SequenceMatcher[str]):
    """A SequenceMatcher that gives up (``_OverBudget``) once its matching would cost more than ``budget`` steps."""

    def __init__(self, a: list[str], b: list[str], *, autojunk: bool, budget: int) -> None:
        self.budget = budget
        super().__init__(None, a, b, autojunk=autojunk)

    def find_longest_match(self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None) -> Any:
        seen: Any = self  # difflib's b2j and a: not in its type stubs
        self.budget -= sum(len(seen.b2j.get(word, ())) for word in seen.a[alo:ahi])  # this call's steps, at most
        if self.budget < 0:
            raise _OverBudget
        return super().find_longest_match(alo, ahi, blo, bhi)


def _opcodes(a: list[str], b: list[str]) -> Sequence[tuple[str, int, int, int, int]]:
    """difflib's opcodes of ``a`` vs ``b`` within DIFF_BUDGET: every word as a possible anchor first, then without
    the most frequent words (difflib's autojunk), else the whole of each side replaced."""
    for autojunk in (False, True):
        try:
            return _BudgetedMatcher(a, b, autojunk=autojunk, budget=DIFF_BUDGET).get_opcodes()
        except _OverBudget:
            continue
    return [("replace", 0, len(a), 0, len(b))]


def word_diff(old: str, new: str, limit: int = MAX_DIFF_WORDS) -> tuple[Html, Html, bool]:
    """(old with deleted words in ``<del>``, new with inserted words in ``<ins>``, whether the diff was cut).

    Built as plain strings (every piece of text through ``html.escape``) and made a fragment once: a
    report diffs a thousand answers, and a fragment per word would cost more than the diff. Bounded in
    time: at most ``limit`` words a side, and at most DIFF_BUDGET steps (``_opcodes``).
    """
    a, b = _WORD.findall(old), _WORD.findall(new)
    cut = len(a) > limit or len(b) > limit
    a_head, b_head = a[:limit], b[:limit]
    old_parts: list[str] = []
    new_parts: list[str] = []
    for op, i1, i2, j1, j2 in _opcodes([w.strip() for w in a_head], [w.strip() for w in b_head]):
        removed, added = _text(a_head[i1:i2]), _text(b_head[j1:j2])
        if op == "equal":
            old_parts.append(removed)
            new_parts.append(added)
            continue
        if removed:
            old_parts.append(f"<del>{removed}</del>")
        if added:
            new_parts.append(f"<ins>{added}</ins>")
    old_parts.append(_text(a[limit:]))
    new_parts.append(_text(b[limit:]))
    return Html("".join(old_parts)), Html("".join(new_parts)), cut


def _text(words: list[str]) -> str:
    return html.escape("".join(words), quote=True)


#: How much of a chunk's text its identity reads: what results.jsonl keeps without --rageval-store-full-text,
#: so a baseline stored with full text and a run stored without still agree.
_IDENTITY_TEXT = 200


def _chunk_id(chunk: Mapping[str, Any]) -> tuple[str, str, str]:
    """What makes a retrieved chunk the same one in two runs: its anchor (path, heading) and its text.

    Never the system's chunk id: frameworks such as LlamaIndex give every node a new random id each time the
    index is built, and an unchanged system would show every chunk both new and dropped.
    """
    text = chunk.get("text")
    digest = (
        hashlib.sha256(text[:_IDENTITY_TEXT].encode("utf-8", "surrogatepass")).hexdigest()[:16]
        if isinstance(text, str)
        else ""
    )
    return (str(chunk.get("rel_path") or chunk.get("doc_id") or ""), heading_text(chunk.get("heading_path")), digest)


def _ranked(chunks: Any) -> list[tuple[Any, Mapping[str, Any]]]:
    if not isinstance(chunks, list):
        return []
    out = []
    for position, chunk in enumerate((c for c in chunks if isinstance(c, Mapping)), start=1):
        rank = chunk.get("rank")
        out.append((rank if is_number(rank) else position, chunk))
    return out


Move = tuple[Any | None, Any | None, str, Mapping[str, Any], bool]


def chunk_moves(old: Any, new: Any) -> list[Move]:
    """(rank now, rank before, move, chunk, gold) per chunk: the new list in order, then the dropped ones.

    ``move`` is ``new``, ``dropped``, ``same`` or ``up N`` / ``down N`` (ranks moved); gold when either run marked it.
    """
    before: dict[tuple[str, str, str], tuple[Any, Mapping[str, Any]]] = {}
    for rank, chunk in _ranked(old):
        before.setdefault(_chunk_id(chunk), (rank, chunk))
    rows: list[Move] = []
    seen: set[tuple[str, str, str]] = set()
    for rank, chunk in _ranked(new):
        ident = _chunk_id(chunk)
        if ident in seen:
            continue
        seen.add(ident)
        previous = before.get(ident)
        gold = chunk.get("gold") is True or (previous is not None and previous[1].get("gold") is True)
        if previous is None:
            rows.append((rank, None, "new", chunk, gold))
            continue
        old_rank = previous[0]
        step = old_rank - rank if is_number(old_rank) and is_number(rank) else 0
        move = "same" if step == 0 else (f"up {step:g}" if step > 0 else f"down {-step:g}")
        rows.append((rank, old_rank, move, chunk, gold))
    for ident, (old_rank, chunk) in before.items():
        if ident not in seen:
            rows.append((None, old_rank, "dropped", chunk, chunk.get("gold") is True))
    return rows


def _metric_rows(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Html]:
    rows = []
    for name in [*new, *(n for n in old if n not in new)]:
        if name in _NOT_COMPARED:
            continue
        before: Any = old.get(name)
        now: Any = new.get(name)
        if not (is_number(before) or is_number(now)):
            continue
        delta = now - before if is_number(before) and is_number(now) else None
        cls = EMPTY if not delta else Html(' class="changed"')
        rows.append(
            Html("<tr{}><td><code>{}</code></td>{}{}{}</tr>").format(
                cls, name, num_td(before), num_td(now), num_td(delta, fmt_delta)
            )
        )
    return rows


def _outcome_line(old_outcome: Any, new_outcome: Any) -> Html:
    old_badge = badge(str(old_outcome or "unknown"), outcome_class(old_outcome))
    new_badge = badge(str(new_outcome or "unknown"), outcome_class(new_outcome))
    if old_outcome == new_outcome:
        return Html('<p class="since-outcome">outcome {} in both runs</p>').format(new_badge)
    return Html('<p class="since-outcome">outcome {} &rarr; {}</p>').format(old_badge, new_badge)


def _answers(old: dict[str, Any] | None, record: Mapping[str, Any]) -> Html:
    old_answer, new_answer = old.get("answer") if old else None, record.get("answer")
    old_text = old_answer if isinstance(old_answer, str) else ""
    new_text = new_answer if isinstance(new_answer, str) else ""
    if old_text == new_text:
        return Html('<h5>Answer</h5><p class="muted">unchanged</p>')
    old_html, new_html, cut = word_diff(old_text, new_text)
    note = (
        Html(
            '<p class="muted">The diff covers the first {} words of each answer; the rest is shown unmarked.</p>'
        ).format(MAX_DIFF_WORDS)
        if cut
        else EMPTY
    )
    return Html(
        '<h5>Answer</h5><div class="sbs"><div><div class="muted">baseline</div><div class="text diff old">{}</div></div>'
        '<div><div class="muted">now</div><div class="text diff new">{}</div></div></div>{}'
    ).format(old_html, new_html, note)


def _retrieval(old: dict[str, Any] | None, record: Mapping[str, Any]) -> Html:
    rows = []
    for now, before, move, chunk, gold in chunk_moves(
        old.get("retrieved_chunks") if old else None, record.get("retrieved_chunks")
    ):
        kind = {"new": "mv-new", "dropped": "mv-dropped", "same": "mv-same"}.get(
            move, "mv-up" if move.startswith("up") else "mv-down"
        )
        cls = Html(' class="gold"') if gold else EMPTY
        rows.append(
            Html(
                '<tr{}><td class="num">{}</td><td class="num">{}</td><td class="{}">{}</td><td>{}</td><td class="mono">{}</td><td>{}</td></tr>'
            ).format(
                cls,
                fmt(now) if now is not None else Html("&mdash;"),
                fmt(before) if before is not None else Html("&mdash;"),
                kind,
                move,
                badge("gold", "gold") if gold else EMPTY,
                escape(chunk.get("rel_path") or chunk.get("doc_id")),
                heading_text(chunk.get("heading_path")),
            )
        )
    if not rows:
        return EMPTY
    return Html("<h5>Retrieved, baseline vs now</h5>") + table(
        ["now", "baseline", "move", "gold", "rel_path", "heading_path"], rows, "since-chunks"
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def render_since(
    record: Mapping[str, Any],
    old_case: Mapping[str, Any] | None,
    old_record: dict[str, Any] | None,
    records_missing: str = "",
) -> Html:
    """The section, or nothing when the baseline has no such case.

    ``old_case`` is the baseline metrics.json's ``cases`` entry, ``old_record`` its results.jsonl record (None:
    ``records_missing`` says why old answers and chunks are not shown).
    """
    if old_case is None:
        return EMPTY
    old_metrics = _mapping(old_case.get("metrics"))
    new_metrics = _mapping(record.get("metrics"))
    parts = [
        Html('<section class="since"><h4>Since baseline</h4>'),
        _outcome_line(old_case.get("outcome"), record.get("outcome")),
    ]
    rows = _metric_rows(old_metrics, new_metrics)
    if rows:
        parts.append(table(["metric", "baseline", "now", "delta"], rows, "since-metrics"))
    if old_record is not None:
        parts += [_answers(old_record, record), _retrieval(old_record, record)]
    else:
        why = records_missing or "the baseline's results.jsonl has no record of this case"
        parts.append(Html('<p class="muted">Old answer and retrieved chunks not available: {}.</p>').format(why))
    parts.append(Html("</section>"))
    return join(parts)
