"""Tests of the standalone report.html (pytest_rageval.report.html)."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import re
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import dump_dom, without_own_script

from pytest_rageval.report import html
from pytest_rageval.report.cards import DETAIL_LIMIT, joined, render_cases
from pytest_rageval.report.html import render_report, write_report
from pytest_rageval.runs.store import RunStore

PAYLOAD = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def _record(key: str, outcome: str, **extra: object) -> dict[str, Any]:
    record = {
        "key": f"eval_sets/demo.jsonl::{key}",
        "test_case_id": key,
        "file": "eval_sets/demo.jsonl",
        "line": 1,
        "category": "factual",
        "tags": ["demo"],
        "answerable": True,
        "question": f"What about {key}?",
        "answer": f"Answer for {key}.",
        "retrieved_chunks": [],
        "references": [],
        "metrics": {"recall_at_k": 1, "mrr": 1.0},
        "thresholds": {"recall_at_k": 1},
        "misses": [],
        "outcome": outcome,
        "error": None,
        "latency": {"total_ms": 12.5},
        "judge": {},
    }
    record.update(extra)
    return record


@pytest.fixture
def records() -> list[dict[str, Any]]:
    passed = _record("pass-001", "passed")
    failed = _record(
        "fail-001",
        "failed",
        reference_answer="The embeddings use granite-278m.",
        expected_key_facts=["granite-278m"],
        metrics={"recall_at_k": 0, "mrr": 0.25, "groundedness": 1.5},
        thresholds={"recall_at_k": 1, "mrr": 0.5, "groundedness": 3},
        misses=[
            {"metric": "mrr", "value": 0.25, "threshold": 0.5, "op": ">="},
            {"metric": "groundedness", "value": 1.5, "threshold": 3, "op": ">="},
        ],
        retrieved_chunks=[
            {"rank": 1, "rel_path": "notes/other.md", "heading_path": "# Other", "score_final": 0.91, "text": "x"},
            {
                "rank": 2,
                "rel_path": "notes/setup.md",
                "heading_path": ["# Setup", "## Embeddings"],
                "score_final": 0.8,
                "text": "granite-278m embeddings",
                "gold": True,
            },
        ],
        judge={
            "groundedness": {
                "score": 1.5,
                "reasoning": "The answer invents a model name.",
                "unsupported_claims": ["uses ada-002"],
            }
        },
    )
    errored = _record(
        "err-001",
        "error",
        metrics={},
        error={"kind": "timeout", "message": "RAG call timed out after 30s"},
    )
    skipped = _record("skip-001", "skipped", metrics={})
    evil = _record(
        "evil-001",
        "passed",
        question=f"Q {PAYLOAD}",
        answer=f"A {PAYLOAD}",
        tags=[PAYLOAD],
        category=PAYLOAD,
        retrieved_chunks=[
            {
                "rank": 1,
                "rel_path": f"{PAYLOAD}.md",
                "heading_path": [f"# H {PAYLOAD}"],  # a list: its segment is not split at ">"
                "score_final": 0.5,
                "text": f"chunk {PAYLOAD}",
                "gold": True,
            }
        ],
        judge={"groundedness": {"score": 4, "reasoning": f"R {PAYLOAD}", "unsupported_claims": [PAYLOAD]}},
    )
    evil_err = _record(
        "evil-err",
        "error",
        question=PAYLOAD,
        error={"kind": "http", "message": f"500 {PAYLOAD}"},
    )
    # passed first in input order on purpose: the report must reorder
    return [passed, evil, skipped, failed, errored, evil_err]


@pytest.fixture
def metrics() -> dict[str, Any]:
    return {
        "run_id": "20240101-000003",
        "timestamp": "2024-01-01T00:00:03Z",
        "complete": True,
        "config_hash": "cfg",
        "eval_set_hash": "evs",
        "total_tests": 5,
        "passed": 2,
        "failed": 1,
        "errors": 2,
        "skipped": 1,
        "invalid_lines": 0,
        "judge": {"name": "lexical", "heuristic": True},
        "aggregate_metrics": {
            "recall_at_k_avg": 0.5,
            "mrr_avg": 0.625,
            "groundedness_avg": None,
            "abstention_accuracy": None,
            "latency": {"p50_ms": 10.0, "p95_ms": 20.0, "total_ms": 60.0},
            "cost": {"judge_total_tokens": 0, "judge_total_usd": 0.0},
            "operational_metrics": {"error_rate": 0.4, "timeout_rate": 0.2, "empty_response_rate": 0.0},
            "judge_cache": {"hits": 3, "misses": 1},
        },
        "by_category": {
            "factual": {
                "n": 4,
                "passed": 2,
                "failed": 1,
                "errors": 1,
                "recall_at_k_avg": 0.5,
                "groundedness_avg": None,
            },
            PAYLOAD: {"n": 1, "passed": 0, "failed": 0, "errors": 1, "recall_at_k_avg": None, "groundedness_avg": None},
        },
        "by_tag": {"demo": {"n": 5, "passed": 2, "failed": 1, "errors": 2, "mrr_avg": 0.625}},
        "cases": {},
    }


def _history(n: int) -> list[dict[str, Any]]:
    return [
        {
            "run_id": f"20240101-00000{i}",
            "timestamp": f"2024-01-01T00:00:0{i}Z",
            "aggregate_metrics": {"recall_at_k_avg": 0.5 + 0.1 * i, "mrr_avg": 0.6, "groundedness_avg": None},
        }
        for i in range(n)
    ]


def test_failed_and_errored_come_first(metrics: dict[str, Any], records: list[dict[str, Any]]) -> None:
    page = render_report(metrics, records)
    first_bad = min(page.index("fail-001"), page.index("err-001"), page.index("evil-err"))
    last_bad = max(page.index("fail-001"), page.index("err-001"), page.index("evil-err"))
    assert last_bad < page.index("pass-001")
    assert last_bad < page.index("skip-001")
    assert first_bad < page.index("evil-001")
    # failed/errored <details> are open, the others collapsed
    assert re.search(r'<details class="case o-failed" id="case-\d+" open[ >]', page)
    assert re.search(r'<details class="case o-passed" id="case-r\d+"[ >]', page)


def test_misses_and_case_detail(metrics: dict[str, Any], records: list[dict[str, Any]]) -> None:
    page = render_report(metrics, records)
    fail = page[page.index('class="case o-failed"') :]
    fail = fail[: fail.index("</details>")]
    assert "Missed metrics" in fail
    assert re.search(
        r"<code>mrr</code></td><td class=\"num\">0\.250</td><td class=\"num\">&gt;=</td>"
        r"<td class=\"num\">0\.500</td>",
        fail,
    )
    assert re.search(r"<code>groundedness</code></td><td class=\"num\">1\.500</td>.*?<td class=\"num\">3</td>", fail)
    assert "The embeddings use granite-278m." in fail  # expected answer
    assert "granite-278m</li>" in fail  # key facts
    assert "Setup &gt; Embeddings" in fail  # a list of segments with # marks, shown as matching reads it
    assert fail.count(">gold</span>") == 1
    assert "The answer invents a model name." in fail
    assert "uses ada-002" in fail
    assert "RAG call timed out after 30s" in page
    assert "timeout" in page


def test_header_aggregates_and_breakdowns(metrics: dict[str, Any], records: list[dict[str, Any]]) -> None:
    deltas = [
        {
            "name": "recall_at_k_avg",
            "old": 0.9,
            "new": 0.5,
            "delta": -0.4,
            "tolerance": 0.05,
            "regressed": True,
            "ci_low": -0.6,
            "ci_high": -0.2,
        },
        {
            "name": "mrr_avg",
            "old": 0.6,
            "new": 0.625,
            "delta": 0.025,
            "tolerance": 0.05,
            "regressed": False,
            "ci_low": None,
            "ci_high": None,
        },
        {"name": "groundedness_avg", "old": 3.5, "new": None, "delta": None, "tolerance": 0.25, "regressed": False},
        {"name": "latency_p95_ms", "old": 18.0, "new": 20.0, "delta": 2.0, "tolerance": None, "regressed": False},
        {"name": "error_rate", "old": 0.0, "new": 0.4, "delta": 0.4, "tolerance": 0.02, "regressed": False},
    ]
    page = render_report(metrics, records, deltas=deltas)
    assert "20240101-000003" in page and "2024-01-01T00:00:03Z" in page
    assert "lexical" in page and ">heuristic</span>" in page
    assert "incomplete run" not in page
    aggregate = page[page.index('id="aggregate"') : page.index("</table>", page.index('id="aggregate"'))]
    # each metric once, under the gate's name; the lexical judge's zero cost is no row; cache hits are
    assert aggregate.count("<code>latency_p95_ms</code>") == 1 and aggregate.count("<code>error_rate</code>") == 1
    assert "judge_total_tokens" not in aggregate and "judge_total_usd" not in aggregate
    assert "judge_cache.hits" in aggregate
    assert "<th>threshold</th>" in aggregate and "<th>95% CI</th>" in aggregate
    assert re.search(
        r"<code>recall_at_k_avg</code></td><td class=\"num\">0\.500</td><td class=\"num\">&gt;= 1</td>", aggregate
    )  # the registry's default per-case threshold
    assert page.count("REGRESSED") == 1
    assert "-0.400" in page and "[-0.600, -0.200]" in page and "+0.025" in page
    # a metric null in this run but not in the baseline shows a dash, not 0; one null in both is no row
    assert re.search(r"<code>groundedness_avg</code></td><td class=\"num\">\u2014</td>", aggregate)
    assert "abstention_accuracy" not in aggregate
    # breakdowns: groundedness_avg is null in every group -> no column
    breakdown = page[page.index('id="breakdown"') : page.index('id="trends"')]
    assert "recall_at_k_avg" in breakdown and "mrr_avg" in breakdown
    assert "groundedness_avg" not in breakdown
    assert "<th>errors</th>" in breakdown

    incomplete = render_report({**metrics, "complete": False}, records)
    assert "incomplete run" in incomplete


def test_script_payload_is_escaped_everywhere(metrics: dict[str, Any], records: list[dict[str, Any]]) -> None:
    history = [
        *_history(2),
        {"run_id": PAYLOAD, "timestamp": "2024-01-01T00:00:02Z", "aggregate_metrics": {"recall_at_k_avg": 0.1}},
    ]
    page = render_report({**metrics, "run_id": PAYLOAD}, records, history=history, title=PAYLOAD)
    assert "<script" not in without_own_script(page).lower()
    assert ESCAPED in page
    # question, answer, chunk text, heading, error message, reasoning all present (escaped)
    for text in (f"Q {ESCAPED}", f"A {ESCAPED}", f"chunk {ESCAPED}", f"H {ESCAPED}", f"500 {ESCAPED}", f"R {ESCAPED}"):
        assert text in page
    assert "Content-Security-Policy" in page
    assert "default-src &#x27;none&#x27;" in page or "default-src 'none'" in page


def test_attribute_quotes_escaped(metrics: dict[str, Any]) -> None:
    record = _record("q", "failed", tags=['x" onmouseover="alert(1)'], question="a'b\"c")
    page = render_report(metrics, [record])
    assert 'onmouseover="alert' not in page
    assert "&quot; onmouseover=&quot;alert(1)" in page


def test_no_external_resources(metrics: dict[str, Any], records: list[dict[str, Any]]) -> None:
    page = render_report(metrics, records, history=_history(3))
    assert not re.search(r"""(?:src|href|action|xlink:href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page and "url(" not in page
    assert "<script" not in without_own_script(page).lower()


def test_trends_chart(metrics: dict[str, Any], records: list[dict[str, Any]]) -> None:
    page = render_report(metrics, records, history=_history(3))
    assert "<svg" in page
    trends = page[page.index('id="trends"') : page.index('id="others"')]
    assert trends.count("<svg") == 2  # recall_at_k_avg and mrr_avg; groundedness has no points
    assert "<title>20240101-000001, 2024-01-01 00:00 UTC: 0.600</title>" in trends
    assert "4 runs of eval set" in trends  # 3 earlier runs + the current one
    assert "polyline" in trends

    # the current run already in history is not counted twice
    again = render_report(metrics, records, history=[*_history(3), metrics])
    assert "4 runs of eval set" in again

    alone = render_report(metrics, records)
    assert "<svg" not in alone


def test_empty_inputs_render() -> None:
    page = render_report({}, [])
    assert page.startswith("<!DOCTYPE html>")
    assert "</html>" in page


def test_many_cases_render(metrics: dict[str, Any]) -> None:
    records = [
        _record(
            f"c{i:05d}",
            "failed" if i % 7 == 0 else "passed",
            retrieved_chunks=[{"rank": r, "rel_path": "a.md", "text": "t" * 200} for r in range(1, 6)],
        )
        for i in range(5000)
    ]
    page = render_report(metrics, iter(records))
    failed = sum(1 for i in range(5000) if i % 7 == 0)
    # Every failed case in full; the other cases in full up to the limit, then light cards (question, answer, metrics).
    assert page.count('<details class="case o-failed"') == failed
    assert page.count('<details class="case o-passed" id=') == 500
    assert page.count('<details class="case o-passed light"') == 5000 - failed - 500


def test_run_store_history(tmp_path: Path) -> None:
    for name, ts in (
        ("run-b", "2024-01-02T00:00:00Z"),
        ("run-a", "2024-01-01T00:00:00Z"),
        ("run-c", "2024-01-02T00:00:00Z"),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(
            json.dumps({"run_id": name, "timestamp": ts, "aggregate_metrics": {}}), encoding="utf-8"
        )
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "metrics.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "array").mkdir()
    (tmp_path / "array" / "metrics.json").write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    (tmp_path / "latest").write_text("run-c", encoding="utf-8")

    runs = RunStore(tmp_path).history()
    assert [r["run_id"] for r in runs] == ["run-a", "run-b", "run-c"]
    assert [r["run_id"] for r in RunStore(tmp_path).history(limit=2)] == ["run-b", "run-c"]
    assert RunStore(tmp_path / "missing").history() == []


def test_write_report_is_atomic(tmp_path: Path, metrics: dict[str, Any], records: list[dict[str, Any]]) -> None:
    target = tmp_path / "run" / "report.html"
    write_report(target, metrics, records, history=_history(2))
    text = target.read_text(encoding="utf-8")
    assert text == render_report(metrics, records, history=_history(2))
    assert os.listdir(target.parent) == ["report.html"]
    assert target.stat().st_mode & 0o644 == 0o644  # not mkstemp's private 0600

    write_report(target, {**metrics, "run_id": "second"}, [])
    assert "second" in target.read_text(encoding="utf-8")
    assert os.listdir(target.parent) == ["report.html"]


def test_write_report_failure_leaves_no_temp(
    tmp_path: Path, metrics: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.html"
    target.write_text("old", encoding="utf-8")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_report(target, metrics, [])
    assert target.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["report.html"]


@pytest.mark.usefixtures("needs_chromium")
def test_headless_browser_shows_payload_as_text(
    tmp_path: Path, metrics: dict[str, Any], records: list[dict[str, Any]]
) -> None:
    page = tmp_path / "report.html"
    write_report(page, metrics, records, history=_history(3))
    dom = dump_dom(page, tmp_path / "profile")
    assert ESCAPED in dom  # serialised back as text, i.e. it was parsed as text
    assert "<script" not in without_own_script(dom).lower()
    assert "<svg" in dom
    assert "fail-001" in dom


def test_beyond_the_detail_limit_other_cases_are_light_cards(
    metrics: dict[str, Any], records: list[dict[str, Any]]
) -> None:
    passed = next(r for r in records if r.get("outcome") == "passed")
    failed = next(r for r in records if r.get("outcome") == "failed")
    many = [dict(passed, key=f"p{i}") for i in range(DETAIL_LIMIT + 50)] + [failed]
    page = render_report(metrics, many)
    assert page.count('<details class="case o-passed" id=') == DETAIL_LIMIT
    light = page.split('<details class="case o-passed light"')[1:]
    assert len(light) == 50
    # a light card: closed, filterable (data-*), question, answer and metric values, no chunks or verdicts
    card = light[-1][: light[-1].index("</details>")]
    assert ' data-outcome="passed"' in card and 'data-id="p549"' in card and " open" not in card.split(">")[0]
    assert "What about pass-001?" in card and "Answer for pass-001." in card and "recall_at_k 1 · mrr 1" in card
    assert "Retrieved chunks" not in card and "<table" not in card
    assert page.count('<details class="case o-failed"') == 1
    assert page.index('<details class="case o-failed"') < page.index('<details class="case o-passed"')


def test_write_report_spools_the_cards_and_writes_the_bytes_of_render_report(
    tmp_path: Path, metrics: dict[str, Any], records: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(html, "_SPOOL_IN_MEMORY", 4096)  # every section's cards go to a temporary file

    def many() -> Iterator[dict[str, Any]]:
        for i in range(DETAIL_LIMIT + 3000):
            yield _record(
                f"c{i:04d}",
                "failed" if i % 9 == 0 else "error" if i % 13 == 0 else "passed",
                question=f"Q{i} ü {PAYLOAD}",
            )

    target = tmp_path / "report.html"
    tracemalloc.start()
    try:
        write_report(target, metrics, itertools.chain(records, many()), history=_history(2))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    page = target.read_bytes()
    assert page == render_report(metrics, [*records, *many()], history=_history(2)).encode("utf-8")
    assert os.listdir(tmp_path) == ["report.html"]
    assert peak < len(page) / 4, f"peak {peak:,} bytes for a page of {len(page):,}"  # never the whole page in memory


def test_flipped_sections_from_spooled_cards_equal_the_listed_ones() -> None:
    records = [_record(f"c{i}", "failed" if i % 2 else "passed") for i in range(40)]
    flips: dict[str, Any] = {
        "to_fail": [f"eval_sets/demo.jsonl::c{i}" for i in (1, 3)],
        "to_pass": ["eval_sets/demo.jsonl::c4"],
    }
    listed = render_cases(records, **flips)
    with contextlib.ExitStack() as stack:
        spooled = render_cases(records, **flips, store=lambda: html.SpooledCards(stack))
        for section in ("flipped", "failing", "others"):
            out = io.BytesIO()
            for piece in getattr(spooled, section):
                piece.copy_to(out) if isinstance(piece, html.SpooledCards) else out.write(str(piece).encode("utf-8"))
            assert out.getvalue().decode("utf-8") == str(joined(getattr(listed, section)))
    assert "Flipped since the baseline (3)" in str(joined(listed.flipped))


def test_history_leaves_out_each_runs_cases_and_takes_known_runs_as_given(tmp_path: Path) -> None:
    for name, ts in (("run-a", "2024-01-01T00:00:00Z"), ("run-b", "2024-01-02T00:00:00Z")):
        (tmp_path / name).mkdir()
        data = {
            "run_id": name,
            "timestamp": ts,
            "aggregate_metrics": {"mrr_avg": 0.5},
            "cases": {"s.jsonl::a": {"outcome": "passed"}},
        }
        (tmp_path / name / "metrics.json").write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "run-c").mkdir()
    (tmp_path / "run-c" / "metrics.json").write_text("{being written", encoding="utf-8")  # not read: it is known
    known = {
        "run_id": "run-c",
        "timestamp": "2024-01-03T00:00:00Z",
        "aggregate_metrics": {"mrr_avg": 0.7},
        "cases": {"x": {}},
    }
    skipped: list[str] = []
    runs = RunStore(tmp_path).history(skipped=skipped, known={"run-c": known})
    assert [r["run_id"] for r in runs] == ["run-a", "run-b", "run-c"] and skipped == []
    assert all("cases" not in r for r in runs) and runs[-1]["aggregate_metrics"] == {"mrr_avg": 0.7}
    assert "cases" in known  # what was given is left as it is
    assert [r["run_id"] for r in RunStore(tmp_path).history(skipped=skipped)] == ["run-a", "run-b"] and len(
        skipped
    ) == 1
