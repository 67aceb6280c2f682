"""Text for people: a failing case's message and the session's summary section."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional

from ..thresholds import Miss, describe_runs, shorten

if TYPE_CHECKING:
    from ..gate import Comparison
    from ..settings import Settings

TOP_ANCHORS = 5


def _anchor(chunk: Mapping[str, Any]) -> str:
    heading = chunk.get("heading_path")
    if isinstance(heading, list):
        heading = " > ".join(heading)
    where = chunk.get("rel_path") or chunk.get("doc_id") or chunk.get("chunk_id") or "?"
    score = chunk.get("score_final")
    tail = f"  (score {score:.3g})" if isinstance(score, (int, float)) else ""
    return f"{where}  {heading or ''}".rstrip() + tail


def format_failure(record: Mapping[str, Any]) -> str:
    """Question, every missed metric, the shortened answer, top anchors (gold marked), judge notes."""
    lines = [f"[{record.get('test_case_id')}] {shorten(record.get('question'), 200)}"]
    runs = describe_runs(record.get("repeats") or [], record.get("shown_run"))
    lines += [runs, "missed:"] if runs else ["missed:"]
    for miss in record.get("misses", []):
        lines.append("  " + Miss(miss["metric"], miss["value"], miss["threshold"], miss["op"]).describe())
    lines.append(f"answer: {shorten(record.get('answer'), 300) or '(empty)'}")
    chunks = record.get("retrieved_chunks") or []
    if chunks:
        lines.append("top retrieved (* = gold):")
        for chunk in chunks[:TOP_ANCHORS]:
            mark = "*" if chunk.get("gold") else " "
            lines.append(f"  {chunk.get('position', '?'):>2} {mark} {_anchor(chunk)}")
    else:
        lines.append("top retrieved: (no chunks in the response)")
    for metric, verdict in (record.get("judge") or {}).items():
        if not isinstance(verdict, Mapping):
            continue
        if verdict.get("reasoning"):
            lines.append(f"{metric} judge: {shorten(verdict['reasoning'], 300)}")
        for claim in verdict.get("unsupported_claims") or []:
            lines.append(f"  unsupported: {shorten(claim, 200)}")
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


SUMMARY_METRICS = (
    "recall_at_k_avg",
    "recall_all_at_k_avg",
    "mrr_avg",
    "precision_at_k_avg",
    "ndcg_at_k_avg",
    "scope_miss_rate",
    "attribution_hit_rate",
    "conflict_rule_rate",
    "groundedness_avg",
    "correctness_avg",
    "abstention_accuracy",
    "hallucination_rate_unanswerable",
    "false_abstention_rate",
)


def _case_threshold(name: str, settings: "Settings") -> str:
    """The configured per-case threshold behind an aggregate, when one is set globally."""
    from ..thresholds import op_for

    metric = name.rsplit("_", 1)[0] if name.endswith(("_avg", "_rate")) else name
    value = settings.thresholds.cli.get(metric, settings.thresholds.global_.get(metric))
    if value is None and metric == "recall_at_k":
        value = 1.0
    return "" if value is None else f"per case {op_for(metric)} {_fmt(value) if not isinstance(value, bool) else value}"


def summary_lines(
    metrics: Mapping[str, Any],
    settings: "Settings",
    comparison: Optional["Comparison"],
    notes: Iterable[str],
    run_dir: Optional[Path],
) -> list[str]:
    """The terminal section after the run."""
    agg = metrics.get("aggregate_metrics", {})
    deltas = {d.name: d for d in comparison.deltas} if comparison else {}
    counts = (
        f"{metrics.get('passed', 0)} passed, {metrics.get('failed', 0)} failed, {metrics.get('errors', 0)} errors, "
        f"{metrics.get('skipped', 0)} skipped, {metrics.get('invalid_lines', 0)} invalid lines"
    )
    lines = [f"cases: {counts}; k={settings.k}", _judge_line(metrics)]
    if not metrics.get("complete", True):
        lines.append("run INCOMPLETE: metrics cover the finished cases only")
    for name in SUMMARY_METRICS:
        value = agg.get(name)
        if value is None and name not in deltas:
            continue
        line = f"  {name:<32} {_fmt(value):>7}"
        threshold = _case_threshold(name, settings)
        if threshold:
            line += f"   [{threshold}]"
        delta = deltas.get(name)
        if delta is not None and delta.delta is not None:
            line += f"   baseline {_fmt(delta.old)} ({delta.delta:+.3f})"
            if delta.regressed:
                line += " REGRESSED"
        lines.append(line)
    latency = agg.get("latency") or {}
    if latency.get("p50_ms") is not None:
        lines.append(f"  latency p50 {latency['p50_ms']:.0f} ms, p95 {latency['p95_ms']:.0f} ms")
    ops = agg.get("operational_metrics") or {}
    if ops.get("error_rate"):
        lines.append(f"  error rate {ops['error_rate']:.3f}, timeout rate {ops.get('timeout_rate') or 0:.3f}")
    for metric, cov in sorted((agg.get("judge_coverage") or {}).items()):
        if cov.get("coverage") is not None and cov["coverage"] < 1:
            lines.append(f"  judge coverage of {metric}: {cov['scored']}/{cov['attempted']} scored ({cov['coverage']:.3f})")
    reliability = agg.get("judge_reliability")
    if reliability:
        rate = reliability.get("disagreement_rate")
        lines.append(
            f"  judge spot check ({reliability.get('model')}): {reliability['spot_check_n']} cases, "
            f"disagreement rate {'—' if rate is None else f'{rate:.3f}'}"
        )
    if comparison is not None:
        from ..gate import format_comparison

        regressed = [d for d in comparison.deltas if d.regressed]
        lines.append("baseline: " + ("REGRESSION" if comparison.regressed else "no regression"))
        if regressed or comparison.flipped_to_fail or comparison.coverage_failures:
            lines.extend("  " + line for line in format_comparison(comparison) if _is_notable(line, comparison))
    lines.extend(notes)
    if run_dir is not None:
        lines.append(f"run: {run_dir} (metrics.json, results.jsonl, report.html)")
    return lines


def _judge_line(metrics: Mapping[str, Any]) -> str:
    """The judge in use, its cache hits and misses, tokens and estimated cost."""
    info = metrics.get("judge") or {}
    name = info.get("name") or "none"
    if name == "none":
        return "judge: none"
    agg = metrics.get("aggregate_metrics", {})
    cache = agg.get("judge_cache") or {}
    cost = agg.get("cost") or {}
    label = f"{name} ({info.get('model')}{'; heuristic scores' if info.get('heuristic') else ''})"
    return (
        f"judge: {label}; cache hits {cache.get('hits', 0)}, misses {cache.get('misses', 0)}; "
        f"{cost.get('judge_total_tokens', 0)} tokens, ~${cost.get('judge_total_usd', 0.0):.4f}"
    )


def _is_notable(line: str, comparison: "Comparison") -> bool:
    """Keep regressed metrics, flipped cases and messages; drop unremarkable deltas."""
    names = {d.name for d in comparison.deltas if not d.regressed}
    return not any(line.startswith(f"{name}:") for name in names)
