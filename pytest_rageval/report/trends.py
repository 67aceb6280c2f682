"""report.html's trend charts: aggregate metrics over earlier whole runs of the same eval set, as inline SVG.

Only :func:`load_history` reads files.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from .. import registry, safejson

from .markup import (
    EMPTY,
    fmt,
    Html,
    is_number,
    join,
)

__all__ = ["load_history", "render_trends", "trend_metrics"]

def trend_metrics() -> tuple[str, ...]:
    """The aggregates charted over earlier runs: the metric registry's headline ones."""
    return registry.headline_aggregates()




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
        if isinstance(value, (int, float)) and is_number(value) and math.isfinite(value):
            points.append((i, str(run.get("run_id") or f"run {i + 1}"), float(value)))
    return points


def render_trends(metrics: dict, history: Optional[list[dict]]) -> Html:
    runs, left_out = _trend_runs(metrics, history)
    charts = []
    for metric in trend_metrics():
        points = _series(runs, metric)
        if len(points) >= 2:
            charts.append(_svg_chart(metric, points, len(runs)))
    head = Html('<h2 id="trends">Trends</h2>')
    skipped = Html(" Not charted: {}.").format(", ".join(left_out)) if left_out else EMPTY
    if not charts:
        return head + Html('<p class="muted">Not enough earlier runs of this eval set in the output folder for a trend '
                           "(need 2 points).{}</p>").format(skipped)
    note = Html('<p class="muted">{} runs of this eval set, oldest left; hover a point for its run id.{}</p>').format(
        len(runs), skipped)
    return head + note + join(charts)


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
    dots = join(
        Html('<circle cx="{:.1f}" cy="{:.1f}" r="{}" fill="#0969da"><title>{}: {}</title></circle>').format(
            x(p), y(v), 4 if p == n_runs - 1 else 3, run_id, fmt(v))
        for p, run_id, v in points
    )
    label = Html('<text x="{}" y="{:.1f}" text-anchor="end">{}</text>')
    axes = (
        Html('<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#8c959f"/>'
             '<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#8c959f"/>').format(
            left=left, top=top, bottom=top + plot_h, right=left + plot_w)
        + label.format(left - 6, y(hi) + 4, fmt(hi))
        + (label.format(left - 6, y(lo) + 4, fmt(lo)) if hi != lo else EMPTY)
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
