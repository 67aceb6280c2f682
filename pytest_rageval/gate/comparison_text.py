"""A comparison as terminal lines: each metric's delta, its largest drops, the flipped cases."""

from __future__ import annotations

from .compare import Comparison, MetricDelta, number_text, plural


def format_delta(d: MetricDelta) -> str:
    """``mrr_avg: 1.000 → 0.500 (-0.500; 95% CI -0.750..-0.250; tolerance 0.050) REGRESSED``.

    When the paired values differ from the whole-run aggregates (the runs do
    not share every case, or a case was scored in one run only), both are shown.
    """
    parts: list[str] = []
    if d.delta is None:
        parts.append("not comparable")
    else:
        parts.append(f"{d.delta:+.3f}")
    if d.ci_low is not None and d.ci_high is not None:
        parts.append(f"95% CI {d.ci_low:.3f}..{d.ci_high:.3f}")
    if d.tolerance is not None:
        parts.append(f"tolerance {d.tolerance:.3f}")
    if d.delta is not None and (number_text(d.whole_old), number_text(d.whole_new)) != (
        number_text(d.old),
        number_text(d.new),
    ):
        parts.append(
            f"on {d.n_shared} paired case{plural(d.n_shared)}; whole runs {number_text(d.whole_old)} → {number_text(d.whole_new)}"
        )
    line = f"{d.name}: {number_text(d.old)} → {number_text(d.new)} ({'; '.join(parts)})"
    return line + " REGRESSED" if d.regressed else line


def drop_lines(d: MetricDelta) -> list[str]:
    """A regressed metric's cases that moved it most, indented under its line (flipped or not)."""
    if not d.largest_drops:
        return []
    lines = [f"  cases that moved {d.name} most ({len(d.largest_drops)}, largest drop first):"]
    lines += [
        f"    {drop['case']}: {number_text(drop.get('old'))} → {number_text(drop.get('new'))}"
        for drop in d.largest_drops
    ]
    return lines


def _case_list(title: str, keys: list[str], max_cases: int) -> list[str]:
    if not keys:
        return []
    lines = [title]
    shown = keys[: max(0, max_cases)]
    lines += [f"  {key}" for key in shown]
    if len(keys) > len(shown):
        lines.append(f"  (+{len(keys) - len(shown)} more)")
    return lines


def case_moves(comparison: Comparison, max_cases: int = 20) -> list[str]:
    """The cases not compared, by id: added to the eval set, changed (another definition), not in this run."""
    lines = _case_list("cases added since the baseline (not compared):", comparison.added_cases, max_cases)
    lines += _case_list(
        "cases changed since the baseline (question, gold, reference, thresholds, marks or params; not compared):",
        comparison.changed_cases,
        max_cases,
    )
    lines += _case_list("cases removed since the baseline:", comparison.removed_cases, max_cases)
    return lines


def format_comparison(comparison: Comparison, *, max_cases: int = 20) -> list[str]:
    """Terminal lines: the cases compared, one per metric delta, flipped cases, invariant and coverage messages."""
    if comparison.refused:
        return list(comparison.invariant_differences)
    lines = [comparison.scope()]
    if comparison.not_compared:
        return [*lines, f"not compared: {comparison.not_compared}"]
    for d in comparison.deltas:
        lines.append(format_delta(d))
        lines += drop_lines(d)
    lines += comparison.one_sided
    lines += _case_list("cases that flipped from pass to fail:", comparison.flipped_to_fail, max_cases)
    lines += _case_list("cases that flipped from fail to pass:", comparison.flipped_to_pass, max_cases)
    lines += case_moves(comparison, max_cases)
    lines += list(comparison.invariant_differences)
    lines += list(comparison.coverage_failures)
    return lines
