"""report.html's verdict block, right under the title: the gate's verdict, which metrics regressed (old -> new,
delta, 95% interval), and how many cases flipped (linked to the flipped section).

Pure: a :class:`~.baseline.GateOutcome` in (its reason already masked), an Html fragment out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .baseline import GateOutcome
from .markup import EMPTY, Html, fmt, fmt_delta, fmt_interval, join, num_td, table

if TYPE_CHECKING:
    from pytest_rageval.gate.compare import Comparison, MetricDelta

__all__ = ["VERDICT_TITLES", "render_verdict"]

#: The headline of each verdict kind (baseline.verdict_kind).
VERDICT_TITLES = {
    "failed": "gate FAILED",
    "refused": "baseline REFUSED: gate failed",
    "not gated": "not gated (no baseline)",
    "allowed": "regressions allowed (--rageval-allow-regressions)",
    "passed": "gate passed",
}


def _regressed_table(outcome: GateOutcome) -> Html:
    comparison = outcome.comparison
    if comparison is None or comparison.refused or comparison.not_compared:
        return EMPTY
    regressed = [d for d in comparison.deltas if d.regressed]
    scope = Html('<p class="muted">{}.</p>').format(comparison.scope())
    if not regressed:
        return scope + (Html("<p>No metric regressed.</p>") if not comparison.coverage_failures else EMPTY)
    rows = [
        Html('<tr class="regressed"><td><code>{}</code></td>{}{}{}{}{}</tr>').format(
            d.name,
            num_td(d.old),
            num_td(d.new),
            num_td(d.delta, fmt_delta),
            num_td(fmt_interval(d.ci_low, d.ci_high), lambda v: v),
            num_td(d.tolerance),
        )
        for d in regressed
    ]
    drops = join(_drops(d) for d in regressed)
    return (
        table(["regressed metric", "baseline", "now", "delta", "95% interval", "tolerance"], rows, "verdict-metrics")
        + drops
        + scope
    )


def _drops(d: MetricDelta) -> Html:
    """The cases that moved a regressed metric most (flipped or not), largest drop first, on one line."""
    if not d.largest_drops:
        return EMPTY
    items = Html(" · ").join(
        Html("<code>{}</code> {} &rarr; {}").format(str(drop.get("case")), fmt(drop.get("old")), fmt(drop.get("new")))
        for drop in d.largest_drops
    )
    return Html('<p class="drops muted">Cases that moved <code>{}</code> most: {}</p>').format(d.name, items)


def _flipped_line(outcome: GateOutcome) -> Html:
    to_fail, to_pass = outcome.flipped_to_fail, outcome.flipped_to_pass
    if outcome.comparison is None or not (to_fail or to_pass):
        return EMPTY
    return Html(
        '<p><a href="#flipped-to-fail">{} flipped pass &rarr; fail</a> · <a href="#flipped-to-pass">{} flipped fail &rarr; pass</a></p>'
    ).format(len(to_fail), len(to_pass))


def _moves(comparison: Comparison | None) -> Html:
    """The cases the gate did not compare, by id: added, changed (another definition), not in this run."""
    if comparison is None or comparison.refused:
        return EMPTY
    parts = []
    for title, keys in (
        ("added since the baseline", comparison.added_cases),
        (
            "changed since the baseline (another question, gold, reference, thresholds, marks or params)",
            comparison.changed_cases,
        ),
        ("removed since the baseline", comparison.removed_cases),
    ):
        if keys:
            items = join(Html("<li><code>{}</code></li>").format(key) for key in keys[:50])
            more = Html("<li>and {} more</li>").format(len(keys) - 50) if len(keys) > 50 else EMPTY
            parts.append(
                Html('<details class="moves"><summary>{} {}: not compared</summary><ul>{}{}</ul></details>').format(
                    len(keys), title, items, more
                )
            )
    return join(parts)


def _configs_line(failed: Sequence[tuple[str, str]]) -> Html:
    """A matrix run: the configs whose own gate failed, linked to the Configs section."""
    if not failed:
        return EMPTY
    items = join(Html("<li><code>{}</code>: {}</li>").format(cid, reason) for cid, reason in failed)
    return Html(
        '<div class="reason"><a href="#configs">configs that regressed against the same config of the baseline</a>:</div><ul>{}</ul>'
    ).format(items)


def render_verdict(outcome: GateOutcome | None, failed_configs: Sequence[tuple[str, str]] = ()) -> Html:
    """The block (``id="verdict"``); ``None``: the page of a run without a gate ("not gated"). ``failed_configs``:
    (config id, reason) of a matrix run's configs that regressed (report/configs.failed_configs)."""
    outcome = outcome or GateOutcome()
    kind = outcome.kind
    cls = {"failed": "v-failed", "refused": "v-failed", "allowed": "v-allowed", "passed": "v-passed"}.get(
        kind, "v-none"
    )
    parts = [Html('<section id="verdict" class="verdict-block {}"><h2>{}</h2>').format(cls, VERDICT_TITLES[kind])]
    if outcome.baseline:
        parts.append(Html('<div class="muted">baseline <code>{}</code></div>').format(outcome.baseline))
    comparison = outcome.comparison
    tabled = comparison is not None and comparison.regressed and not comparison.coverage_failures
    reason = bool(outcome.reason) and kind in ("failed", "refused") and not tabled  # a regression's reason: the table
    if reason:
        parts.append(Html('<div class="reason">{}</div>').format(outcome.reason))
    if comparison is not None and comparison.not_compared and kind != "refused":
        parts.append(Html('<div class="reason">not compared: {}</div>').format(comparison.not_compared))
    parts.append(_regressed_table(outcome))
    if comparison is not None and not reason:
        parts.extend(Html('<div class="reason">{}</div>').format(f) for f in comparison.coverage_failures)
    parts.append(_configs_line(failed_configs))
    parts.append(_flipped_line(outcome))
    parts.append(_moves(comparison))
    parts.append(Html("</section>"))
    return join(parts)
