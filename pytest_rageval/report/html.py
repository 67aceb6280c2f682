"""The standalone ``<run_id>/report.html`` page (SPEC section 9).

No JavaScript, no network references: the page renders offline and a
Content-Security-Policy forbids scripts and remote loads. The page is built of
:class:`Html` fragments (markupsafe's ``Markup``): a fragment is written as a
template, ``Html("<td>{}</td>").format(value)``, and anything that is not
already ``Html`` (what came from the RAG, the judge or the eval set) is escaped
where it joins one (``format``, ``+``, ``join``), so a value cannot reach the
page unescaped by being forgotten. Only :func:`write_report` and
:func:`load_history` touch files; :func:`render_report` is pure.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any, Optional, TypeVar

from markupsafe import Markup

from .. import registry, safejson
from ..runfolder import write_text_atomic
from ..thresholds import op_for
from .configs import render_configs

T = TypeVar("T")

__all__ = [
    "CSS",
    "CaseAnchors",
    "Html",
    "case_anchors",
    "escape",
    "load_history",
    "render_aggregates",
    "render_case_body",
    "render_report",
    "trend_metrics",
    "write_report",
]

def trend_metrics() -> tuple[str, ...]:
    """The aggregates charted over earlier runs: the metric registry's headline ones."""
    return registry.headline_aggregates()


CSP = "default-src 'none'; style-src 'unsafe-inline'"

_FIRST_OUTCOMES = frozenset({"failed", "error"})
_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
_COUNT_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("n", ("n", "total", "total_tests", "count", "cases")),
    ("passed", ("passed",)),
    ("failed", ("failed",)),
    ("errors", ("errors", "error")),
)
_DASH = "\u2014"

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:14px 0 6px}h4{font-size:14px;margin:12px 0 4px}
table{border-collapse:collapse;background:#fff;margin:4px 0 8px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f4}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.meta{display:flex;flex-wrap:wrap;row-gap:4px}.meta span{margin-right:16px;white-space:nowrap}
.warn{background:#fff3cd;border:1px solid #e0b000;padding:8px 12px;margin:8px 0;font-weight:600}
.badge{display:inline-block;padding:0 6px;border-radius:4px;font-size:12px;font-weight:700;color:#fff;background:#6e7781}
.b-passed{background:#1a7f37}.b-failed{background:#cf222e}.b-error{background:#bc4c00}
.b-skipped{background:#6e7781}.b-xfailed,.b-xpassed{background:#9a6700}.b-other{background:#6e7781}
.b-regressed{background:#cf222e}.b-heuristic{background:#8250df}.b-gold{background:#9a6700}
details.case{background:#fff;border:1px solid #d0d7de;border-left:5px solid #6e7781;margin:6px 0;border-radius:4px}
details.case>summary{cursor:pointer;padding:6px 10px}
details.case>div{padding:4px 14px 12px}
.o-passed{border-left-color:#1a7f37!important}.o-failed{border-left-color:#cf222e!important}
.o-error{border-left-color:#bc4c00!important}.o-xfailed,.o-xpassed{border-left-color:#9a6700!important}
.text{white-space:pre-wrap;word-wrap:break-word;background:#f6f8fa;border:1px solid #eaeef2;padding:6px 8px;margin:2px 0 6px;max-height:24em;overflow:auto}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0}
dl.kv dt{font-weight:600}dl.kv dd{margin:0}
tr.miss td{background:#ffebe9}tr.gold td{background:#fff8c5}tr.regressed td{background:#ffebe9}
.muted{color:#656d76}.tags span{background:#ddf4ff;border-radius:10px;padding:0 6px;margin-left:4px;font-size:12px}
.errbox{background:#fff1e5;border:1px solid #bc4c00;padding:6px 8px;white-space:pre-wrap}
.chart{display:inline-block;margin:4px 16px 12px 0;background:#fff;border:1px solid #d0d7de}
.chart svg text{font:11px system-ui,sans-serif;fill:#57606a}
ul.index{columns:2;margin:4px 0}
"""


# --------------------------------------------------------------------------- formatting


class Html(Markup):
    """A fragment of the page: markup as it is; any other value joined to it (``format``, ``+``, ``join``, ``%``)
    is escaped with ``html.escape(..., quote=True)`` (the page's bytes as before: ``&#x27;``, ``&quot;``)."""

    __slots__ = ()

    @classmethod
    def escape(cls, s: Any, /) -> Html:
        """``s`` as text in HTML (text or a quoted attribute); markup (anything with ``__html__``) stays as is."""
        if hasattr(s, "__html__"):
            return cls(s.__html__())
        return cls(html.escape(s if isinstance(s, str) else str(s), quote=True))


_EMPTY = Html("")


def escape(value: Any) -> Html:
    """Anything as text for HTML text or a quoted attribute (markup stays as is); ``None`` becomes ''."""
    if value is None:
        return _EMPTY
    return Html.escape(value)


def _join(parts: Iterable[Any]) -> Html:
    """The fragments one after another (a part that is no fragment is escaped)."""
    return _EMPTY.join(parts)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fmt(value: Any) -> Html:
    """A metric value: 3 decimals for floats, '—' for null, escaped text otherwise."""
    if value is None:
        return Html(_DASH)
    if isinstance(value, bool):
        return Html("true" if value else "false")
    if isinstance(value, float) and math.isfinite(value):
        return Html("{:.3f}").format(value)
    if isinstance(value, (dict, list)):
        return escape(safejson.dumps(value))
    return escape(value)


def _fmt_delta(value: Any) -> Html:
    """A signed delta (``+0.050``)."""
    if _is_number(value) and math.isfinite(value):
        return Html("{:+.3f}").format(value)
    return _fmt(value)


def _fmt_count(value: Any) -> Html:
    if value is None:
        return Html(_DASH)
    if isinstance(value, float) and value.is_integer():
        return escape(int(value))
    return _fmt(value)


def _heading(value: Any) -> str:
    """A heading path as text: lists joined with ' > '."""
    if isinstance(value, (list, tuple)):
        return " > ".join(str(part) for part in value)
    return "" if value is None else str(value)


def _outcome_class(outcome: Any) -> str:
    """A CSS-safe class suffix for an outcome (never raw input)."""
    return outcome if outcome in _OUTCOMES else "other"


def _badge(label: str, kind: str) -> Html:
    return Html('<span class="badge b-{}">{}</span>').format(kind, label)


def _table(headers: Iterable[str], rows: Iterable[Html], cls: str = "") -> Html:
    """A table from header labels (text) and rendered ``<tr>`` rows."""
    head = _join(Html("<th>{}</th>").format(h) for h in headers)
    attr = Html(' class="{}"').format(cls) if cls else _EMPTY
    return Html("<table{}><thead><tr>{}</tr></thead><tbody>{}</tbody></table>").format(attr, head, _join(rows))


def _num_td(value: Any, formatter: Callable[[Any], Html] = _fmt) -> Html:
    return Html('<td class="num">{}</td>').format(formatter(value))


# --------------------------------------------------------------------------- header


def _judge_info(metrics: dict) -> tuple[Optional[str], bool]:
    """The judge's name and whether it is heuristic."""
    judge = metrics.get("judge")
    if isinstance(judge, dict):
        return judge.get("name"), bool(judge.get("heuristic"))
    if isinstance(judge, str):
        return judge, judge == "lexical"
    return None, False


def _render_header(metrics: dict, title: str) -> Html:
    parts = [Html("<h1>{}</h1>").format(title), Html('<div class="meta">')]
    parts.append(Html("<span>run <code>{}</code></span>").format(metrics.get("run_id") or _DASH))
    parts.append(Html("<span>timestamp {}</span>").format(metrics.get("timestamp") or _DASH))
    for key in ("config_hash", "eval_set_hash"):
        if metrics.get(key):
            full = str(metrics[key])
            parts.append(Html('<span>{} <code title="{}">{}</code></span>').format(key, full, full[:12]))
    name, heuristic = _judge_info(metrics)
    model = (metrics.get("judge") or {}).get("model") if isinstance(metrics.get("judge"), dict) else None
    judge = Html("<code>{}</code>").format(name) + (Html(" ({})").format(model) if model else _EMPTY) if name else Html(_DASH)
    if heuristic:
        judge += Html(" ") + _badge("heuristic", "heuristic")
    parts.append(Html("<span>judge {}</span>").format(judge))
    if metrics.get("complete") is not False:
        parts.append(Html("<span>{}</span>").format(_badge("complete", "passed")))
    parts.append(Html("</div>"))
    if metrics.get("complete") is False:
        parts.append(Html(
            '<div class="warn">incomplete run: the session was interrupted; '
            "these numbers cover only the cases that finished.</div>"
        ))
    parts.append(_render_counts(metrics))
    return _join(parts)


def _render_counts(metrics: dict) -> Html:
    keys = ("total_tests", "passed", "failed", "errors", "skipped", "invalid_lines")
    labels = ("total", "passed", "failed", "errors", "skipped", "invalid lines")
    cells = _join(_num_td(metrics.get(k), _fmt_count) for k in keys)
    return _table(labels, [Html("<tr>{}</tr>").format(cells)], "counts")


# --------------------------------------------------------------------------- aggregates


def _flatten(values: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Scalars of a nested dict as ``("latency.p95_ms", value)`` pairs, in order."""
    out: list[tuple[str, Any]] = []
    if not isinstance(values, dict):
        return out
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.extend(_flatten(value, name + "."))
        else:
            out.append((name, value))
    return out


def _delta_map(deltas: Optional[list[dict]]) -> dict[str, dict]:
    return {str(d.get("name")): d for d in deltas or [] if isinstance(d, dict)}


def render_aggregates(metrics: dict, deltas: Optional[list[dict]]) -> Html:
    rows_data = _flatten(metrics.get("aggregate_metrics") or {})
    if isinstance(metrics.get("judge_coverage"), dict):
        rows_data += _flatten(metrics["judge_coverage"], "judge_coverage.")
    by_name = _delta_map(deltas)
    known = {name for name, _ in rows_data}
    rows_data += [(name, d.get("new")) for name, d in by_name.items() if name not in known]
    with_deltas = deltas is not None
    headers = ["metric", "value"]
    if with_deltas:
        headers += ["baseline", "delta", "tolerance", "95% CI", "status"]
    rows = [_aggregate_row(name, value, by_name.get(name), with_deltas) for name, value in rows_data]
    if not rows:
        return Html('<h2 id="aggregate">Aggregate metrics</h2><p class="muted">No aggregate metrics.</p>')
    return Html('<h2 id="aggregate">Aggregate metrics</h2>') + _table(headers, rows, "aggregate")


def _aggregate_row(name: str, value: Any, delta: Optional[dict], with_deltas: bool) -> Html:
    cells = Html("<td><code>{}</code></td>{}").format(name, _num_td(value))
    if not with_deltas:
        return Html("<tr>{}</tr>").format(cells)
    if delta is None:
        return Html("<tr>{}<td></td><td></td><td></td><td></td><td></td></tr>").format(cells)
    regressed = bool(delta.get("regressed"))
    status = _badge("REGRESSED", "regressed") if regressed else Html('<span class="muted">ok</span>')
    cells += (
        _num_td(delta.get("old"))
        + _num_td(delta.get("delta"), _fmt_delta)
        + _num_td(delta.get("tolerance"))
        + _num_td(_ci_text(delta), lambda v: v)
        + Html("<td>{}</td>").format(status)
    )
    cls = Html(' class="regressed"') if regressed else _EMPTY
    return Html("<tr{}>{}</tr>").format(cls, cells)


def _ci_text(delta: dict) -> Html:
    low, high = delta.get("ci_low"), delta.get("ci_high")
    if low is None and high is None:
        return Html(_DASH)
    return Html("[{}, {}]").format(_fmt_delta(low), _fmt_delta(high))


# --------------------------------------------------------------------------- cases


#: Passed and skipped cases shown in full; beyond this many, one line each (failed and errored: always in full).
DETAIL_LIMIT = 500


def _case_label(record: dict) -> str:
    return str(record.get("key") or record.get("test_case_id") or "(unnamed case)")


class CaseAnchors:
    """The id of each case's element in report.html, given in results.jsonl order as :func:`_render_cases` places them.

    ``case-<n>`` for the n-th failed or errored case (listed first), ``case-r<n>`` for the n-th other case shown
    in full (the first ``DETAIL_LIMIT``); the one-line rest has no id. The CI summary (report/markdown.py)
    links flipped cases with the same ids.
    """

    def __init__(self) -> None:
        self.first = 0
        self.rest = 0

    def place(self, record: dict) -> tuple[bool, Optional[str]]:
        """(whether ``record`` is among the failed and errored cases shown first, its element id or None)."""
        if record.get("outcome") in _FIRST_OUTCOMES:
            self.first += 1
            return True, f"case-{self.first - 1}"
        self.rest += 1
        return False, f"case-r{self.rest - 1}" if self.rest <= DETAIL_LIMIT else None


def case_anchors(records: Iterable[dict], keys: Collection[str]) -> dict[str, str]:
    """The element id in report.html of each case named in ``keys`` (node ids) that has one."""
    anchors = CaseAnchors()
    out: dict[str, str] = {}
    for record in records:
        if not isinstance(record, dict):
            continue
        _, anchor = anchors.place(record)
        key = record.get("key")
        if anchor is not None and isinstance(key, str) and key in keys:
            out[key] = anchor
    return out


def _render_cases(records: Iterable[dict]) -> Html:
    """Failed and errored cases first, then the others; rendered while reading, so records are not all kept."""
    first: list[Html] = []
    index: list[tuple[str, str, str]] = []
    rest: list[Html] = []
    anchors = CaseAnchors()
    for record in records:
        if not isinstance(record, dict):
            continue
        shown_first, anchor = anchors.place(record)
        if shown_first:
            assert anchor is not None
            index.append((str(record.get("outcome")), _case_label(record), anchor))
            first.append(_render_case(record, anchor, open_=True))
        elif anchor is not None:
            rest.append(_render_case(record, anchor, open_=False))
        else:
            cls = _outcome_class(record.get("outcome"))
            rest.append(Html('<div class="case o-{} compact">{}</div>').format(cls, _render_summary(record)))
    parts = [Html('<h2 id="failing">Failed and errored cases ({})</h2>').format(len(first))]
    parts.append(_render_index(index) + _join(first) if first else Html('<p class="muted">None.</p>'))
    parts.append(Html('<h2 id="others">Other cases ({})</h2>').format(len(rest)))
    if len(rest) > DETAIL_LIMIT:
        parts.append(Html('<p class="muted">The first {} in full, the rest one line each (results.jsonl has every detail).</p>')
                     .format(DETAIL_LIMIT))
    parts.extend(rest)
    return _join(parts)


def _render_index(entries: list[tuple[str, str, str]]) -> Html:
    items = _join(
        Html('<li>{} <a href="#{}"><code>{}</code></a></li>').format(_badge(outcome, _outcome_class(outcome)), anchor, label)
        for outcome, label, anchor in entries
    )
    return Html('<ul class="index">{}</ul>').format(items)


def _render_case(record: dict, anchor: str, *, open_: bool) -> Html:
    cls = _outcome_class(record.get("outcome"))
    attr = Html(" open") if open_ else _EMPTY
    return Html('<details class="case o-{}" id="{}"{}><summary>{}</summary><div>{}</div></details>').format(
        cls, anchor, attr, _render_summary(record), render_case_body(record)
    )


def render_case_body(record: dict) -> Html:
    """A case's detail: texts, error, misses, metric table, chunks (gold marked), judge verdicts."""
    body = [
        _render_case_text(record),
        _render_error(record),
        _render_notes(record.get("notes")),
        _render_misses(record.get("misses")),
        _render_case_metrics(record),
        _render_chunks("Retrieved chunks", record.get("retrieved_chunks")),
        _render_chunks("References", record.get("references")),
        _render_judge(record.get("judge")),
        _render_case_extras(record),
    ]
    return _join(body)


def _render_summary(record: dict) -> Html:
    outcome = record.get("outcome")
    parts = [_badge(str(outcome or "unknown"), _outcome_class(outcome)), Html(" <code>{}</code>").format(_case_label(record))]
    if record.get("invalid_line"):
        parts.append(Html(" ") + _badge("invalid line", "error"))
    if record.get("flaky"):
        parts.append(Html(" ") + _badge("flaky", "xfailed"))
    if record.get("category"):
        parts.append(Html(' <span class="muted">{}</span>').format(record["category"]))
    tags = record.get("tags") or []
    if isinstance(tags, list) and tags:
        parts.append(Html('<span class="tags">{}</span>').format(_join(Html("<span>{}</span>").format(escape(t)) for t in tags)))
    return _join(parts)


def _text_block(label: str, value: Any) -> Html:
    return Html('<h4>{}</h4><div class="text">{}</div>').format(label, escape(value))


def _render_case_text(record: dict) -> Html:
    parts: list[Html] = []
    if record.get("file"):
        where = f"{record['file']}:{record['line']}" if record.get("line") else record["file"]
        parts.append(Html('<div class="muted mono">{}</div>').format(where))
    if record.get("answerable") is False:
        parts.append(Html('<div class="muted">unanswerable: the system should abstain</div>'))
    if record.get("question") is not None:
        parts.append(_text_block("Question", record["question"]))
    if record.get("reference_answer"):
        parts.append(_text_block("Expected answer", record["reference_answer"]))
    facts = record.get("expected_key_facts")
    if isinstance(facts, list) and facts:
        items = _join(Html("<li>{}</li>").format(escape(f)) for f in facts)
        parts.append(Html("<h4>Expected key facts</h4><ul>{}</ul>").format(items))
    if record.get("answer") is not None:
        label = "Answer (empty)" if record.get("empty_response") else "Answer"
        parts.append(_text_block(label, record["answer"]))
    if record.get("abstain_reason"):
        parts.append(_text_block("Abstain reason", record["abstain_reason"]))
    return _join(parts)


def _render_error(record: dict) -> Html:
    error = record.get("error")
    if not error:
        return _EMPTY
    if isinstance(error, dict):
        kind, message = error.get("kind") or "error", error.get("message")
    else:
        kind, message = "error", error
    return Html('<h4>Error: <code>{}</code></h4><div class="errbox">{}</div>').format(kind, escape(message))


def _render_notes(notes: Any) -> Html:
    """What was repaired or cut in what the RAG or judge sent (record["notes"])."""
    if not isinstance(notes, list) or not notes:
        return _EMPTY
    return Html("<h4>Notes</h4><ul>{}</ul>").format(_join(Html("<li>{}</li>").format(escape(n)) for n in notes))


def _render_misses(misses: Any) -> Html:
    if not isinstance(misses, list) or not misses:
        return _EMPTY
    rows = [
        Html('<tr class="miss"><td><code>{}</code></td>{}<td class="num">{}</td>{}</tr>').format(
            escape(m.get("metric")), _num_td(m.get("value")), escape(m.get("op")), _num_td(m.get("threshold"))
        )
        for m in misses
        if isinstance(m, dict)
    ]
    return Html("<h4>Missed metrics</h4>") + _table(["metric", "value", "op", "threshold"], rows)


def _default_op(metric: str, threshold: Any) -> str:
    return "==" if isinstance(threshold, bool) else op_for(metric)


def _field(record: dict, name: str, kind: type[T]) -> T:
    """``record[name]`` when it is a ``kind`` (a record from a file may hold anything), else an empty one."""
    value = record.get(name)
    return value if isinstance(value, kind) else kind()


def _render_case_metrics(record: dict) -> Html:
    values = _field(record, "metrics", dict)
    thresholds = _field(record, "thresholds", dict)
    misses = _field(record, "misses", list)
    missed = {str(m.get("metric")): m for m in misses if isinstance(m, dict)}
    names = list(values) + [n for n in thresholds if n not in values]
    if not names:
        return _EMPTY
    rows = [_case_metric_row(str(n), values.get(n), thresholds.get(n), missed.get(str(n))) for n in names]
    return Html("<h4>Metrics</h4>") + _table(["metric", "value", "op", "threshold", "status"], rows)


def _case_metric_row(name: str, value: Any, threshold: Any, miss: Optional[dict]) -> Html:
    has_threshold = threshold is not None
    op = (miss or {}).get("op") or (_default_op(name, threshold) if has_threshold else "")
    if miss is not None:
        status, cls = _badge("miss", "failed"), Html(' class="miss"')
    elif value is None:
        status, cls = Html('<span class="muted">n/a</span>'), _EMPTY
    elif has_threshold:
        status, cls = Html('<span class="muted">ok</span>'), _EMPTY
    else:
        status, cls = _EMPTY, _EMPTY
    threshold_cell = _num_td(threshold) if has_threshold else Html("<td></td>")
    return Html('<tr{}><td><code>{}</code></td>{}<td class="num">{}</td>{}<td>{}</td></tr>').format(
        cls, name, _num_td(value), op, threshold_cell, status
    )


def _render_chunks(label: str, chunks: Any) -> Html:
    if not isinstance(chunks, list) or not chunks:
        return _EMPTY
    rows = [_chunk_row(c, i) for i, c in enumerate(chunks, start=1) if isinstance(c, dict)]
    headers = ["rank", "gold", "rel_path", "heading_path", "score_final", "text"]
    return Html("<h4>{} ({})</h4>").format(label, len(rows)) + _table(headers, rows, "chunks")


def _chunk_row(chunk: dict, position: int) -> Html:
    gold = chunk.get("gold") is True
    rank = chunk.get("rank") if chunk.get("rank") is not None else position
    gold_cell = _badge("gold", "gold") if gold else _EMPTY
    cls = Html(' class="gold"') if gold else _EMPTY
    return Html(
        '<tr{}><td class="num">{}</td><td>{}</td><td class="mono">{}</td><td>{}</td>{}'
        '<td><div class="text">{}</div></td></tr>'
    ).format(
        cls, rank, gold_cell, escape(chunk.get("rel_path") or chunk.get("doc_id")),
        _heading(chunk.get("heading_path")), _num_td(chunk.get("score_final")), escape(chunk.get("text")),
    )


def _render_judge(judge: Any) -> Html:
    if not isinstance(judge, dict) or not judge:
        return _EMPTY
    parts = [Html("<h4>Judge verdicts</h4>")]
    for metric, verdict in judge.items():
        parts.append(_render_verdict(str(metric), verdict))
    return _join(parts)


def _render_verdict(metric: str, verdict: Any) -> Html:
    if not isinstance(verdict, dict):
        return Html("<h4><code>{}</code>: {}</h4>").format(metric, _fmt(verdict))
    parts = [Html("<h4><code>{}</code>: score {}</h4>").format(metric, _fmt(verdict.get("score")))]
    if verdict.get("reasoning"):
        parts.append(Html('<div class="text">{}</div>').format(verdict["reasoning"]))
    for key in ("unsupported_claims", "supported_claims"):
        claims = verdict.get(key)
        if isinstance(claims, list) and claims:
            items = _join(Html("<li>{}</li>").format(escape(c)) for c in claims)
            parts.append(Html("<div>{}:</div><ul>{}</ul>").format(key.replace("_", " "), items))
    skip = {"score", "reasoning", "unsupported_claims", "supported_claims"}
    extras = [(k, v) for k, v in verdict.items() if k not in skip and v not in (None, "", [], {})]
    if extras:
        parts.append(_kv_list(extras))
    return _join(parts)


def _kv_list(pairs: Iterable[tuple[Any, Any]]) -> Html:
    items = _join(Html("<dt>{}</dt><dd>{}</dd>").format(escape(k), _kv_value(v)) for k, v in pairs)
    return Html('<dl class="kv">{}</dl>').format(items)


def _kv_value(value: Any) -> Html:
    if isinstance(value, str):
        return Html('<span class="mono">{}</span>' if len(value) < 200 else '<div class="text">{}</div>').format(value)
    return _fmt(value)


def _render_case_extras(record: dict) -> Html:
    pairs: list[tuple[str, Any]] = []
    for key in ("params", "difficulty", "runs", "latency", "cost", "judge_cache"):
        value = record.get(key)
        if value not in (None, "", {}, []):
            pairs.append((key, _compact(value)))
    if not pairs:
        return _EMPTY
    return Html("<h4>Details</h4>") + _kv_list(pairs)


def _compact(value: Any) -> Any:
    """A dict as ``k=v`` text (numbers rounded); anything else unchanged."""
    if not isinstance(value, dict):
        return value
    return ", ".join(f"{k}={_plain(v)}" for k, v in value.items())


def _plain(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.3f}".rstrip("0").rstrip(".") if not value.is_integer() else str(int(value))
    return str(value)


# --------------------------------------------------------------------------- breakdowns


def _group_count(stats: dict, aliases: tuple[str, ...]) -> Any:
    for alias in aliases:
        if alias in stats:
            return stats[alias]
    return None


def _is_rate_column(key: str) -> bool:
    return "_avg" in key or "_rate" in key or "accuracy" in key


def _rate_columns(groups: dict) -> list[str]:
    """The *_avg/*_rate/accuracy columns that are non-null in any group, first-seen order."""
    columns: dict[str, None] = {}
    for stats in groups.values():
        if not isinstance(stats, dict):
            continue
        for key, value in stats.items():
            if _is_rate_column(str(key)) and _is_number(value):
                columns.setdefault(str(key), None)
    return list(columns)


def _render_breakdown(label: str, anchor: str, groups: Any) -> Html:
    head = Html('<h3 id="{}">By {}</h3>').format(anchor, label)
    if not isinstance(groups, dict) or not groups:
        return head + Html('<p class="muted">No groups.</p>')
    columns = _rate_columns(groups)
    headers = [label] + [name for name, _ in _COUNT_COLUMNS] + columns
    rows = []
    for name, stats in groups.items():
        stats = stats if isinstance(stats, dict) else {}
        cells = _join(_num_td(_group_count(stats, aliases), _fmt_count) for _, aliases in _COUNT_COLUMNS)
        cells += _join(_num_td(stats.get(c)) for c in columns)
        rows.append(Html("<tr><td>{}</td>{}</tr>").format(escape(name), cells))
    return head + _table(headers, rows, "breakdown")


def _render_breakdowns(metrics: dict) -> Html:
    return (
        Html('<h2 id="breakdown">Breakdown</h2>')
        + _render_breakdown("category", "by-category", metrics.get("by_category"))
        + _render_breakdown("tag", "by-tag", metrics.get("by_tag"))
    )


# --------------------------------------------------------------------------- trends


def _trend_runs(metrics: dict, history: Optional[list[dict]]) -> tuple[list[dict], list[str]]:
    """Whole earlier runs of this run's eval set, then this run if whole; and what was left out, said in words.

    A run of another eval set (``eval_set_hash``), a partial, all-error or
    incomplete run is not charted beside whole runs: it is counted in the note.
    """
    from ..selection import not_whole

    current, eval_set = metrics.get("run_id"), metrics.get("eval_set_hash")
    runs: list[dict] = []
    left_out: dict[str, int] = {}
    for run in [h for h in history or [] if isinstance(h, dict) and (current is None or h.get("run_id") != current)]:
        reason = "of other eval sets" if eval_set and run.get("eval_set_hash") not in (None, eval_set) else not_whole(run)
        if reason:
            left_out[reason] = left_out.get(reason, 0) + 1
        else:
            runs.append(run)
    notes = [f"{n} {reason} run{'s' if n != 1 else ''}" if not reason.startswith("of ") else f"{n} run{'s' if n != 1 else ''} {reason}"
             for reason, n in sorted(left_out.items())]
    standing = not_whole(metrics)
    if standing:
        notes.append(f"this run ({standing})")
    else:
        runs.append(metrics)
    return runs, notes


def _series(runs: list[dict], metric: str) -> list[tuple[int, str, float]]:
    """``(run position, run id, value)`` for each run with a numeric value."""
    points = []
    for i, run in enumerate(runs):
        aggregates = run.get("aggregate_metrics")
        value = aggregates.get(metric) if isinstance(aggregates, dict) else None
        if isinstance(value, (int, float)) and _is_number(value) and math.isfinite(value):
            points.append((i, str(run.get("run_id") or f"run {i + 1}"), float(value)))
    return points


def _render_trends(metrics: dict, history: Optional[list[dict]]) -> Html:
    runs, left_out = _trend_runs(metrics, history)
    charts = []
    for metric in trend_metrics():
        points = _series(runs, metric)
        if len(points) >= 2:
            charts.append(_svg_chart(metric, points, len(runs)))
    head = Html('<h2 id="trends">Trends</h2>')
    skipped = Html(" Not charted: {}.").format(", ".join(left_out)) if left_out else _EMPTY
    if not charts:
        return head + Html('<p class="muted">Not enough earlier runs of this eval set in the output folder for a trend '
                           "(need 2 points).{}</p>").format(skipped)
    note = Html('<p class="muted">{} runs of this eval set, oldest left; hover a point for its run id.{}</p>').format(
        len(runs), skipped)
    return head + note + _join(charts)


def _svg_chart(metric: str, points: list[tuple[int, str, float]], n_runs: int) -> Html:
    """An inline SVG line chart of one metric over runs (no script)."""
    width, height, left, right, top, bottom = 420, 170, 56, 14, 22, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for _, _, v in points]
    lo, hi = min(values), max(values)

    def x(pos: int) -> float:
        return left + (plot_w * pos / (n_runs - 1) if n_runs > 1 else plot_w / 2)

    def y(value: float) -> float:
        return top + (plot_h / 2 if hi == lo else plot_h * (hi - value) / (hi - lo))

    coords = " ".join(f"{x(p):.1f},{y(v):.1f}" for p, _, v in points)
    dots = _join(
        Html('<circle cx="{:.1f}" cy="{:.1f}" r="{}" fill="#0969da"><title>{}: {}</title></circle>').format(
            x(p), y(v), 4 if p == n_runs - 1 else 3, run_id, _fmt(v))
        for p, run_id, v in points
    )
    label = Html('<text x="{}" y="{:.1f}" text-anchor="end">{}</text>')
    axes = (
        Html('<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#8c959f"/>'
             '<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#8c959f"/>').format(
            left=left, top=top, bottom=top + plot_h, right=left + plot_w)
        + label.format(left - 6, y(hi) + 4, _fmt(hi))
        + (label.format(left - 6, y(lo) + 4, _fmt(lo)) if hi != lo else _EMPTY)
        + Html('<text x="{left}" y="{base}" text-anchor="start">run 1</text>'
               '<text x="{right}" y="{base}" text-anchor="end">run {n}</text>'
               '<text x="{left}" y="14" text-anchor="start" style="font-weight:600;fill:#1f2328">{metric}</text>').format(
            left=left, right=left + plot_w, base=height - 10, n=n_runs, metric=metric)
    )
    return Html(
        '<div class="chart"><svg width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'role="img" aria-label="{metric} over runs"><title>{metric}</title>{axes}'
        '<polyline points="{coords}" fill="none" stroke="#0969da" stroke-width="2"/>{dots}</svg></div>'
    ).format(w=width, h=height, metric=metric, axes=axes, coords=coords, dots=dots)


# --------------------------------------------------------------------------- page


def _render_nav() -> Html:
    links = (
        ("aggregate", "aggregate"),
        ("failing", "failed & errored"),
        ("breakdown", "breakdown"),
        ("trends", "trends"),
        ("others", "other cases"),
    )
    return Html('<p class="muted">{}</p>').format(Html(" · ").join(Html('<a href="#{}">{}</a>').format(a, t) for a, t in links))


def render_report(
    metrics: dict,
    records: Iterable[dict],
    *,
    deltas: Optional[list[dict]] = None,
    history: Optional[list[dict]] = None,
    title: str = "pytest-rageval report",
) -> str:
    """The whole standalone HTML page of one run."""
    metrics = metrics if isinstance(metrics, dict) else {}
    head = Html(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>{title} {run_id}</title>"
        "<style>{css}</style></head><body><main>"
    ).format(csp=Html(CSP), title=title, run_id=metrics.get("run_id") or "", css=Html(CSS))  # CSP, CSS: our own text
    parts = [
        head,
        _render_header(metrics, title),
        _render_nav(),
        render_aggregates(metrics, deltas),
        render_configs(metrics),
        _render_trends(metrics, history),
        _render_breakdowns(metrics),
        _render_cases(records),
        Html('<p class="muted">Generated by pytest-rageval. Standalone page: no scripts, no network.</p>'),
        Html("</main></body></html>\n"),
    ]
    return str(_join(parts))


def write_report(
    path: Path,
    metrics: dict,
    records: Iterable[dict],
    *,
    deltas: Optional[list[dict]] = None,
    history: Optional[list[dict]] = None,
    title: str = "pytest-rageval report",
) -> None:
    """Render and write the page atomically (temp file in the same folder, then ``os.replace``)."""
    write_text_atomic(Path(path), render_report(metrics, records, deltas=deltas, history=history, title=title))


def _read_metrics(path: Path) -> Optional[dict]:
    try:
        data = safejson.read_file(path)
    except safejson.JsonFileError:
        return None
    if not isinstance(data, dict):
        return None
    data.setdefault("run_id", path.parent.name)
    return data


def load_history(output_dir: Path, *, limit: Optional[int] = 30) -> list[dict]:
    """metrics.json of the runs in ``output_dir`` (``*/metrics.json``), oldest first.

    Sorted by timestamp then run id; unreadable or non-object files are skipped;
    only the newest ``limit`` runs are kept (all when ``limit`` is None).
    """
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    runs = [m for m in (_read_metrics(p) for p in output_dir.glob("*/metrics.json")) if m is not None]
    runs.sort(key=lambda m: (str(m.get("timestamp") or ""), str(m.get("run_id") or "")))
    if limit is None:
        return runs
    return runs[-limit:] if limit > 0 else []
