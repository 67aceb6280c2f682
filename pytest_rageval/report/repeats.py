"""What every report says about repeated cases (stability.py classes them; metrics.json ``repeats`` counts them).

- :func:`summary_lines`: the terminal summary's lines (counts, flake rate,
  spread, each flaky case with "k of n runs passed");
- :func:`render_section`: the same for report.html (an ``id="repeats"`` section);
- :func:`render_card`: the head of a repeated case's card (report.html and
  pytest-html): "k of n runs passed", the class, which run the answer,
  retrieval, verdicts and misses are from, that the metric table shows means,
  and each run's verdict with the metrics that moved between runs.

HTML is built of markup.Html fragments (every value escaped where it joins markup).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_rageval.evaluation.stability import passed_runs, runs_passed_text, stability_of

from .markup import EMPTY, Html, fmt, join, num_td, table

__all__ = ["card_note", "heading", "render_card", "render_section", "runs_line", "summary_lines"]

#: Flaky cases listed by name in the terminal and report.html (metrics.json lists them all).
LIST_LIMIT = 20
#: Metric columns of a card's per-run table (the ones that moved between runs, in record order).
RUN_COLUMNS = 8


def runs_line(record: Mapping[str, Any]) -> str | None:
    """``"flaky: 2 of 3 runs passed"`` for a repeated record; None for a case that ran once."""
    counts, klass = passed_runs(record), stability_of(record)
    if counts is None or klass is None:
        return None
    return f"{klass}: {runs_passed_text(*counts)}"


def card_note(record: Mapping[str, Any]) -> str | None:
    """What a repeated case's card shows from which run; None for a case that ran once."""
    counts = passed_runs(record)
    if counts is None:
        return None
    shown = record.get("shown_run")
    which = (
        f"are those of run {shown} (the first run that agrees with the majority verdict)"
        if isinstance(shown, int)
        else "are those of one run"
    )
    return (
        f"A repeated case passes when more than half of its {counts[1]} runs pass. The answer, retrieved chunks, "
        f"judge verdicts and missed thresholds {which}; the metric table shows each metric's mean over the runs "
        "that scored it (true/false metrics: the majority)."
    )


def heading(record: Mapping[str, Any], title: str) -> str:
    """A card's table heading, saying for a repeated case what its values are: "Metrics" (means; the status
    column is the shown run's misses) or "Missed metrics" (the shown run's); ``title`` alone for one run."""
    counts, shown = passed_runs(record), record.get("shown_run")
    if counts is None:
        return title
    run = f"run {shown}" if isinstance(shown, int) else "one run"
    if title == "Metrics":
        return f"Metrics: means over the {counts[1]} runs (status: the misses of {run})"
    return f"{title} in {run}"


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def summary_lines(metrics: Mapping[str, Any]) -> list[str]:
    """The terminal summary's lines on repeated cases; none when no case was repeated."""
    repeats = metrics.get("repeats")
    if not isinstance(repeats, Mapping) or not repeats.get("repeated_cases"):
        return []
    lines = [f"repeats: {_counts(repeats)}; flake rate {_fmt(repeats.get('flake_rate'))}"]
    spread = repeats.get("spread") or {}
    if spread:
        lines.append(
            "  spread across runs (mean of max-min per case): "
            + ", ".join(f"{name} {_fmt(value)}" for name, value in spread.items())
        )
    flaky = [c for c in repeats.get("flaky_cases") or [] if isinstance(c, Mapping)]
    for case in flaky[:LIST_LIMIT]:
        lines.append(f"  flaky: {case.get('key')}  {runs_passed_text(case.get('passed_runs', 0), case.get('runs', 0))}")
    if len(flaky) > LIST_LIMIT:
        lines.append(f"  ... and {len(flaky) - LIST_LIMIT} more flaky cases (metrics.json repeats.flaky_cases)")
    return lines


def _counts(repeats: Mapping[str, Any]) -> str:
    n = repeats.get("repeated_cases", 0)
    return (
        f"{n} repeated case{'s' if n != 1 else ''}: {repeats.get('stable_pass', 0)} stable_pass, "
        f"{repeats.get('flaky', 0)} flaky, {repeats.get('stable_fail', 0)} stable_fail"
    )


def render_section(metrics: Mapping[str, Any]) -> Html:
    """report.html's section on repeated cases (empty when none was repeated)."""
    repeats = metrics.get("repeats")
    if not isinstance(repeats, Mapping) or not repeats.get("repeated_cases"):
        return EMPTY
    parts = [
        Html(
            '<h2 id="repeats">Repeated cases</h2><p>{}; flake rate <strong>{}</strong> (flaky / repeated cases).</p>'
        ).format(_counts(repeats), fmt(repeats.get("flake_rate")))
    ]
    spread = repeats.get("spread") or {}
    if spread:
        rows = [Html("<tr><td><code>{}</code></td>{}</tr>").format(k, num_td(v)) for k, v in spread.items()]
        parts.append(
            Html(
                "<p class=\"muted\">Spread across runs: each metric's max minus min over a case's runs, averaged over the repeated cases.</p>"
            )
            + table(["metric", "mean range"], rows)
        )
    flaky = [c for c in repeats.get("flaky_cases") or [] if isinstance(c, Mapping)]
    if flaky:
        items = join(
            Html("<li><code>{}</code>: {}</li>").format(
                c.get("key"), runs_passed_text(c.get("passed_runs", 0), c.get("runs", 0))
            )
            for c in flaky[:LIST_LIMIT]
        )
        more = (
            Html("<li>... and {} more (metrics.json <code>repeats.flaky_cases</code>)</li>").format(
                len(flaky) - LIST_LIMIT
            )
            if len(flaky) > LIST_LIMIT
            else EMPTY
        )
        parts.append(Html("<h3>Flaky cases</h3><ul>{}{}</ul>").format(items, more))
    return join(parts)


def render_card(record: Mapping[str, Any]) -> Html:
    """The head of a repeated case's card (empty for a case that ran once): class, runs passed, which run is shown."""
    line, note = runs_line(record), card_note(record)
    if line is None or note is None:
        return EMPTY
    runs = [r for r in record.get("repeats") or [] if isinstance(r, Mapping)]
    return Html('<div class="repeats"><h4>Repeated case: {}</h4><p class="muted">{}</p>{}</div>').format(
        line, note, _runs_table(runs, record.get("shown_run"))
    )


def _runs_table(runs: list[Mapping[str, Any]], shown: Any) -> Html:
    """Each run's verdict and the metrics whose value differed between runs."""
    values: list[Mapping[str, Any]] = [m if isinstance(m := r.get("metrics"), Mapping) else {} for r in runs]
    names = list(dict.fromkeys(name for v in values for name in v))
    moved = [n for n in names if len({repr(v.get(n)) for v in values}) > 1 and n not in ("latency_ms", "ttft_ms")][
        :RUN_COLUMNS
    ]
    rows = [
        Html("<tr><td>{}{}</td><td>{}</td>{}</tr>").format(
            i,
            " (shown)" if i == shown else "",
            "passed" if run.get("passed") else "failed",
            join(num_td(v.get(n)) for n in moved),
        )
        for i, (run, v) in enumerate(zip(runs, values), start=1)
    ]
    return table(["run", "verdict", *moved], rows)
