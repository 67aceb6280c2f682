"""The case cards of report.html (and pytest-html's extras): texts, error, misses, metrics, chunks, verdicts,
and what changed since the baseline (since.py).

The page shows the cases in three places (:class:`CaseSections`): the cases that flipped since the baseline
(pass -> fail, then fail -> pass), the other failed and errored cases, and, after the tables and charts, the
rest. :class:`CaseAnchors` fixes each card's element id; the CI summary links the same ids.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from pytest_rageval.evaluation.stored_chunk import heading_text
from pytest_rageval.evaluation.thresholds import op_for

from .browse import card_data
from .conversation import history_lines, is_conversation, turn_label, turns_of
from .markup import (
    EMPTY,
    Html,
    badge,
    escape,
    fmt,
    is_number,
    join,
    kv_list,
    num_td,
    outcome_class,
    table,
)
from .repeats import heading as repeat_heading
from .repeats import render_card as render_repeat_card
from .repeats import runs_line
from .since import render_since

if TYPE_CHECKING:
    from .baseline import BaselineCases

__all__ = [
    "DETAIL_LIMIT",
    "CardStore",
    "CaseAnchors",
    "CaseSections",
    "Piece",
    "case_anchors",
    "joined",
    "render_case_body",
    "render_cases",
    "render_since_for",
]

T = TypeVar("T")

_FIRST_OUTCOMES = frozenset({"failed", "error"})

#: Passed and skipped cases shown in full; beyond this many, one line each (flipped, failed and errored: always in full).
DETAIL_LIMIT = 500

#: The places of a case on the page, in page order (see :class:`CaseAnchors`).
TO_FAIL, TO_PASS, FAILING, OTHER = "to_fail", "to_pass", "failing", "other"


def _case_label(record: dict[str, Any]) -> str:
    return str(record.get("key") or record.get("test_case_id") or "(unnamed case)")


class CaseAnchors:
    """Where each case goes on report.html and its element id, given records in results.jsonl order.

    A case that flipped since the baseline (its key in ``to_fail`` or ``to_pass``) goes to the flipped
    section as ``case-f<n>`` (n counts flipped cases in results.jsonl order); another failed or errored case
    to the failing section as ``case-<n>``; any other case to the last section as ``case-r<n>``, the first
    ``DETAIL_LIMIT`` in full and the one-line rest without an id. The CI summary (report/markdown.py) links
    flipped cases with the same ids.
    """

    def __init__(self, to_fail: Collection[str] = (), to_pass: Collection[str] = ()) -> None:
        self.to_fail = frozenset(to_fail)
        self.to_pass = frozenset(to_pass)
        self.flipped = 0
        self.first = 0
        self.rest = 0

    def place(self, record: dict[str, Any]) -> tuple[str, str | None]:
        """(the section of ``record``: TO_FAIL, TO_PASS, FAILING or OTHER; its element id or None)."""
        key = record.get("key")
        if isinstance(key, str) and (key in self.to_fail or key in self.to_pass):
            self.flipped += 1
            return (TO_FAIL if key in self.to_fail else TO_PASS), f"case-f{self.flipped - 1}"
        if record.get("outcome") in _FIRST_OUTCOMES:
            self.first += 1
            return FAILING, f"case-{self.first - 1}"
        self.rest += 1
        return OTHER, f"case-r{self.rest - 1}" if self.rest <= DETAIL_LIMIT else None


def case_anchors(
    records: Iterable[dict[str, Any]],
    keys: Collection[str],
    *,
    to_fail: Collection[str] = (),
    to_pass: Collection[str] = (),
) -> dict[str, str]:
    """The element id in report.html of each case named in ``keys`` (node ids) that has one.

    ``to_fail``/``to_pass``: the flipped cases, as given to :func:`render_cases` (the gate's comparison).
    """
    anchors = CaseAnchors(to_fail, to_pass)
    out: dict[str, str] = {}
    for record in records:
        if not isinstance(record, dict):
            continue
        _, anchor = anchors.place(record)
        key = record.get("key")
        if anchor is not None and isinstance(key, str) and key in keys:
            out[key] = anchor
    return out


class CardStore(Protocol):
    """Where one section's cards go as they are rendered: a list, or report.html's spooled file (html.py)."""

    def append(self, card: Html, /) -> None: ...

    def __len__(self) -> int: ...


#: A part of a section in page order: a fragment, or the store of the section's cards.
Piece = Html | CardStore


@dataclass(frozen=True)
class CaseSections:
    """The cases as the page places them: ``flipped`` and ``failing`` before the tables, ``others`` after; each
    section its pieces in page order (:func:`joined` makes one fragment of them)."""

    flipped: tuple[Piece, ...]
    failing: tuple[Piece, ...]
    others: tuple[Piece, ...]


def joined(pieces: Iterable[Piece]) -> Html:
    """Pieces whose card stores are lists, as one fragment."""
    return join(piece if isinstance(piece, Html) else join(cast("list[Html]", piece)) for piece in pieces)


def render_since_for(record: dict[str, Any], baseline: BaselineCases | None) -> Html:
    """The "Since baseline" section of ``record``'s card (nothing without a baseline or without the case in it)."""
    if baseline is None:
        return EMPTY
    key = record.get("key")
    old_case = baseline.case(key)
    if old_case is None:
        return EMPTY
    return render_since(record, old_case, baseline.record(key), baseline.records_missing)


def render_cases(
    records: Iterable[dict[str, Any]],
    *,
    to_fail: Collection[str] = (),
    to_pass: Collection[str] = (),
    baseline: BaselineCases | None = None,
    store: Callable[[], CardStore] = list,
) -> CaseSections:
    """Flipped cases, then the other failed and errored ones, then the rest; rendered while reading, so
    records are not all kept (nor, with a ``store`` that writes them away, their cards). ``baseline`` adds each
    card's "Since baseline" section."""
    sections: dict[str, CardStore] = {TO_FAIL: store(), TO_PASS: store(), FAILING: store(), OTHER: store()}
    index: dict[str, list[tuple[str, str, str]]] = {TO_FAIL: [], TO_PASS: [], FAILING: []}
    anchors = CaseAnchors(to_fail, to_pass)
    for record in records:
        if not isinstance(record, dict):
            continue
        section, anchor = anchors.place(record)
        if anchor is None:
            sections[OTHER].append(_render_light_case(record))
            continue
        if section in index:
            index[section].append((str(record.get("outcome")), _case_label(record), anchor))
        since = render_since_for(record, baseline)
        sections[section].append(_render_case(record, anchor, open_=section in (TO_FAIL, FAILING), since=since))
    none = Html('<p class="muted">None.</p>')
    flipped: list[Piece] = []
    if to_fail or to_pass:
        n = len(sections[TO_FAIL]) + len(sections[TO_PASS])
        flipped.append(Html('<h2 id="flipped">Flipped since the baseline ({})</h2>').format(n))
        for section, title in ((TO_FAIL, "pass &rarr; fail"), (TO_PASS, "fail &rarr; pass")):
            flipped.append(
                Html('<h3 id="flipped-{}">{} ({})</h3>').format(
                    section.replace("_", "-"), Html(title), len(sections[section])
                )
            )
            flipped.extend((_render_index(index[section]), sections[section]) if len(sections[section]) else (none,))
    failing: list[Piece] = [
        Html('<h2 id="failing">{} ({})</h2>').format(
            "Other failed and errored cases" if to_fail or to_pass else "Failed and errored cases",
            len(sections[FAILING]),
        )
    ]
    failing.extend((_render_index(index[FAILING]), sections[FAILING]) if len(sections[FAILING]) else (none,))
    rest = sections[OTHER]
    others: list[Piece] = [Html('<h2 id="others">Other cases ({})</h2>').format(len(rest))]
    if len(rest) > DETAIL_LIMIT:
        others.append(
            Html(
                '<p class="muted">The first {} in full; the rest show question, answer and metrics (results.jsonl has every detail).</p>'
            ).format(DETAIL_LIMIT)
        )
    others.append(rest)
    return CaseSections(flipped=tuple(flipped), failing=tuple(failing), others=tuple(others))


def _render_index(entries: list[tuple[str, str, str]]) -> Html:
    items = join(
        Html('<li>{} <a href="#{}"><code>{}</code></a></li>').format(
            badge(outcome, outcome_class(outcome)), anchor, label
        )
        for outcome, label, anchor in entries
    )
    return Html('<ul class="index">{}</ul>').format(items)


def _render_case(record: dict[str, Any], anchor: str, *, open_: bool, since: Html = EMPTY) -> Html:
    cls = outcome_class(record.get("outcome"))
    attr = Html(" open") if open_ else EMPTY
    return Html('<details class="case o-{}" id="{}"{}{}><summary>{}</summary><div>{}</div></details>').format(
        cls,
        anchor,
        attr,
        card_data(record, _case_label(record)),
        _render_summary(record),
        render_case_body(record, since=since),
    )


def _render_light_case(record: dict[str, Any]) -> Html:
    """A case beyond DETAIL_LIMIT: a closed card with question, answer and metric values (filterable like the rest)."""
    cls = outcome_class(record.get("outcome"))
    values = _field(record, "metrics", dict)
    metrics = " \u00b7 ".join(f"{n} {_plain(v) if is_number(v) else fmt(v).unescape()}" for n, v in values.items())
    return Html('<details class="case o-{} light"{}><summary>{}</summary><div>{}{}</div></details>').format(
        cls,
        card_data(record, _case_label(record)),
        _render_summary(record),
        _render_case_text(record, light=True),
        Html('<p class="muted">{}</p>').format(metrics) if values else EMPTY,
    )


def render_case_body(record: dict[str, Any], *, since: Html = EMPTY) -> Html:
    """A case's detail: texts, error, the repeated runs, misses, metric table, what changed since the baseline
    (``since``: :func:`render_since_for`), chunks (gold marked), judge verdicts; a conversation's as a thread of
    its turns (:func:`_render_thread`)."""
    if is_conversation(record):
        return _render_thread(record, since)
    body = [
        render_repeat_card(record),  # a repeated case: runs passed, its class, which run the details below are from
        _render_case_text(record),
        _render_error(record),
        _render_notes(record.get("notes")),
        _render_misses(record.get("misses"), repeat_heading(record, "Missed metrics")),
        since,
        _render_case_metrics(record),
        _render_chunks("Retrieved chunks", record.get("retrieved_chunks")),
        _render_chunks("References", record.get("references")),
        _render_judge(record.get("judge")),
        _render_case_extras(record),
    ]
    return join(body)


def _render_thread(record: dict[str, Any], since: Html) -> Html:
    """A conversation: where it is from and how its history was sent, its error and misses, then each turn in
    order as a card of its own (question, the history it was sent, answer, metrics, retrieval, verdicts)."""
    turns = turns_of(record)
    where = f"{record.get('file')}:{record.get('line')}" if record.get("line") else str(record.get("file") or "")
    head = Html('<div class="muted mono">{}</div><div class="muted">conversation of {} turns, {} history</div>').format(
        where, len(turns), str(record.get("history") or "live")
    )
    cards = []
    for turn in turns:
        body = dict(turn)
        history = Html('<h4>History sent</h4><pre class="text">{}</pre>').format(
            "\n".join(history_lines(turn.get("history"), indent=""))
        )
        outcome = turn.get("outcome")
        cards.append(
            Html('<details class="turn o-{}"{}><summary>{} <b>{}</b> {}</summary><div>{}{}</div></details>').format(
                outcome_class(outcome),
                Html(" open") if outcome in _FIRST_OUTCOMES else EMPTY,
                badge(str(outcome or "unknown"), outcome_class(outcome)),
                turn_label(turn),
                escape(turn.get("question")),
                history,
                render_case_body(body),
            )
        )
    misses = [m for m in _field(record, "misses", list) if isinstance(m, dict)]
    missed = _render_misses(
        [{**m, "metric": f"turn {m.get('turn')}: {m.get('metric')}"} for m in misses], "Missed metrics"
    )
    return join([head, _render_error(record), _render_notes(record.get("notes")), missed, since, *cards])


def _render_summary(record: dict[str, Any]) -> Html:
    outcome = record.get("outcome")
    parts = [
        badge(str(outcome or "unknown"), outcome_class(outcome)),
        Html(" <code>{}</code>").format(_case_label(record)),
    ]
    if record.get("invalid_line"):
        parts.append(Html(" ") + badge("invalid line", "error"))
    parts.append(_since_baseline_badge(record))
    runs = runs_line(record)
    if runs:
        parts.append(Html(" ") + badge(runs, "xfailed" if record.get("flaky") else "other"))
    if record.get("category"):
        parts.append(Html(' <span class="muted">{}</span>').format(record["category"]))
    tags = record.get("tags") or []
    if isinstance(tags, list) and tags:
        parts.append(
            Html('<span class="tags">{}</span>').format(join(Html("<span>{}</span>").format(escape(t)) for t in tags))
        )
    return join(parts)


#: how a case stands against the baseline (gate/known.py): its badge's word and class
_SINCE_BADGES = {
    "known": ("known failure", "xfailed"),
    "worse": ("worse than baseline", "failed"),
    "fixed": ("fixed since baseline", "passed"),
}


def _since_baseline_badge(record: dict[str, Any]) -> Html:
    """A known failure, one that got worse, or a fixed case: its badge, then what the comparison said."""
    since = record.get("since_baseline")
    kind = since.get("kind") if isinstance(since, dict) else None
    if not isinstance(since, dict) or kind not in _SINCE_BADGES:
        return EMPTY
    word, cls = _SINCE_BADGES[kind]
    return Html(' {} <span class="muted">{}</span>').format(badge(word, cls), str(since.get("text") or ""))


def _text_block(label: str, value: Any, *, search: bool = False) -> Html:
    """A labelled text; ``search``: the filter bar's text search looks in it (browse.py)."""
    attr = Html(" data-s") if search else EMPTY
    return Html('<h4>{}</h4><div class="text"{}>{}</div>').format(label, attr, escape(value))


def _render_case_text(record: dict[str, Any], *, light: bool = False) -> Html:
    """Where the case is from, its question, expected answer, key facts, answer; ``light``: question and answer only."""
    parts: list[Html] = []
    if light:
        for label, key in (("Question", "question"), ("Answer", "answer")):
            if record.get(key) is not None:
                parts.append(_text_block(label, record[key], search=True))
        return join(parts)
    if record.get("file"):
        where = f"{record['file']}:{record['line']}" if record.get("line") else record["file"]
        parts.append(Html('<div class="muted mono">{}</div>').format(where))
    if record.get("answerable") is False:
        parts.append(Html('<div class="muted">unanswerable: the system should abstain</div>'))
    if record.get("question") is not None:
        parts.append(_text_block("Question", record["question"], search=True))
    if record.get("reference_answer"):
        parts.append(_text_block("Expected answer", record["reference_answer"]))
    facts = record.get("expected_key_facts")
    if isinstance(facts, list) and facts:
        items = join(Html("<li>{}</li>").format(escape(f)) for f in facts)
        parts.append(Html("<h4>Expected key facts</h4><ul>{}</ul>").format(items))
    if record.get("answer") is not None:
        label = "Answer (empty)" if record.get("empty_response") else "Answer"
        parts.append(_text_block(label, record["answer"], search=True))
    if record.get("abstain_reason"):
        parts.append(_text_block("Abstain reason", record["abstain_reason"]))
    return join(parts)


def _render_error(record: dict[str, Any]) -> Html:
    error = record.get("error")
    if not error:
        return EMPTY
    if isinstance(error, dict):
        kind, message = error.get("kind") or "error", error.get("message")
    else:
        kind, message = "error", error
    return Html('<h4>Error: <code>{}</code></h4><div class="errbox">{}</div>').format(kind, escape(message))


def _render_notes(notes: Any) -> Html:
    """What was repaired or cut in what the RAG or judge sent (record["notes"])."""
    if not isinstance(notes, list) or not notes:
        return EMPTY
    return Html("<h4>Notes</h4><ul>{}</ul>").format(join(Html("<li>{}</li>").format(escape(n)) for n in notes))


def _render_misses(misses: Any, heading: str = "Missed metrics") -> Html:
    if not isinstance(misses, list) or not misses:
        return EMPTY
    rows = [
        Html('<tr class="miss"><td><code>{}</code></td>{}<td class="num">{}</td>{}</tr>').format(
            escape(m.get("metric")), num_td(m.get("value")), escape(m.get("op")), num_td(m.get("threshold"))
        )
        for m in misses
        if isinstance(m, dict)
    ]
    return Html("<h4>{}</h4>").format(heading) + table(["metric", "value", "op", "threshold"], rows)


def _default_op(metric: str, threshold: Any) -> str:
    return "==" if isinstance(threshold, bool) else op_for(metric)


def _field(record: dict[str, Any], name: str, kind: type[T]) -> T:
    """``record[name]`` when it is a ``kind`` (a record from a file may hold anything), else an empty one."""
    value = record.get(name)
    return value if isinstance(value, kind) else kind()


def _render_case_metrics(record: dict[str, Any]) -> Html:
    values = _field(record, "metrics", dict)
    thresholds = _field(record, "thresholds", dict)
    misses = _field(record, "misses", list)
    missed = {str(m.get("metric")): m for m in misses if isinstance(m, dict)}
    names = list(values) + [n for n in thresholds if n not in values]
    if not names:
        return EMPTY
    rows = [_case_metric_row(str(n), values.get(n), thresholds.get(n), missed.get(str(n))) for n in names]
    return Html("<h4>{}</h4>").format(repeat_heading(record, "Metrics")) + table(
        ["metric", "value", "op", "threshold", "status"], rows
    )


def _case_metric_row(name: str, value: Any, threshold: Any, miss: dict[str, Any] | None) -> Html:
    has_threshold = threshold is not None
    op = (miss or {}).get("op") or (_default_op(name, threshold) if has_threshold else "")
    if miss is not None:
        status, cls = badge("miss", "failed"), Html(' class="miss"')
    elif value is None:
        status, cls = Html('<span class="muted">n/a</span>'), EMPTY
    elif has_threshold:
        status, cls = Html('<span class="muted">ok</span>'), EMPTY
    else:
        status, cls = EMPTY, EMPTY
    threshold_cell = num_td(threshold) if has_threshold else Html("<td></td>")
    return Html('<tr{}><td><code>{}</code></td>{}<td class="num">{}</td>{}<td>{}</td></tr>').format(
        cls, name, num_td(value), op, threshold_cell, status
    )


def _render_chunks(label: str, chunks: Any) -> Html:
    if not isinstance(chunks, list) or not chunks:
        return EMPTY
    rows = [_chunk_row(c, i) for i, c in enumerate(chunks, start=1) if isinstance(c, dict)]
    headers = ["rank", "gold", "rel_path", "heading_path", "score_final", "text"]
    return Html("<h4>{} ({})</h4>").format(label, len(rows)) + table(headers, rows, "chunks")


#: characters of a chunk's text shown before the rest is folded away
CHUNK_PREVIEW = 200


def chunk_text(chunk: dict[str, Any]) -> Html:
    """A chunk's text: whole when short; the first 200 characters and the whole text in a ``<details>`` when
    the run stored it (``--rageval-store-full-text``); else the 200 stored characters, saying so."""
    text = chunk.get("text")
    if not isinstance(text, str):
        return escape(text)
    if chunk.get("text_truncated"):
        return escape(text) + Html(
            ' <span class="muted">(first {} characters stored; --rageval-store-full-text keeps the whole chunk)</span>'
        ).format(CHUNK_PREVIEW)
    if len(text) <= CHUNK_PREVIEW:
        return escape(text)
    return Html(
        '{}… <details class="full-text"><summary>whole chunk ({:,} characters)</summary><div class="text">{}</div></details>'
    ).format(text[:CHUNK_PREVIEW], len(text), text)


def _chunk_row(chunk: dict[str, Any], position: int) -> Html:
    gold = chunk.get("gold") is True
    rank = chunk.get("rank") if chunk.get("rank") is not None else position
    gold_cell = badge("gold", "gold") if gold else EMPTY
    cls = Html(' class="gold"') if gold else EMPTY
    return Html(
        '<tr{}><td class="num">{}</td><td>{}</td><td class="mono">{}</td><td>{}</td>{}<td><div class="text">{}</div></td></tr>'
    ).format(
        cls,
        rank,
        gold_cell,
        escape(chunk.get("rel_path") or chunk.get("doc_id")),
        heading_text(chunk.get("heading_path")),
        num_td(chunk.get("score_final")),
        chunk_text(chunk),
    )


def _render_judge(judge: Any) -> Html:
    if not isinstance(judge, dict) or not judge:
        return EMPTY
    parts = [Html("<h4>Judge verdicts</h4>")]
    for metric, verdict in judge.items():
        parts.append(_render_verdict(str(metric), verdict))
    return join(parts)


#: verdict fields shown as fields; the rest as a key/value list (spend: only when not zero)
_VERDICT_SHOWN = frozenset({"metric", "score", "label", "reasoning", "supported_claims", "unsupported_claims", "raw"})
_SPEND = ("prompt_tokens", "completion_tokens", "cost_usd")


def _render_verdict(metric: str, verdict: Any) -> Html:
    """Score, label, reasoning and claims as fields; tokens and cost only when spent (never the heuristic judge's
    zeros); the judge's raw answer only when it gave neither score nor label, collapsed."""
    if not isinstance(verdict, dict):
        return Html('<div class="verdict"><h5><code>{}</code>: {}</h5></div>').format(metric, fmt(verdict))
    head = [Html("<code>{}</code>").format(metric)]
    if verdict.get("score") is not None:
        head.append(Html(" score <strong>{}</strong>").format(fmt(verdict.get("score"))))
    if isinstance(verdict.get("label"), bool):
        head.append(Html(" label <strong>{}</strong>").format("yes" if verdict["label"] else "no"))
    if verdict.get("cached"):
        head.append(Html(' <span class="muted">(cached)</span>'))
    parts = [Html('<div class="verdict"><h5>{}</h5>').format(join(head))]
    if verdict.get("reasoning"):
        parts.append(Html('<div class="text">{}</div>').format(verdict["reasoning"]))
    for key in ("unsupported_claims", "supported_claims"):
        claims = verdict.get(key)
        if isinstance(claims, list) and claims:
            items = join(Html("<li>{}</li>").format(escape(c)) for c in claims)
            parts.append(Html('<div class="claims {}">{}:</div><ul>{}</ul>').format(key, key.replace("_", " "), items))
    extras = [
        (k, v)
        for k, v in verdict.items()
        if k not in _VERDICT_SHOWN
        and v not in (None, "", [], {})
        and not (k in _SPEND and _is_zero(v))
        and not (k == "attempts" and v == 1)
        and k != "cached"
    ]
    if extras:
        parts.append(kv_list(extras))
    if verdict.get("raw") and verdict.get("score") is None and not isinstance(verdict.get("label"), bool):
        parts.append(
            Html(
                '<details class="raw"><summary>the judge\'s raw answer (not parsed)</summary><div class="text">{}</div></details>'
            ).format(escape(verdict["raw"]))
        )
    parts.append(Html("</div>"))
    return join(parts)


def _is_zero(value: Any) -> bool:
    return is_number(value) and value == 0


def _render_case_extras(record: dict[str, Any]) -> Html:
    pairs: list[tuple[str, Any]] = []
    for key in ("params", "difficulty", "runs", "latency", "cost", "judge_cache"):
        value = record.get(key)
        if isinstance(value, dict) and key in ("cost", "judge_cache") and all(_is_zero(v) for v in value.values()):
            continue  # nothing spent (the heuristic judge, no judge): no row of zeros
        if value not in (None, "", {}, []):
            pairs.append((key, _compact(value)))
    if not pairs:
        return EMPTY
    return Html("<h4>Details</h4>") + kv_list(pairs)


def _compact(value: Any) -> Any:
    """A dict as ``k=v`` text (numbers rounded); anything else unchanged."""
    if not isinstance(value, dict):
        return value
    return ", ".join(f"{k}={_plain(v)}" for k, v in value.items())


def _plain(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.3f}".rstrip("0").rstrip(".") if not value.is_integer() else str(int(value))
    return str(value)
