"""report.html's trend charts: aggregate metrics over earlier whole runs of the same eval set, as inline SVG.

Pure: the history comes from runs.store.RunStore.history.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, NamedTuple

from pytest_rageval.evaluation import registry
from pytest_rageval.runs.commit import short_commit

from .markup import EMPTY, Html, fmt, is_number, join
from .sparkline import scale_of

__all__ = ["chart_eval_set", "render_trends", "run_label", "run_moment", "trend_metrics"]


def trend_metrics() -> tuple[str, ...]:
    """The aggregates charted over earlier runs: the metric registry's headline ones."""
    return registry.headline_aggregates()


def _trend_runs(
    metrics: dict[str, Any], history: list[dict[str, Any]] | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Whole earlier runs of this run's eval set, then this run if whole; and what was left out, said in words.

    A run of another eval set (``eval_set_hash``), a partial, all-error or
    incomplete run is not charted beside whole runs: it is counted in the note.
    """
    from pytest_rageval.evaluation.selection import not_whole
    from pytest_rageval.gate.lineage import lineages

    current = metrics.get("run_id")
    runs: list[dict[str, Any]] = []
    left_out: dict[str, int] = {}
    for run in [h for h in history or [] if isinstance(h, dict) and (current is None or h.get("run_id") != current)]:
        reason = not_whole(run)
        if reason:
            left_out[reason] = left_out.get(reason, 0) + 1
        else:
            runs.append(run)
    # one series across eval-set edits: the earlier runs this run's eval set continues (gate/lineage.py)
    series = next(s for s in lineages([*runs, metrics]) if s[-1] is metrics)
    other = len(runs) - (len(series) - 1)
    runs = series[:-1]
    if other:
        left_out["of other eval sets"] = other
    notes = [
        f"{n} {reason} run{'s' if n != 1 else ''}"
        if not reason.startswith("of ")
        else f"{n} run{'s' if n != 1 else ''} {reason}"
        for reason, n in sorted(left_out.items())
    ]
    standing = not_whole(metrics)
    if standing:
        notes.append(f"this run ({standing})")
    else:
        runs.append(metrics)
    return runs, notes


def chart_eval_set(metrics: dict[str, Any], history: list[dict[str, Any]] | None) -> str | None:
    """The eval set charted: this run's, else (no hash recorded) the newest earlier run's."""
    if metrics.get("eval_set_hash"):
        return str(metrics["eval_set_hash"])
    hashes = [h.get("eval_set_hash") for h in history or [] if isinstance(h, dict) and h.get("eval_set_hash")]
    return str(hashes[-1]) if hashes else None


def run_moment(run: dict[str, Any]) -> datetime | None:
    """When a run was made (its ``timestamp``, in UTC), or None when that is missing or no ISO date-time."""
    stamp = run.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def run_label(run: dict[str, Any]) -> str:
    """``2024-01-02 14:05 abc1234``: a run's UTC date and time and short commit, as far as recorded."""
    moment = run_moment(run)
    parts = [f"{moment:%Y-%m-%d %H:%M}"] if moment else []
    commit = short_commit(run.get("git_commit"))
    return " ".join([*parts, commit] if commit else parts)


class _Point(NamedTuple):
    position: int  # the run's place among the charted runs
    run: dict[str, Any]
    value: float


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and is_number(value) and math.isfinite(value) else None


def _series(runs: list[dict[str, Any]], metric: str) -> list[_Point]:
    """The runs with a number for ``metric``, each with its place among the charted runs."""
    points = []
    for i, run in enumerate(runs):
        aggregates = run.get("aggregate_metrics")
        value = _number(aggregates.get(metric)) if isinstance(aggregates, dict) else None
        if value is not None:
            points.append(_Point(i, run, value))
    return points


def _baseline_value(baseline: dict[str, Any] | None, metric: str) -> float | None:
    aggregates = baseline.get("aggregate_metrics") if isinstance(baseline, dict) else None
    return _number(aggregates.get(metric)) if isinstance(aggregates, dict) else None


def render_trends(
    metrics: dict[str, Any], history: list[dict[str, Any]] | None, baseline: dict[str, Any] | None = None
) -> Html:
    """The Trends section: a chart per headline aggregate with 2 or more points, and what was left out."""
    runs, left_out = _trend_runs(metrics, history)
    eval_set = chart_eval_set(metrics, history)
    if isinstance(baseline, dict) and eval_set and baseline.get("eval_set_hash") not in (None, eval_set):
        left_out.append("the baseline (another eval set)")
        baseline = None
    charts = []
    edits = _edits(runs)
    for metric in trend_metrics():
        points = _series(runs, metric)
        if len(points) >= 2:
            charts.append(_svg_chart(metric, points, runs, _baseline_value(baseline, metric), baseline, edits))
    head = Html('<h2 id="trends">Trends</h2>')
    skipped = Html(" Not charted: {}.").format(", ".join(left_out)) if left_out else EMPTY
    if not charts:
        return head + Html(
            '<p class="muted">Not enough earlier runs of this eval set in the output folder for a trend (need 2 points).{}</p>'
        ).format(skipped)
    edited = EMPTY
    if edits:
        edited = Html(
            " {} eval-set edit{} marked (dashed; hover one for what changed); a point's tooltip compares it with the run before"
        ).format(len(edits), "" if len(edits) == 1 else "s") + Html(" on the cases both share unchanged.")
    note = Html(
        '<p class="muted">{} runs of eval set {}, oldest left, each metric on its own scale; dates in UTC; hover a point for its run.{}{}</p>'
    ).format(len(runs), (eval_set or "unknown")[:12], edited, skipped)
    return head + note + join(charts)


#: the chart's size and margins in px: about 10 charts fit a page without crowding it
_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 420, 184, 40, 16, 22, 40


def _axis(metric: str, values: list[float]) -> tuple[float, float, int]:
    """The y-axis: the metric's scale (registry), widened only to show a value outside it; and its tick count."""
    low, high = scale_of(metric)
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        low, high = min(values), max(values)
        if high == low:
            low, high = low - 1, high + 1
    low, high = min(low, *values), max(high, *values)
    return low, high, (5 if (low, high) == (0.0, 5.0) else 4)


def _x_labelled(n_runs: int, room: int) -> list[int]:
    """Evenly spread run positions to label, first and last included, at most ``room`` of them."""
    shown = max(1, min(n_runs, room))
    if shown == 1:
        return [0]
    return sorted({round(i * (n_runs - 1) / (shown - 1)) for i in range(shown)})


def _edits(runs: list[dict[str, Any]]) -> dict[int, str]:
    """Run position -> what was edited in the eval set since the run before it."""
    from pytest_rageval.gate.lineage import edit_between

    out = {}
    for pos in range(1, len(runs)):
        edit = edit_between(runs[pos - 1], runs[pos])
        if edit is not None:
            out[pos] = edit.describe()
    return out


def _versus_previous(runs: list[dict[str, Any]], pos: int, metric: str) -> str:
    """A point's comparison with the run before it, over the cases both share unchanged."""
    from pytest_rageval.gate.lineage import paired_change

    if pos == 0:
        return ""
    delta, n = paired_change(runs[pos - 1], runs[pos], metric)
    return "" if delta is None else f"vs the run before on {n} unchanged cases: {delta:+.3f}"


def _svg_chart(
    metric: str,
    points: list[_Point],
    runs: list[dict[str, Any]],
    base: float | None,
    baseline: dict[str, Any] | None,
    edits: dict[int, str] | None = None,
) -> Html:
    """An inline SVG line chart of one metric over runs (no script): fixed scale, gridlines, dated runs, baseline."""
    plot_w, plot_h, n_runs = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM, len(runs)
    low, high, ticks = _axis(metric, [p.value for p in points] + ([base] if base is not None else []))

    def x(pos: int) -> float:
        return _LEFT + (plot_w * pos / (n_runs - 1) if n_runs > 1 else plot_w / 2)

    def y(value: float) -> float:
        return _TOP + plot_h * (high - value) / (high - low)

    grid = join(
        Html(
            '<line x1="{l}" y1="{y:.1f}" x2="{r}" y2="{y:.1f}" stroke="{c}"/><text class="tick" x="{tx}" y="{ty:.1f}" text-anchor="end">{v}</text>'
        ).format(
            l=_LEFT,
            r=_LEFT + plot_w,
            y=y(v),
            c="#8c959f" if i == 0 else "#eaeef2",
            tx=_LEFT - 5,
            ty=y(v) + 4,
            v=f"{round(v, 4):g}",
        )
        for i, v in ((i, low + (high - low) * i / ticks) for i in range(ticks + 1))
    )
    labels: list[Html] = []
    for pos in _x_labelled(n_runs, plot_w // 110):
        run = runs[pos]
        moment, commit = run_moment(run), short_commit(run.get("git_commit"))
        anchor = "start" if pos == 0 and n_runs > 1 else "end" if pos == n_runs - 1 and n_runs > 1 else "middle"
        lines = [
            f"{moment:%Y-%m-%d}" if moment else f"run {pos + 1}",
            " ".join(filter(None, [f"{moment:%H:%M}" if moment else "", commit or ""])),
        ]
        labels.extend(
            Html('<text class="run" x="{:.1f}" y="{}" text-anchor="{}">{}</text>').format(
                x(pos), _H - _BOTTOM + 15 + 13 * row, anchor, text
            )
            for row, text in enumerate(lines)
            if text
        )
    base_line = EMPTY
    if base is not None:
        base_line = Html(
            '<g class="baseline"><title>baseline {run}: {v}</title>'
            '<line x1="{l}" y1="{y:.1f}" x2="{r}" y2="{y:.1f}" stroke="#9a6700" stroke-width="1.5" '
            'stroke-dasharray="5 4"/><line x1="{kx}" y1="10" x2="{kx2}" y2="10" stroke="#9a6700" '
            'stroke-width="1.5" stroke-dasharray="5 4"/><text x="{r}" y="14" text-anchor="end" '
            'style="fill:#9a6700">baseline {v}</text></g>'
        ).format(
            run=run_label(baseline or {}) or (baseline or {}).get("run_id") or "",
            v=fmt(base),
            l=_LEFT,
            r=_LEFT + plot_w,
            y=y(base),
            kx=_LEFT + plot_w - 110,
            kx2=_LEFT + plot_w - 88,
        )  # the key, top right
    marks = join(
        Html(
            '<g class="edit"><title>{t}</title><line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#8250df" '
            'stroke-width="1.5" stroke-dasharray="3 3"/></g>'
        ).format(t=text, x=(x(pos - 1) + x(pos)) / 2, top=_TOP, bottom=_TOP + plot_h)
        for pos, text in sorted((edits or {}).items())
    )
    coords = " ".join(f"{x(p.position):.1f},{y(p.value):.1f}" for p in points)
    dots = join(
        Html('<circle cx="{:.1f}" cy="{:.1f}" r="{}"><title>{}: {}</title></circle>').format(
            x(p.position),
            y(p.value),
            4 if p.position == n_runs - 1 else 3,
            ", ".join(
                filter(
                    None,
                    [
                        str(p.run.get("run_id") or f"run {p.position + 1}"),
                        _when(p.run),
                        _versus_previous(runs, p.position, metric),
                    ],
                )
            ),
            fmt(p.value),
        )
        for p in points
    )
    return Html(
        '<div class="chart"><svg width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        'aria-label="{metric} over runs, axis {lo} to {hi}"><title>{metric}</title>{grid}{labels}'
        '<text x="{l}" y="14" style="font-weight:600;fill:#1f2328">{metric}</text>{base}{marks}'
        '<polyline points="{coords}" fill="none" stroke="#0969da" stroke-width="2"/>'
        '<g fill="#0969da">{dots}</g></svg></div>'
    ).format(
        w=_W,
        h=_H,
        metric=metric,
        lo=f"{low:g}",
        hi=f"{high:g}",
        grid=grid,
        labels=join(labels),
        l=_LEFT,
        base=base_line,
        marks=marks,
        coords=coords,
        dots=dots,
    )


def _when(run: dict[str, Any]) -> str:
    """A point's date and commit: ``2024-01-02 14:05 UTC, commit abc1234``."""
    moment, commit = run_moment(run), short_commit(run.get("git_commit"))
    return ", ".join(
        filter(None, [f"{moment:%Y-%m-%d %H:%M} UTC" if moment else "", f"commit {commit}" if commit else ""])
    )
