"""report.html's tables: the header with the run's counts, the aggregate metrics with baseline deltas, the breakdowns.
"""

from __future__ import annotations

from typing import Any, Optional

from .markup import (
    badge,
    DASH,
    EMPTY,
    escape,
    fmt_count,
    fmt_delta,
    Html,
    is_number,
    join,
    num_td,
    table,
)

__all__ = ["render_aggregates", "render_breakdowns", "render_header"]

_COUNT_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("n", ("n", "total", "total_tests", "count", "cases")),
    ("passed", ("passed",)),
    ("failed", ("failed",)),
    ("errors", ("errors", "error")),
)



def _judge_info(metrics: dict) -> tuple[Optional[str], bool]:
    """The judge's name and whether it is heuristic."""
    judge = metrics.get("judge")
    if isinstance(judge, dict):
        return judge.get("name"), bool(judge.get("heuristic"))
    if isinstance(judge, str):
        return judge, judge == "lexical"
    return None, False


def render_header(metrics: dict, title: str, verdict: Html = EMPTY) -> Html:
    """The title, ``verdict`` right under it (html.py: the gate's verdict block), the run's facts and counts."""
    parts = [Html("<h1>{}</h1>").format(title), verdict, Html('<div class="meta">')]
    parts.append(Html("<span>run <code>{}</code></span>").format(metrics.get("run_id") or DASH))
    parts.append(Html("<span>timestamp {}</span>").format(metrics.get("timestamp") or DASH))
    for key in ("config_hash", "eval_set_hash"):
        if metrics.get(key):
            full = str(metrics[key])
            parts.append(Html('<span>{} <code title="{}">{}</code></span>').format(key, full, full[:12]))
    name, heuristic = _judge_info(metrics)
    model = (metrics.get("judge") or {}).get("model") if isinstance(metrics.get("judge"), dict) else None
    judge = Html("<code>{}</code>").format(name) + (Html(" ({})").format(model) if model else EMPTY) if name else Html(DASH)
    if heuristic:
        judge += Html(" ") + badge("heuristic", "heuristic")
    parts.append(Html("<span>judge {}</span>").format(judge))
    if metrics.get("complete") is not False:
        parts.append(Html("<span>{}</span>").format(badge("complete", "passed")))
    parts.append(Html("</div>"))
    if metrics.get("complete") is False:
        parts.append(Html(
            '<div class="warn">incomplete run: the session was interrupted; '
            "these numbers cover only the cases that finished.</div>"
        ))
    parts.append(_render_counts(metrics))
    return join(parts)


def _render_counts(metrics: dict) -> Html:
    keys = ("total_tests", "passed", "failed", "errors", "skipped", "invalid_lines")
    labels = ("total", "passed", "failed", "errors", "skipped", "invalid lines")
    cells = join(num_td(metrics.get(k), fmt_count) for k in keys)
    return table(labels, [Html("<tr>{}</tr>").format(cells)], "counts")




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
    return Html('<h2 id="aggregate">Aggregate metrics</h2>') + table(headers, rows, "aggregate")


def _aggregate_row(name: str, value: Any, delta: Optional[dict], with_deltas: bool) -> Html:
    cells = Html("<td><code>{}</code></td>{}").format(name, num_td(value))
    if not with_deltas:
        return Html("<tr>{}</tr>").format(cells)
    if delta is None:
        return Html("<tr>{}<td></td><td></td><td></td><td></td><td></td></tr>").format(cells)
    regressed = bool(delta.get("regressed"))
    status = badge("REGRESSED", "regressed") if regressed else Html('<span class="muted">ok</span>')
    cells += (
        num_td(delta.get("old"))
        + num_td(delta.get("delta"), fmt_delta)
        + num_td(delta.get("tolerance"))
        + num_td(_ci_text(delta), lambda v: v)
        + Html("<td>{}</td>").format(status)
    )
    cls = Html(' class="regressed"') if regressed else EMPTY
    return Html("<tr{}>{}</tr>").format(cls, cells)


def _ci_text(delta: dict) -> Html:
    low, high = delta.get("ci_low"), delta.get("ci_high")
    if low is None and high is None:
        return Html(DASH)
    return Html("[{}, {}]").format(fmt_delta(low), fmt_delta(high))




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
            if _is_rate_column(str(key)) and is_number(value):
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
        cells = join(num_td(_group_count(stats, aliases), fmt_count) for _, aliases in _COUNT_COLUMNS)
        cells += join(num_td(stats.get(c)) for c in columns)
        rows.append(Html("<tr><td>{}</td>{}</tr>").format(escape(name), cells))
    return head + table(headers, rows, "breakdown")


def render_breakdowns(metrics: dict) -> Html:
    return (
        Html('<h2 id="breakdown">Breakdown</h2>')
        + _render_breakdown("category", "by-category", metrics.get("by_category"))
        + _render_breakdown("tag", "by-tag", metrics.get("by_tag"))
    )
