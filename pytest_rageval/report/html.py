"""The standalone ``<run_id>/report.html`` page: its parts in order, its CSS, writing it.

No network references: the page renders offline, and its Content-Security-Policy forbids remote loads and
every script but browse.py's own (the filter bar; by its hash). The parts, regression first: the header with
the gate's verdict (verdict.py), the filter bar (browse.py), the flipped cases, the other failed and errored
ones (cards.py), the aggregates and breakdowns (tables.py), the trends (trends.py), then the other cases; all
built of markup.Html fragments. Only :func:`write_report` touches files; :func:`render_report` is pure.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

from pytest_rageval.atomic import open_atomic
from pytest_rageval.runs import readback
from pytest_rageval.runs.folder import RunFolder, read_checked

from . import browse
from .baseline import BaselineCases, GateOutcome
from .cards import CardStore, CaseAnchors, Piece, case_anchors, joined, render_case_body, render_cases
from .configs import failed_configs, render_configs
from .markup import Html, escape
from .repeats import render_section as render_repeat_section
from .tables import render_aggregates, render_breakdowns, render_header
from .trends import render_trends, trend_metrics
from .verdict import render_verdict

__all__ = [
    "CSS",
    "BaselineCases",
    "CaseAnchors",
    "GateOutcome",
    "Html",
    "case_anchors",
    "escape",
    "render_aggregates",
    "render_case_body",
    "render_report",
    "trend_metrics",
    "write_report",
]

CSP = browse.CSP

CSS = (
    """
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
details.turn{border:1px solid #d0d7de;border-left:5px solid #6e7781;margin:6px 0 6px 12px;border-radius:4px}
details.turn>summary{cursor:pointer;padding:4px 8px}details.turn>div{padding:2px 12px 8px}
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
.verdict-block{background:#fff;border:1px solid #d0d7de;border-left:6px solid #6e7781;padding:4px 14px 8px;margin:6px 0 10px;border-radius:4px}
.verdict-block h2{margin:6px 0;border:0;padding:0}.v-failed{border-left-color:#cf222e}.v-failed h2{color:#cf222e}
.v-passed{border-left-color:#1a7f37}.v-passed h2{color:#1a7f37}.v-allowed{border-left-color:#9a6700}
.verdict-block .reason{font-weight:600;margin:4px 0}
section.since{border-top:1px dashed #d0d7de;margin-top:8px}h5{font-size:13px;margin:8px 0 4px}
.sbs{display:grid;grid-template-columns:1fr 1fr;gap:8px}.sbs>div{min-width:0}
.diff del{background:#ffebe9;color:#82071e}.diff ins{background:#dafbe1;color:#116329;text-decoration:none}
tr.changed td{background:#fff8c5}.mv-up{color:#1a7f37}.mv-down,.mv-dropped{color:#cf222e}.mv-new{color:#0969da}
.verdict{margin:4px 0 8px}
@media (max-width:700px){main{padding:8px 10px 32px}ul.index{columns:1}.sbs{grid-template-columns:1fr}}
"""
    + browse.CSS
)


def _render_nav(flipped: bool, metrics: dict[str, Any]) -> Html:
    """Links to the page's parts, in page order (repeated cases and configs when the run has them)."""
    repeats = metrics.get("repeats")
    links = (
        ("verdict", "verdict"),
        *((("flipped", "flipped"),) if flipped else ()),
        ("failing", "failed & errored"),
        ("aggregate", "aggregate"),
        *((("repeats", "repeated cases"),) if isinstance(repeats, dict) and repeats.get("repeated_cases") else ()),
        *((("configs", "configs"),) if (metrics.get("config_ranking") or {}).get("ranked") else ()),
        ("breakdown", "breakdown"),
        ("trends", "trends"),
        ("others", "other cases"),
    )
    return Html('<p class="muted nav">{}</p>').format(
        Html(" · ").join(Html('<a href="#{}">{}</a>').format(a, t) for a, t in links)
    )


def render_report(
    metrics: dict[str, Any],
    records: Iterable[dict[str, Any]],
    *,
    deltas: list[dict[str, Any]] | None = None,
    history: list[dict[str, Any]] | None = None,
    title: str = "pytest-rageval report",
    outcome: GateOutcome | None = None,
    baseline_cases: BaselineCases | None = None,
    baseline: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
) -> str:
    """The whole standalone HTML page of one run, regression first.

    ``outcome``: the gate's (None: not gated); ``baseline_cases``: the baseline's cases, for each card's "Since
    baseline" section (None: no such section); ``baseline``: its metrics.json, a line on the trend charts;
    ``config``: config.json's ``config``, for the thresholds.
    """
    pieces = _page(
        metrics,
        records,
        deltas=deltas,
        history=history,
        title=title,
        outcome=outcome,
        baseline_cases=baseline_cases,
        baseline=baseline,
        config=config,
        store=list,
    )
    return str(joined(pieces))


def _page(
    metrics: dict[str, Any],
    records: Iterable[dict[str, Any]],
    *,
    deltas: list[dict[str, Any]] | None,
    history: list[dict[str, Any]] | None,
    title: str,
    outcome: GateOutcome | None,
    baseline_cases: BaselineCases | None,
    baseline: dict[str, Any] | None,
    config: dict[str, Any] | None,
    store: Callable[[], CardStore],
) -> list[Piece]:
    """The page's pieces in order: fragments, and the stores (``store``) its case cards were put in."""
    metrics = metrics if isinstance(metrics, dict) else {}
    head = Html(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>{title} {run_id}</title>"
        "<style>{css}</style></head><body><main>"
    ).format(csp=Html(CSP), title=title, run_id=metrics.get("run_id") or "", css=Html(CSS))  # CSP, CSS: our own text
    to_fail = outcome.flipped_to_fail if outcome is not None else []
    to_pass = outcome.flipped_to_pass if outcome is not None else []
    cases = render_cases(records, to_fail=to_fail, to_pass=to_pass, baseline=baseline_cases, store=store)
    return [
        head,
        render_header(metrics, title, render_verdict(outcome, failed_configs(metrics))),
        _render_nav(bool(to_fail or to_pass), metrics),
        browse.render_filter_bar(),
        *cases.flipped,
        *cases.failing,
        render_aggregates(metrics, deltas, config),
        render_repeat_section(metrics),
        render_configs(metrics),
        render_breakdowns(metrics),
        render_trends(metrics, history, baseline),
        *cases.others,
        Html('<p class="muted">Generated by pytest-rageval. Standalone page: no network.</p>'),
        Html("</main>"),
        browse.render_script(),
        Html("</body></html>\n"),
    ]


class SpooledCards:
    """A section's cards as UTF-8 in a temporary file (in memory while small), for :func:`write_report`."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self._file = stack.enter_context(tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY, mode="w+b"))
        self._count = 0

    def append(self, card: Html, /) -> None:
        self._file.write(card.encode("utf-8"))
        self._count += 1

    def __len__(self) -> int:
        return self._count

    def copy_to(self, fh: BinaryIO) -> None:
        self._file.seek(0)
        shutil.copyfileobj(self._file, fh)


#: Bytes of one section's cards kept in memory before they go to a temporary file.
_SPOOL_IN_MEMORY = 1 << 22


def write_report(
    path: Path,
    metrics: dict[str, Any],
    records: Iterable[dict[str, Any]],
    *,
    deltas: list[dict[str, Any]] | None = None,
    history: list[dict[str, Any]] | None = None,
    title: str = "pytest-rageval report",
    outcome: GateOutcome | None = None,
    baseline_cases: BaselineCases | None = None,
    baseline: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
) -> None:
    """Render and write the page atomically (temp file in the same folder, then ``os.replace``): the bytes of
    :func:`render_report`, written as they are made, so the page of a long run is never whole in memory (the
    case cards wait in temporary files until their place on the page).

    ``config`` defaults to the ``config`` of the run folder's config.json beside ``path`` (when there is one)."""
    if config is None:
        recorded = read_checked(RunFolder(Path(path).parent).config_path, readback.CONFIG).get("config")
        config = recorded if isinstance(recorded, dict) else None
    with contextlib.ExitStack() as stack:
        pieces = _page(
            metrics,
            records,
            deltas=deltas,
            history=history,
            title=title,
            outcome=outcome,
            baseline_cases=baseline_cases,
            baseline=baseline,
            config=config,
            store=lambda: SpooledCards(stack),
        )
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open_atomic(Path(path)) as fh:
            for piece in pieces:
                if isinstance(piece, SpooledCards):
                    piece.copy_to(fh)
                else:
                    fh.write(str(piece).encode("utf-8"))
