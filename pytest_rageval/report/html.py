"""The standalone ``<run_id>/report.html`` page (SPEC section 9): its parts in order, its CSS, writing it.

No network references: the page renders offline, and its Content-Security-Policy forbids remote loads and
every script but browse.py's own (the filter bar; by its hash). The parts: browse.py (filters, search, sort), tables.py (header, aggregates, breakdowns), cards.py (cases),
trends.py (charts), all built of markup.Html fragments. Only :func:`write_report` touches files (and
trends.load_history); :func:`render_report` is pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Optional

from ..runfolder import read_json_object, write_text_atomic
from . import browse
from .cards import CaseAnchors, case_anchors, render_case_body, render_cases
from .markup import Html, escape, join
from .tables import render_aggregates, render_breakdowns, render_header
from .trends import load_history, render_trends, trend_metrics

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

CSP = browse.CSP

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:14px 0 6px}h4{font-size:14px;margin:12px 0 4px}
main{overflow-wrap:anywhere}
table{border-collapse:collapse;margin:4px 0 8px;display:block;max-width:100%;overflow-x:auto}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top;background:#fff}
th{overflow-wrap:normal}
th{background:#eef1f4}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.meta{display:flex;flex-wrap:wrap;row-gap:4px}.meta span{margin-right:16px}
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
@media (max-width:700px){main{padding:8px 10px 32px}ul.index{columns:1}}
""" + browse.CSS





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
    config: Optional[dict] = None,
) -> str:
    """The whole standalone HTML page of one run (``config``: config.json's ``config``, for the thresholds)."""
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
        render_header(metrics, title),
        _render_nav(),
        render_aggregates(metrics, deltas, config),
        render_trends(metrics, history),
        render_breakdowns(metrics),
        browse.render_filter_bar(),
        render_cases(records),
        Html('<p class="muted">Generated by pytest-rageval. Standalone page: no network.</p>'),
        Html("</main>"),
        browse.render_script(),
        Html("</body></html>\n"),
    ]
    return str(join(parts))


def write_report(
    path: Path,
    metrics: dict,
    records: Iterable[dict],
    *,
    deltas: Optional[list[dict]] = None,
    history: Optional[list[dict]] = None,
    title: str = "pytest-rageval report",
    config: Optional[dict] = None,
) -> None:
    """Render and write the page atomically (temp file in the same folder, then ``os.replace``).

    ``config`` defaults to the ``config`` of the run folder's config.json beside ``path`` (when there is one)."""
    if config is None:
        recorded = read_json_object(Path(path).parent / "config.json").get("config")
        config = recorded if isinstance(recorded, dict) else None
    page = render_report(metrics, records, deltas=deltas, history=history, title=title, config=config)
    write_text_atomic(Path(path), page)
