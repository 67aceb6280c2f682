"""report.html's tables: the header with the run's counts, the aggregate metrics with baseline deltas, the breakdowns."""

from __future__ import annotations

from typing import Any

from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.thresholds import op_for

from .markup import (
    DASH,
    EMPTY,
    Html,
    badge,
    escape,
    fmt,
    fmt_count,
    fmt_delta,
    fmt_interval,
    is_number,
    join,
    num_td,
    table,
)
from .session_verdict import verdict_from_metrics

__all__ = ["render_aggregates", "render_breakdowns", "render_header"]

_COUNT_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("n", ("n", "total", "total_tests", "count", "cases")),
    ("passed", ("passed",)),
    ("failed", ("failed",)),
    ("errors", ("errors", "error")),
)


def _judge_info(metrics: dict[str, Any]) -> tuple[str | None, bool]:
    """The judge's name and whether it is heuristic."""
    judge = metrics.get("judge")
    if isinstance(judge, dict):
        return judge.get("name"), bool(judge.get("heuristic"))
    if isinstance(judge, str):
        return judge, judge == "lexical"
    return None, False


def _session_line(metrics: dict[str, Any]) -> Html:
    """The session's verdict (its exit status and parts) as the run stored it; nothing for a run made before."""
    session = verdict_from_metrics(metrics)
    if session is None:
        return EMPTY
    cls = "passed" if session.passed else "failed"
    parts = ", ".join(session.parts)
    return Html('<p class="session-verdict" id="session-verdict">{} {}</p>').format(
        badge(f"session {session.word}", cls), parts
    )


def render_header(metrics: dict[str, Any], title: str, verdict: Html = EMPTY) -> Html:
    """The title, ``verdict`` right under it (html.py: the gate's verdict block), the run's facts and counts."""
    parts = [Html("<h1>{}</h1>").format(title), _session_line(metrics), verdict, Html('<div class="meta">')]
    parts.append(Html("<span>run <code>{}</code></span>").format(metrics.get("run_id") or DASH))
    parts.append(Html("<span>timestamp {}</span>").format(metrics.get("timestamp") or DASH))
    for key in ("config_hash", "eval_set_hash"):
        if metrics.get(key):
            full = str(metrics[key])
            parts.append(Html('<span>{} <code title="{}">{}</code></span>').format(key, full, full[:12]))
    name, heuristic = _judge_info(metrics)
    model = (metrics.get("judge") or {}).get("model") if isinstance(metrics.get("judge"), dict) else None
    judge = (
        Html("<code>{}</code>").format(name) + (Html(" ({})").format(model) if model else EMPTY) if name else Html(DASH)
    )
    if heuristic:
        judge += Html(" ") + badge("heuristic", "heuristic")
    parts.append(Html("<span>judge {}</span>").format(judge))
    calibration = metrics.get("judge_calibration")
    if isinstance(calibration, dict):
        scores = calibration.get("balanced_accuracy")
        shown = (
            ", ".join(f"{m} {v:.3f}" for m, v in scores.items() if isinstance(v, (int, float)))
            if isinstance(scores, dict)
            else ""
        )
        parts.append(
            Html("<span>calibrated <code>{}</code> (balanced accuracy {})</span>").format(
                calibration.get("calibration") or DASH, shown or DASH
            )
        )
    if metrics.get("complete") is not False:
        parts.append(Html("<span>{}</span>").format(badge("complete", "passed")))
    parts.append(Html("</div>"))
    if metrics.get("complete") is False:
        parts.append(
            Html(
                '<div class="warn">incomplete run: the session was interrupted; these numbers cover only the cases that finished.</div>'
            )
        )
    parts.append(_render_counts(metrics))
    return join(parts)


def _render_counts(metrics: dict[str, Any]) -> Html:
    keys: tuple[str, ...] = ("total_tests", "passed", "failed", "errors", "skipped")
    keys += (*tuple(name for name in ("xfailed", "xpassed") if metrics.get(name)), "invalid_lines")
    keys += tuple(name for name in ("known_failures", "fixed_since_baseline") if metrics.get(name))  # with a baseline
    labels = tuple("total" if k == "total_tests" else k.replace("_", " ") for k in keys)
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


def _delta_map(deltas: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    return {str(d.get("name")): d for d in deltas or [] if isinstance(d, dict)}


def _is_zero(value: Any) -> bool:
    return value is None or (is_number(value) and value == 0)


def _aggregate_values(metrics: dict[str, Any]) -> list[tuple[str, Any]]:
    """Each aggregate once, under the name the gate's deltas use (``latency_p95_ms``, ``error_rate``); the cost
    and judge-cache rows only when there is something to say (a heuristic judge spends nothing)."""
    agg = metrics.get("aggregate_metrics")
    agg = agg if isinstance(agg, dict) else {}
    name, heuristic = _judge_info(metrics)
    spends = bool(name) and not heuristic
    rows: list[tuple[str, Any]] = []
    for key, value in agg.items():
        if key == "latency" and isinstance(value, dict):
            rows += [(f"latency_{k}", v) for k, v in value.items() if not isinstance(v, dict)]
        elif key == "operational_metrics" and isinstance(value, dict):
            rows += [(str(k), v) for k, v in value.items() if not isinstance(v, dict)]
        elif key in ("cost", "judge_cache") and isinstance(value, dict):
            pairs = _flatten(value, "judge_cache." if key == "judge_cache" else "")
            if spends or not all(_is_zero(v) for _, v in pairs):
                rows += pairs
        elif key == "judge_coverage":
            continue
        elif isinstance(value, dict):
            rows += _flatten(value, f"{key}.")
        else:
            rows.append((str(key), value))
    coverage = agg.get("judge_coverage", metrics.get("judge_coverage"))
    if isinstance(coverage, dict):
        for metric, entry in coverage.items():
            if isinstance(entry, dict):
                rows.append((f"judge_coverage.{metric}", entry.get("coverage")))
    return rows


def _thresholds(config: dict[str, Any] | None) -> dict[str, tuple[str, Any, bool]]:
    """Each aggregate's per-case threshold: (op, value, whether some category sets its own), from the run's
    config (``--rageval-threshold`` over ``[tool.rageval.thresholds]``) or the registry's default."""
    table = (config or {}).get("thresholds")
    table = table if isinstance(table, dict) else {}
    configured: dict[str, Any] = {}
    for part in ("global", "cli"):
        if isinstance(table.get(part), dict):
            configured.update(table[part])
    by_category = table.get("by_category")
    categories = list(by_category.values()) if isinstance(by_category, dict) else []
    out: dict[str, tuple[str, Any, bool]] = {}
    for metric in registry.metrics():
        value = configured.get(metric.name, metric.default_threshold)
        if metric.aggregate is None or value is None:
            continue
        varies = any(isinstance(t, dict) and metric.name in t for t in categories)
        op = "==" if isinstance(value, bool) else op_for(metric.name)
        out[metric.aggregate] = (op, value, varies)
    return out


def _threshold_cell(threshold: tuple[str, Any, bool] | None) -> Html:
    if threshold is None:
        return Html("<td></td>")
    op, value, varies = threshold
    note = Html(' <span class="muted" title="some categories set their own">*</span>') if varies else EMPTY
    shown = format(value, "g") if is_number(value) else fmt(value)
    return Html('<td class="num">{} {}{}</td>').format(op, shown, note)


def render_aggregates(
    metrics: dict[str, Any], deltas: list[dict[str, Any]] | None, config: dict[str, Any] | None = None
) -> Html:
    """Each metric that applies (non-null in this run or the baseline) once: value, per-case threshold, and
    with a baseline its value there, the delta, the 95% interval, the gate's tolerance and status."""
    by_name = _delta_map(deltas)
    rows_data = _aggregate_values(metrics)
    known = {name for name, _ in rows_data}
    rows_data += [(name, d.get("new")) for name, d in by_name.items() if name not in known]
    rows_data = [(n, v) for n, v in rows_data if v is not None or (by_name.get(n) or {}).get("old") is not None]
    thresholds = _thresholds(config)
    with_deltas = deltas is not None
    headers = ["metric", "value", "threshold"]
    if with_deltas:
        headers += ["baseline", "delta", "95% CI", "tolerance", "status"]
    rows = [
        _aggregate_row(name, value, thresholds.get(name), by_name.get(name), with_deltas) for name, value in rows_data
    ]
    if not rows:
        return Html('<h2 id="aggregate">Aggregate metrics</h2><p class="muted">No aggregate metrics.</p>')
    return Html('<h2 id="aggregate">Aggregate metrics</h2>') + table(headers, rows, "aggregate")


def _aggregate_row(
    name: str, value: Any, threshold: tuple[str, Any, bool] | None, delta: dict[str, Any] | None, with_deltas: bool
) -> Html:
    cells = Html("<td><code>{}</code></td>{}{}").format(name, num_td(value), _threshold_cell(threshold))
    if not with_deltas:
        return Html("<tr>{}</tr>").format(cells)
    if delta is None:
        return Html("<tr>{}<td></td><td></td><td></td><td></td><td></td></tr>").format(cells)
    regressed = bool(delta.get("regressed"))
    status = badge("REGRESSED", "regressed") if regressed else Html('<span class="muted">ok</span>')
    cells += (
        num_td(delta.get("old"))
        + num_td(delta.get("delta"), fmt_delta)
        + num_td(fmt_interval(delta.get("ci_low"), delta.get("ci_high")), lambda v: v)
        + num_td(delta.get("tolerance"))
        + Html("<td>{}</td>").format(status)
    )
    cls = Html(' class="regressed"') if regressed else EMPTY
    return Html("<tr{}>{}</tr>").format(cls, cells)


def _group_count(stats: dict[str, Any], aliases: tuple[str, ...]) -> Any:
    for alias in aliases:
        if alias in stats:
            return stats[alias]
    return None


def _is_rate_column(key: str) -> bool:
    return "_avg" in key or "_rate" in key or "accuracy" in key


def _rate_columns(groups: dict[str, Any]) -> list[str]:
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


def render_breakdowns(metrics: dict[str, Any]) -> Html:
    """By category, by tag, and with conversations by turn (the first turns, the second, the later ones)."""
    by_turn = metrics.get("by_turn")
    return (
        Html('<h2 id="breakdown">Breakdown</h2>')
        + _render_breakdown("category", "by-category", metrics.get("by_category"))
        + _render_breakdown("tag", "by-tag", metrics.get("by_tag"))
        + (_render_breakdown("turn", "by-turn", by_turn) if isinstance(by_turn, dict) and by_turn else EMPTY)
    )
