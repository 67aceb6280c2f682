"""The CI summary: a short Markdown page of one run (``--rageval-summary-md``, ``$GITHUB_STEP_SUMMARY``).

The gate's verdict, the case counts, the regressed metrics with their 95% intervals and the cases that
flipped (pass -> fail first), each linked to its card in report.html (the element ids of
``cards.CaseAnchors``), then where report.html is. A summary, not a report: at most ``MAX_CASES``
flipped cases of each kind are listed.

GitHub renders HTML inside a Markdown step summary, so every text from outside (case ids, metric names
a conftest registered, the gate's reason, notes) goes through :func:`md_text`: it can make no tag, link,
emphasis, code span or table cell. Links are built here from our own ids and a percent-encoded path.
Pure: the run controller redacts secrets from the reason and the notes, and writes the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pytest_rageval.gate.aggregate import xfail_counts
from pytest_rageval.sanitize import terminal_safe

from .baseline import verdict_kind
from .configs import failed_configs
from .session_verdict import verdict_from_metrics

if TYPE_CHECKING:
    from pytest_rageval.gate.compare import Comparison, MetricDelta

__all__ = ["MAX_CASES", "md_text", "report_href", "summary_markdown"]

#: flipped cases listed of each kind; the rest are counted ("and N more")
MAX_CASES = 50
#: longest note or reason shown, in characters
MAX_TEXT = 500

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# Markdown punctuation that can start a construct mid-line: code, emphasis, links, table cells,
# strikethrough, math; the backslash itself first (an escape of our own must not be undone)
_PUNCTUATION = re.compile(r"([\\`*_\[\]|~$])")
_WHITESPACE = re.compile(r"\s")
# GitHub turns bare URLs, www. names and e-mail addresses into links (its autolink extension): a backslash
# before the colon of ``://`` or the dot of ``www.`` stops the first two, an invisible word joiner after ``@``
# (as an entity: the source stays ASCII) the third; the text reads the same
_AUTOLINKS = re.compile(r"(?<=[A-Za-z0-9])(:)(?=//)|(?<![A-Za-z0-9])((?i:www))(\.)|(@)")


def md_text(value: Any, limit: int = MAX_TEXT) -> str:
    """``value`` as inert Markdown text on one line: no HTML tag or entity, link, emphasis, code span or table cell.

    Control characters are shown escaped (``sanitize.terminal_safe``), whitespace (newlines included)
    becomes a space, ``& < >`` become entities, Markdown's punctuation is backslash-escaped and bare URLs,
    ``www.`` names and e-mail addresses are kept from becoming links.
    Longer than ``limit`` characters: cut, with an ellipsis.
    """
    text = _WHITESPACE.sub(" ", terminal_safe(value if isinstance(value, str) else str(value)))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = "".join(_ENTITIES.get(c, c) for c in text)
    return _AUTOLINKS.sub(_no_autolink, _PUNCTUATION.sub(r"\\\1", text))


def _no_autolink(match: re.Match[str]) -> str:
    colon, www, _dot, at = match.groups()
    if colon:
        return "\\:"
    if www:
        return www + "\\."
    return at + "&#8288;"


def report_href(report: Path, summary: Path, cwd: Path) -> str:
    """How a summary written to ``summary`` points at ``report`` (both absolute).

    Relative to the summary's folder when the report lies under it (a summary beside report.html says
    ``report.html``), else relative to ``cwd`` (the folder pytest ran in: the run folder's path in the
    checkout and in an uploaded artifact), else the absolute path.
    """
    for base in (summary.parent, cwd):
        try:
            return report.relative_to(base).as_posix()
        except ValueError:
            continue
    return report.as_posix()


def _href(path: str, anchor: str | None = None) -> str:
    """A link destination: the path percent-encoded (only ``/`` kept), then ``#anchor`` (an id of our own)."""
    return quote(path, safe="/") + (f"#{anchor}" if anchor else "")


def _num(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" if sign else f"{value:.3f}"


#: The headline of each verdict kind (baseline.verdict_kind, shared with report.html's verdict block).
_HEADLINES = {
    "failed": "❌ gate FAILED",
    "refused": "❌ gate FAILED",
    "not gated": "no baseline compared",
    "allowed": "⚠️ regressions allowed",
    "passed": "✅ gate passed",
}


def _verdict(comparison: Comparison | None, gate_failed: bool) -> str:
    return _HEADLINES[verdict_kind(comparison, gate_failed)]


def _counts(metrics: Mapping[str, Any]) -> str:
    total = metrics.get("total_tests", 0)
    line = (
        f"{total} case{'' if total == 1 else 's'}: {metrics.get('passed', 0)} passed, {metrics.get('failed', 0)} failed, "
        f"{metrics.get('errors', 0)} errors{xfail_counts(metrics)}"
    )
    labels = (
        ("skipped", "skipped"),
        ("invalid_lines", "invalid lines"),
        ("known_failures", "known failures"),
        ("fixed_since_baseline", "fixed since baseline"),
    )
    more = [f"{metrics[name]} {label}" for name, label in labels if metrics.get(name)]
    flags = []
    if metrics.get("partial"):
        flags.append(
            f"partial run: {metrics.get('cases_selected')} of {metrics.get('cases_in_eval_set')} cases selected"
        )
    if metrics.get("all_error"):
        flags.append("every case errored")
    if not metrics.get("complete", True):
        flags.append("incomplete run")
    return line + "".join(f", {m}" for m in more) + "".join(f"; **{f}**" for f in flags) + "."


def _delta_row(d: MetricDelta) -> str:
    interval = "—" if d.ci_low is None or d.ci_high is None else f"{d.ci_low:+.3f} .. {d.ci_high:+.3f}"
    tolerance = "—" if d.tolerance is None else f"{d.tolerance:.3f}" + (" (rise)" if d.lower_is_better else "")
    cells = [
        md_text(d.name),
        f"{_num(d.old)} → {_num(d.new)}",
        _num(d.delta, sign=True),
        interval,
        tolerance,
        str(d.n_shared),
    ]
    return "| " + " | ".join(cells) + " |"


def _regressions(comparison: Comparison) -> list[str]:
    if comparison.refused or comparison.not_compared:
        return []
    lines = [md_text(comparison.scope()) + "."]
    regressed = [d for d in comparison.deltas if d.regressed]
    if regressed:
        lines += [
            "",
            "| regressed metric | baseline → now | delta | 95% interval | tolerance | paired cases |",
            "|---|---|---|---|---|---|",
            *(_delta_row(d) for d in regressed),
        ]
        for d in regressed:
            if d.largest_drops:
                lines += ["", f"Cases that moved {md_text(d.name)} most:", ""]
                lines += [
                    f"- {md_text(drop.get('case'))}: {_num(drop.get('old'))} → {_num(drop.get('new'))}"
                    for drop in d.largest_drops
                ]
    else:
        lines.append("No metric regressed.")
    if comparison.coverage_failures:
        lines += ["", *(f"- {md_text(failure)}" for failure in comparison.coverage_failures)]
    return lines


def _case_list(title: str, keys: Sequence[str], anchors: Mapping[str, str], report: str | None) -> list[str]:
    if not keys:
        return []
    lines = ["", f"**{title} ({len(keys)})**", ""]
    for key in keys[:MAX_CASES]:
        anchor = anchors.get(key)
        shown = md_text(key)
        lines.append(f"- [{shown}]({_href(report, anchor)})" if report is not None and anchor else f"- {shown}")
    if len(keys) > MAX_CASES:
        lines.append(f"- and {len(keys) - MAX_CASES} more")
    return lines


def summary_markdown(
    metrics: Mapping[str, Any],
    comparison: Comparison | None,
    *,
    anchors: Mapping[str, str],
    report: str | None,
    gate_failed: bool,
    gate_reason: str,
    notes: Iterable[str],
) -> str:
    """The summary of one run, Markdown ending in a newline.

    ``metrics`` is the run's metrics.json, ``comparison`` the gate's (None when no baseline was compared),
    ``anchors`` the element id in report.html of each flipped case (``cards.case_anchors``), ``report`` the
    path of report.html as the summary should link it (:func:`report_href`; None: no report to link).
    ``gate_reason`` and ``notes`` must already be free of secrets.
    """
    session = verdict_from_metrics(metrics)
    if session is not None:  # the session's verdict: its exit status and its parts, the gate one of them
        mark = "✅" if session.passed else "❌"
        lines = [f"## pytest-rageval: {mark} {md_text(session.text)}", ""]
    else:
        lines = [f"## pytest-rageval: {_verdict(comparison, gate_failed)}", ""]
    if gate_failed and gate_reason:
        lines += [md_text(gate_reason), ""]
    lines.append(_counts(metrics))
    if comparison is not None:
        lines += ["", *_regressions(comparison)]
        configs = failed_configs(metrics)
        if configs:
            lines += [
                "",
                "**Configs that regressed** (each against the same config of the baseline)",
                "",
                *(f"- {md_text(cid)}: {md_text(reason)}" for cid, reason in configs),
            ]
        lines += _case_list("Flipped from pass to fail", comparison.flipped_to_fail, anchors, report)
        lines += _case_list("Flipped from fail to pass", comparison.flipped_to_pass, anchors, report)
        lines += _case_list("Added since the baseline (not compared)", comparison.added_cases, anchors, None)
        lines += _case_list("Changed since the baseline (not compared)", comparison.changed_cases, anchors, None)
        lines += _case_list("Removed since the baseline", comparison.removed_cases, anchors, None)
    shown_notes = [note for note in notes if note != gate_reason]
    if shown_notes:
        lines += ["", "**Notes**", "", *(f"- {md_text(note)}" for note in shown_notes)]
    if report is not None:
        lines += ["", f"Report: [{md_text(report)}]({_href(report)})"]
    return "\n".join(lines) + "\n"
