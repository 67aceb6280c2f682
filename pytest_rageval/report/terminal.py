"""Text for people: a failing case's message and the session's summary section.

Everything here may hold text from outside (answers, chunk paths, judge
reasoning, error bodies, notes): each message goes through
``sanitize.terminal_safe`` so no escape sequence reaches the terminal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.stored_chunk import heading_text
from pytest_rageval.evaluation.thresholds import Miss, ThresholdConfig, describe_runs, shorten
from pytest_rageval.gate.aggregate import xfail_counts
from pytest_rageval.runs.folder import RunFolder
from pytest_rageval.sanitize import terminal_safe

from .configs import ranking_lines
from .conversation import format_conversation_failure, is_conversation
from .repeats import summary_lines as repeat_summary_lines

if TYPE_CHECKING:
    from pytest_rageval.gate.compare import Comparison


class SummarySettings(Protocol):
    """What the summary section reads of the run's settings (the plugin's Settings has both)."""

    @property
    def k_shown(self) -> str:
        """The run's k as the summary shows it (``5``, or a matrix's depth values)."""
        ...

    @property
    def thresholds(self) -> ThresholdConfig:
        """The per-case thresholds (command line, global, by category)."""
        ...


TOP_ANCHORS = 5
TOP_CLAIMS = 5  # unsupported claims shown per judge metric


def _anchor(chunk: Mapping[str, Any]) -> str:
    heading = heading_text(chunk.get("heading_path"))
    where = chunk.get("rel_path") or chunk.get("doc_id") or chunk.get("chunk_id") or "?"
    score = chunk.get("score_final")
    tail = f"  (score {score:.3g})" if isinstance(score, (int, float)) else ""
    return f"{where}  {heading or ''}".rstrip() + tail


def format_failure(record: Mapping[str, Any]) -> str:
    """Question, every missed metric, the shortened answer, top anchors (gold marked), judge notes; for a
    conversation, each failing turn's, with the history it was sent."""
    if is_conversation(record):
        text = format_conversation_failure(record, format_failure)
        return terminal_safe("\n".join([text, *_since_lines(record), *_note_lines(record)]))
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
    gold = [item for item in record.get("expected_gold") or [] if isinstance(item, Mapping)]
    if gold:
        lines.append(f"expected gold (+ = in the top {len(chunks)}):" if chunks else "expected gold:")
        for item in gold[:TOP_ANCHORS]:
            lines.append(f"     {'+' if item.get('found') else ' '} {shorten(item.get('anchor'), 200)}")
        if len(gold) > TOP_ANCHORS:
            lines.append(f"     ... and {len(gold) - TOP_ANCHORS} more")
    for metric, verdict in (record.get("judge") or {}).items():
        if not isinstance(verdict, Mapping):
            continue
        if verdict.get("reasoning"):
            lines.append(f"{metric} judge: {shorten(verdict['reasoning'], 300)}")
        claims = verdict.get("unsupported_claims")
        claims = claims if isinstance(claims, list) else []
        for claim in claims[:TOP_CLAIMS]:
            lines.append(f"  unsupported: {shorten(claim, 200)}")
        if len(claims) > TOP_CLAIMS:
            lines.append(f"  ... and {len(claims) - TOP_CLAIMS} more unsupported claims")
    lines += _since_lines(record)
    lines += _note_lines(record)
    return terminal_safe("\n".join(lines))


def _since_lines(record: Mapping[str, Any]) -> list[str]:
    since = record.get("since_baseline")
    if isinstance(since, Mapping) and since.get("kind") == "worse":
        return [f"since the baseline: {since.get('text')}"]
    return []


def format_error(record: Mapping[str, Any], line: int) -> str:
    """An errored case's message: where, which case, what failed and why, then its notes."""
    error = record.get("error") or {}
    kind = error.get("kind")
    what = "judge failed" if kind == "judge" else f"RAG call failed ({kind})"
    head = f"{record.get('file')}:{line} [{shorten(record.get('test_case_id'), 200)}] {what}: {error.get('message')}"
    return terminal_safe("\n".join([head, *_note_lines(record)]))


def escape_longrepr(node: Any, depth: int = 0) -> Any:
    """A pytest report's ``longrepr`` with every text in it terminal-safe (in place where it is a dataclass).

    pytest prints it to the terminal and writes it to JUnit XML and pytest-html;
    a traceback's lines and crash message may hold text from outside (an
    exception message that quotes a server). Its structure (pytest's
    ``ExceptionChainRepr`` and parts, plain dataclasses) is kept, so the short
    summary still shows the crash message.
    """
    if isinstance(node, str):
        return terminal_safe(node)
    if isinstance(node, (list, tuple)):
        return type(node)(escape_longrepr(item, depth + 1) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type) and depth < 12:
        for item in dataclasses.fields(node):
            setattr(node, item.name, escape_longrepr(getattr(node, item.name), depth + 1))
    return node


def _note_lines(record: Mapping[str, Any]) -> list[str]:
    """The case's notes (what was repaired or cut in what the RAG or judge sent), one line each."""
    notes = [n for n in record.get("notes") or [] if isinstance(n, str)]
    return ["notes:", *(f"  {shorten(n, 300)}" for n in notes)] if notes else []


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def summary_metrics() -> tuple[str, ...]:
    """The aggregates the summary has a row for (when they have a value): the metric registry's, in its order."""
    return registry.summary_aggregates()


def _case_threshold(name: str, settings: SummarySettings) -> str:
    """The configured per-case threshold behind an aggregate, when one is set globally."""
    from pytest_rageval.evaluation.thresholds import op_for

    metric = name.rsplit("_", 1)[0] if name.endswith(("_avg", "_rate")) else name
    value = settings.thresholds.cli.get(metric, settings.thresholds.global_.get(metric))
    if value is None and metric == "recall_at_k":
        value = 1.0
    return "" if value is None else f"per case {op_for(metric)} {_fmt(value) if not isinstance(value, bool) else value}"


def summary_lines(
    metrics: Mapping[str, Any],
    settings: SummarySettings,
    comparison: Comparison | None,
    notes: Iterable[str],
    run_dir: Path | None,
) -> list[str]:
    """The terminal section after the run."""
    return [line for line, _ in styled_summary_lines(metrics, settings, comparison, notes, run_dir)]


Markup = dict[str, bool]
_RED: Markup = {"red": True}
_BAD: Markup = {"red": True, "bold": True}
_GOOD: Markup = {"green": True}
_WARN: Markup = {"yellow": True}


def styled_summary_lines(
    metrics: Mapping[str, Any],
    settings: SummarySettings,
    comparison: Comparison | None,
    notes: Iterable[str],
    run_dir: Path | None,
) -> list[tuple[str, Markup]]:
    """The terminal section after the run, each line with its terminal markup (regressions in red).

    Every line is terminal-safe (notes and case ids may carry text from outside).
    """
    agg = metrics.get("aggregate_metrics", {})
    deltas = {d.name: d for d in comparison.deltas} if comparison else {}
    counts = (
        f"{metrics.get('passed', 0)} passed, {metrics.get('failed', 0)} failed, {metrics.get('errors', 0)} errors, "
        f"{metrics.get('skipped', 0)} skipped{xfail_counts(metrics)}, {metrics.get('invalid_lines', 0)} invalid lines"
    )
    lines: list[tuple[str, Markup]] = [(f"cases: {counts}; k={settings.k_shown}", {}), (_judge_line(metrics), {})]
    lines.extend(known_failure_lines(metrics))
    calibration = metrics.get("judge_calibration")
    if isinstance(calibration, Mapping):
        scores = ", ".join(
            f"{m} {v:.3f}" for m, v in (calibration.get("balanced_accuracy") or {}).items() if isinstance(v, float)
        )
        lines.append(
            (
                f"judge calibration: {calibration.get('calibration')} (balanced accuracy {scores}; "
                f"rageval_min_judge_agreement {calibration.get('minimum')})",
                {},
            )
        )
    if metrics.get("partial"):
        lines.append(
            (
                f"run PARTIAL: {metrics.get('cases_selected')} of the {metrics.get('cases_in_eval_set')} cases of the eval set were selected",
                _WARN,
            )
        )
    if metrics.get("all_error"):
        lines.append(("every case ERRORED: no metric was scored", _BAD))
    if not metrics.get("complete", True):
        lines.append(("run INCOMPLETE: metrics cover the finished cases only", _WARN))
    for name in summary_metrics():
        value = agg.get(name)
        if value is None and name not in deltas:
            continue
        line = f"  {name:<32} {_fmt(value):>7}"
        threshold = _case_threshold(name, settings)
        if threshold:
            line += f"   [{threshold}]"
        delta = deltas.get(name)
        markup: Markup = {}
        if delta is not None and delta.delta is not None:
            if _fmt(delta.new) == _fmt(value):
                line += f"   baseline {_fmt(delta.old)} ({delta.delta:+.3f})"
            else:  # not every case is paired: show the paired values the delta is over
                line += f"   baseline {_fmt(delta.old)} → {_fmt(delta.new)} on {delta.n_shared} paired cases ({delta.delta:+.3f})"
            if delta.regressed:
                line += " REGRESSED"
                markup = _RED
        lines.append((line, markup))
    latency = agg.get("latency") or {}
    if latency.get("p50_ms") is not None:
        lines.append((f"  latency p50 {latency['p50_ms']:.0f} ms, p95 {latency['p95_ms']:.0f} ms", {}))
    if latency.get("ttft_p50_ms") is not None:  # some answer streamed
        lines.append((f"  first token p50 {latency['ttft_p50_ms']:.0f} ms, p95 {latency['ttft_p95_ms']:.0f} ms", {}))
    ops = agg.get("operational_metrics") or {}
    if ops.get("error_rate"):
        lines.append((f"  error rate {ops['error_rate']:.3f}, timeout rate {ops.get('timeout_rate') or 0:.3f}", {}))
    for metric, cov in sorted((agg.get("judge_coverage") or {}).items()):
        if cov.get("coverage") is not None and cov["coverage"] < 1:
            lines.append(
                (
                    f"  judge coverage of {metric}: {cov['scored']}/{cov['attempted']} scored ({cov['coverage']:.3f})",
                    _WARN,
                )
            )
    reliability = agg.get("judge_reliability")
    if reliability:
        rate = reliability.get("disagreement_rate")
        lines.append(
            (
                f"  judge spot check ({reliability.get('model')}): {reliability['spot_check_n']} cases, "
                f"disagreement rate {'—' if rate is None else f'{rate:.3f}'}",
                {},
            )
        )
    lines.extend((line, _WARN if line.startswith("  flaky:") else {}) for line in repeat_summary_lines(metrics))
    if comparison is not None:
        lines.extend(_comparison_lines(comparison))
    lines.extend(
        (line, _RED if "REGRESSION" in line or line.startswith("config ") else {}) for line in ranking_lines(metrics)
    )
    lines.extend((note, _WARN if note.startswith("warning") else {}) for note in notes)
    if run_dir is not None:
        lines.append(run_line(run_dir))
    return [(terminal_safe(line, multiline=False), markup) for line, markup in lines]


#: fixed cases named in the summary; the rest are counted
MAX_FIXED_SHOWN = 20


def known_failure_lines(metrics: Mapping[str, Any]) -> list[tuple[str, Markup]]:
    """With a baseline: how many cases are known failures (xfailed: they failed there the same way) and which
    cases were fixed since (failed there, pass now)."""
    lines: list[tuple[str, Markup]] = []
    known = metrics.get("known_failures")
    if isinstance(known, int) and known:
        lines.append(
            (
                f"{known} known failure{'s' if known != 1 else ''}: failed in the baseline the same way, none worse (xfailed)",
                _WARN,
            )
        )
    cases = metrics.get("cases")
    cases = cases if isinstance(cases, Mapping) else {}
    fixed = [str(key) for key, case in cases.items() if isinstance(case, Mapping) and case.get("fixed_since_baseline")]
    if fixed:
        lines.append((f"{len(fixed)} fixed since the baseline (failed there, pass now):", _GOOD))
        lines.extend((f"  {key}", _GOOD) for key in fixed[:MAX_FIXED_SHOWN])
        if len(fixed) > MAX_FIXED_SHOWN:
            lines.append((f"  (+{len(fixed) - MAX_FIXED_SHOWN} more)", _GOOD))
    return lines


RUN_FILES = (RunFolder.METRICS, RunFolder.RESULTS, RunFolder.REPORT)


def run_line(run_dir: Path) -> tuple[str, Markup]:
    """``run: DIR (metrics.json, results.jsonl, report.html)``: the files there now (a full disk may have kept one
    from being written: it is named as not written, in yellow)."""
    written = [name for name in RUN_FILES if (run_dir / name).is_file()]
    missing = [name for name in RUN_FILES if name not in written]
    if not missing:
        return f"run: {run_dir} ({', '.join(written)})", {}
    return f"run: {run_dir} ({', '.join(written) or 'nothing'} written; not written: {', '.join(missing)})", _WARN


def _comparison_lines(comparison: Comparison) -> list[tuple[str, Markup]]:
    """The baseline verdict, the cases compared, and what regressed (red) or flipped."""
    from pytest_rageval.gate.comparison_text import format_comparison

    if comparison.refused:
        head = "baseline refused (use --rageval-ignore-invariants to compare anyway):"
        return [(head, _BAD)] + [(f"  {line}", _RED) for line in comparison.invariant_differences]
    status = comparison.status
    lines: list[tuple[str, Markup]] = [
        (f"baseline: {status.upper() if status != 'no regression' else status}", _GOOD if comparison.passed else _BAD)
    ]
    failing = set(comparison.coverage_failures) | {f"not compared: {comparison.not_compared}"}
    flipped = False
    for line in format_comparison(comparison):
        if not _is_notable(line, comparison):
            continue
        if line.startswith("cases that flipped"):
            flipped = line.startswith("cases that flipped from pass to fail")
        elif not line.startswith("  "):
            flipped = False
        bad = line.endswith("REGRESSED") or line in failing or flipped
        lines.append(("  " + line, _RED if bad else {}))
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
    line = f"judge: {label}; cache hits {cache.get('hits', 0)}, misses {cache.get('misses', 0)}"
    if info.get("heuristic") and not cost.get("judge_total_tokens") and not cost.get("judge_total_usd"):
        return line  # an offline heuristic spends nothing: no "0 tokens, ~$0.0000"
    return f"{line}; {cost.get('judge_total_tokens', 0)} tokens, ~${cost.get('judge_total_usd', 0.0):.4f}"


def _is_notable(line: str, comparison: Comparison) -> bool:
    """Keep regressed metrics, flipped cases and messages; drop unremarkable deltas."""
    names = {d.name for d in comparison.deltas if not d.regressed}
    return not any(line.startswith(f"{name}:") for name in names)
