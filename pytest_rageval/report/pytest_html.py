"""pytest-html glue: per-case extras and the summary's aggregate table.

Imported and registered only when pytest-html is loaded
(``config.pluginmanager.hasplugin("html")``), so the plugin works without it.
The HTML comes from :mod:`.html` (the standalone report's ``Html`` fragments,
which escape everything that is not one where it joins them). What goes to
pytest-html is a plain ``str``: ``report.extras`` crosses to the xdist
controller, whose serializer takes no ``str`` subclass.

Hook order (pytest-html 4.2, pluggy 1.x), checked by tests/unit/report/test_pytest_html.py:

- ``pytest_runtest_logreport`` on the process that keeps the results (a serial
  session, or the xdist controller, where every worker's report arrives with its
  ``rageval_case``): :class:`HtmlExtras` is ``tryfirst``, so it sets the case's
  extra (its card, with the "Since baseline" section when the baseline has the
  case) before the run controller's plain hook drops the record from the report
  and before pytest-html's ``trylast`` one reads ``report.extras``. Built there,
  the extra never crosses from a worker, and the baseline is read once.
- ``pytest_html_results_summary`` is called from pytest-html's ``trylast``
  ``pytest_sessionfinish``, after the run controller's ``tryfirst`` one has
  built ``metrics`` and the baseline ``comparison``.
- ``pytest_html_results_table_row`` (:class:`EscapedTestIds`) runs on the
  controller, where pytest-html turns reports into rows.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Protocol

import pytest

from pytest_rageval.gate.compare import Comparison

from .baseline import BaselineCases
from .cards import render_since_for
from .html import CSS, Html, render_aggregates, render_case_body
from .markdown import MAX_CASES
from .terminal import summary_metrics

__all__ = [
    "EscapedTestIds",
    "FinishedRun",
    "HtmlExtras",
    "HtmlSummary",
    "case_html",
    "main_aggregates",
    "main_metrics",
    "register",
    "scoped_css",
    "summary_html",
]

SCOPE = ".rageval"


def main_metrics() -> tuple[str, ...]:
    """The aggregates in the summary table (regressed ones are added when a baseline is compared)."""
    return (*summary_metrics(), "latency_p50_ms", "latency_p95_ms")


class FinishedRun(Protocol):
    """What the summary shows of the run (the run controller has it once the session finished)."""

    metrics: dict[str, Any] | None
    comparison: Comparison | None

    @property
    def report_path(self) -> Path | None: ...

    @property
    def baseline_cases(self) -> BaselineCases | None: ...


class HtmlExtras:
    """Attach each case's detail to its report as one pytest-html ``extras`` entry, where results are kept."""

    def __init__(self, run: FinishedRun) -> None:
        self.run = run

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, "rageval_case", None)
        if not isinstance(record, dict):
            return
        from pytest_html import extras

        html = case_html(record, self.run.baseline_cases)
        report.extras = [*getattr(report, "extras", []), extras.html(html)]  # type: ignore[attr-defined]


class HtmlSummary:
    """Add the aggregate table, baseline deltas and the report.html path to pytest-html's summary (controller only)."""

    def __init__(self, run: FinishedRun) -> None:
        self.run = run

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        summary.append(str(Html("<style>{}</style>").format(Html(scoped_css(CSS)))))  # our own CSS
        if self.run.metrics is not None:
            summary.append(summary_html(self.run))


class EscapedTestIds:
    """Show each test id in pytest-html's results table as text (controller only).

    pytest-html 4.2 builds the row cell as ``<td class="col-testId">{nodeid}</td>``
    without escaping and its app.js sets it as ``innerHTML``: an eval-set id such
    as ``<img src=x onerror=...>`` would run script in the report. ``tryfirst``,
    so a user's own row hook still sees (and may change) the escaped cell; a cell
    that no longer holds the raw id (another plugin, or a pytest-html that
    escapes) is left alone.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_html_results_table_row(self, report: Any, cells: list[Any]) -> None:
        when = getattr(report, "when", "call")
        raw = report.nodeid if when == "call" else f"{report.nodeid}::{when}"
        plain = f'<td class="col-testId">{raw}</td>'
        for index, cell in enumerate(cells):
            if cell == plain:
                cells[index] = str(Html('<td class="col-testId">{}</td>').format(raw))


def register(config: pytest.Config, *, runs_cases: bool, run: FinishedRun | None) -> None:
    """Register the pytest-html hooks when a report is asked for (``--html``): the per-case extras where
    cases run, the summary and escaped test ids where the report is written (``run``, the controller).

    Without ``--html`` nothing is rendered: pytest keeps every report to the end of the session.
    """
    if not config.getoption("htmlpath", None):
        return
    if run is not None:  # ``runs_cases`` no longer matters: extras are made where the reports arrive
        config.pluginmanager.register(HtmlExtras(run), "rageval-html-extras")
        config.pluginmanager.register(HtmlSummary(run), "rageval-html-summary")
        config.pluginmanager.register(EscapedTestIds(), "rageval-html-test-ids")


def case_html(record: dict[str, Any], baseline: BaselineCases | None = None) -> str:
    """One case's extra: question, expectations, answer, chunks, metric table, judge, error, and what changed
    since the baseline when ``baseline`` has the case."""
    body = render_case_body(record, since=render_since_for(record, baseline))
    return str(Html('<div class="rageval">{}</div>').format(body))


def summary_html(finished: FinishedRun) -> str:
    """The rageval section of pytest-html's summary."""
    metrics = finished.metrics or {}
    comparison = finished.comparison
    deltas = None
    if comparison is not None:
        main = main_metrics()
        deltas = [dataclasses.asdict(d) for d in comparison.deltas if d.name in main or d.regressed]
    run = Html(" run <code>{}</code>").format(metrics["run_id"]) if metrics.get("run_id") else Html("")
    parts = [
        Html('<div class="rageval" id="rageval-summary"><p><strong>rageval</strong>{}{}</p>').format(
            run, _judge_text(metrics)
        )
    ]
    if metrics.get("complete") is False:
        parts.append(Html('<div class="warn">incomplete run: these numbers cover only the cases that finished.</div>'))
    parts.append(render_aggregates({"aggregate_metrics": main_aggregates(metrics)}, deltas))
    if comparison is not None:
        verdict = comparison.status if comparison.passed else comparison.status.upper()
        parts.append(
            Html("<p>baseline: <strong>{}</strong> ({})</p>").format(verdict, comparison.reason() or comparison.scope())
        )
        parts.append(_flipped_lists(comparison))
    path = finished.report_path
    if path is not None:
        parts.append(
            Html('<p>rageval report: <a href="{}"><code>{}</code></a></p>').format(path.resolve().as_uri(), path)
        )
    parts.append(Html("</div>"))
    return str(Html("").join(parts))


def _flipped_lists(comparison: Comparison) -> Html:
    """The cases that flipped (pass -> fail first), at most ``MAX_CASES`` of each kind."""
    parts = []
    for title, keys, cls in (
        ("pass \u2192 fail", comparison.flipped_to_fail, "to-fail"),
        ("fail \u2192 pass", comparison.flipped_to_pass, "to-pass"),
    ):
        if not keys:
            continue
        items = Html("").join(Html("<li><code>{}</code></li>").format(k) for k in keys[:MAX_CASES])
        more = Html("<li>and {} more</li>").format(len(keys) - MAX_CASES) if len(keys) > MAX_CASES else Html("")
        parts.append(
            Html('<p>flipped {} ({}):</p><ul class="flipped {}">{}{}</ul>').format(title, len(keys), cls, items, more)
        )
    return Html("").join(parts)


def main_aggregates(metrics: dict[str, Any]) -> dict[str, Any]:
    """The :func:`main_metrics` of a metrics.json that have a value, named as in baseline deltas."""
    agg = dict(metrics.get("aggregate_metrics") or {})
    latency = agg.get("latency")
    if isinstance(latency, dict):
        agg.update({f"latency_{key}": latency.get(key) for key in ("p50_ms", "p95_ms")})
    return {name: agg[name] for name in main_metrics() if agg.get(name) is not None}


def _judge_text(metrics: dict[str, Any]) -> Html:
    judge = metrics.get("judge")
    name = judge.get("name") if isinstance(judge, dict) else judge
    if not name:
        return Html("")
    model = judge.get("model") if isinstance(judge, dict) else None
    return Html(", judge <code>{}</code>").format(name) + (Html(" ({})").format(model) if model else Html(""))


def scoped_css(css: str, scope: str = SCOPE) -> str:
    """The standalone report's CSS limited to ``scope`` (``body`` becomes the scope itself)."""
    rules = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        scoped = []
        for selector in selectors.split(","):
            selector = selector.strip()
            if selector == "main":
                continue
            scoped.append(scope if selector == "body" else f"{scope} {selector}")
        if scoped:
            rules.append(f"{','.join(scoped)}{{{body}}}")
    return "\n".join(rules)
