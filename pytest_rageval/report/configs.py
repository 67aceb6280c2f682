"""The configs of a matrix run, ranked: terminal lines (the summary, ``rageval compare``) and a report.html section.

Pure (layer 4): reads metrics.json's ``config_ranking`` (configs.rank_configs) and the per-config gate in
``comparison.by_config``. Config ids and params come from the user's matrix: escaped in HTML (markup.Html
fragments escape every argument) and made terminal-safe by the callers of the lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .markup import EMPTY, Html, badge, num_td, table

__all__ = ["failed_configs", "ranking_lines", "render_configs"]


def _f(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _interval(row: Mapping[str, Any]) -> str:
    if row.get("ci_low") is None or row.get("ci_high") is None:
        return "95% CI n/a"
    return f"95% CI {row['ci_low']:.3f}..{row['ci_high']:.3f}"


def _gates(metrics: Mapping[str, Any]) -> Mapping[str, Any]:
    """config id -> its gate entry (``comparison.by_config.configs``), when the run was gated."""
    comparison = metrics.get("comparison")
    block = comparison.get("by_config") if isinstance(comparison, Mapping) else None
    configs = block.get("configs") if isinstance(block, Mapping) else None
    return configs if isinstance(configs, Mapping) else {}


def failed_configs(metrics: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(config id, reason) of each config whose own gate failed against the same config of the baseline."""
    return [
        (str(cid), str(entry.get("reason") or ""))
        for cid, entry in _gates(metrics).items()
        if isinstance(entry, Mapping) and entry.get("failed")
    ]


def _gate_word(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return ""
    return "REGRESSION" if entry.get("status") == "regression" else str(entry.get("status") or "")


def ranking_lines(metrics: Mapping[str, Any]) -> list[str]:
    """``configs ranked by recall_at_k_avg ...``, one line per config (best first), then the best named; [] without a matrix."""
    ranking = metrics.get("config_ranking")
    if not isinstance(ranking, Mapping) or not ranking.get("ranked"):
        return []
    direction = "lower is better" if ranking.get("lower_is_better") else "higher is better"
    gates = _gates(metrics)
    by_config = metrics.get("by_config")
    by_config = by_config if isinstance(by_config, Mapping) else {}
    lines = [
        f"configs ranked by {ranking.get('metric')} ({direction}; 95% bootstrap interval of the mean over cases; ties: more cases passed first):"
    ]
    width = max(len(str(row.get("config_id"))) for row in ranking["ranked"])
    for position, row in enumerate(ranking["ranked"], start=1):
        config_id = str(row.get("config_id"))
        line = (
            f"  {position:>2}. {config_id:<{width}}  {_f(row.get('value')):>5}  {_interval(row)}  n={row.get('n', 0)}"
        )
        entry = by_config.get(config_id)
        if isinstance(entry, Mapping):
            ran = sum(int(entry.get(name) or 0) for name in ("passed", "failed", "errors"))
            line += f"  passed {int(entry.get('passed') or 0)}/{ran}"
        word = _gate_word(gates.get(config_id))
        if word:
            line += f"  baseline: {word}"
        lines.append(line)
    best = ranking.get("best")
    lines.append(f"best config: {best}" if best else "best config: none (no config has a value of the metric)")
    lines.extend(f"config {config_id}: {reason}" for config_id, reason in failed_configs(metrics) if reason)
    block = (metrics.get("comparison") or {}).get("by_config") or {}
    if block.get("only_in_run"):
        lines.append(f"configs not in the baseline (not gated): {', '.join(block['only_in_run'])}")
    if block.get("only_in_baseline"):
        lines.append(f"configs of the baseline not in this run: {', '.join(block['only_in_baseline'])}")
    return lines


def render_configs(metrics: Mapping[str, Any]) -> Html:
    """The "Configs" section of report.html (empty without a matrix): the ranking table, best marked."""
    ranking = metrics.get("config_ranking")
    if not isinstance(ranking, Mapping) or not ranking.get("ranked"):
        return EMPTY
    by_config = metrics.get("by_config")
    by_config = by_config if isinstance(by_config, Mapping) else {}
    gates = _gates(metrics)
    metric = str(ranking.get("metric"))
    rows = []
    for position, row in enumerate(ranking["ranked"], start=1):
        config_id = str(row.get("config_id"))
        entry = by_config.get(config_id) or {}
        params = ", ".join(f"{name}={value}" for name, value in (row.get("params") or {}).items())
        counts = f"{entry.get('passed', 0)} / {entry.get('failed', 0)} / {entry.get('errors', 0)}"
        best = Html(" ") + badge("best", "passed") if config_id == ranking.get("best") else EMPTY
        word = _gate_word(gates.get(config_id))
        cls = Html(' class="regressed"') if word == "REGRESSION" else EMPTY
        rows.append(
            Html(
                '<tr{}><td class="num">{}</td><td><code>{}</code>{}</td><td>{}</td>{}'
                '<td class="num">{}</td><td class="num">{}</td><td>{}</td><td>{}</td></tr>'
            ).format(
                cls,
                position,
                config_id,
                best,
                params,
                num_td(row.get("value")),
                _interval(row).removeprefix("95% CI "),
                row.get("n", 0),
                counts,
                word,
            )
        )
    headers = ["rank", "config", "params", metric, "95% CI", "n", "passed / failed / errors", "baseline"]
    intro = Html("<p>Ranked by <code>{}</code> ({}); best: <code>{}</code>.</p>").format(
        metric,
        "lower is better" if ranking.get("lower_is_better") else "higher is better",
        ranking.get("best") or "none",
    )
    return Html('<h2 id="configs">Configs</h2>') + intro + table(headers, rows, "configs")
