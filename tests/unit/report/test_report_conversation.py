"""A conversation in the reports: the terminal message names the failing turn, its question, the history it was
sent and what missed; report.html shows the thread of turns, every text from outside escaped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser import Page, without_own_script

from pytest_rageval.gate.aggregate import aggregate
from pytest_rageval.report.html import render_report, write_report
from pytest_rageval.report.terminal import format_failure

EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def turn(number: int, question: str, outcome: str, answer: str, history: list[dict[str, str]]) -> dict[str, Any]:
    misses = [{"metric": "recall_at_k", "value": 0, "threshold": 1, "op": ">="}] if outcome == "failed" else []
    return {
        "turn": number,
        "question": question,
        "history": history,
        "outcome": outcome,
        "answer": answer,
        "answerable": True,
        "metrics": {"recall_at_k": 0 if misses else 1, "mrr": 0.0 if misses else 1.0},
        "thresholds": {"recall_at_k": 1},
        "misses": misses,
        "retrieved_chunks": [{"position": 1, "rel_path": f"doc{number}.md", "heading_path": "# H", "gold": not misses}],
        "judge": {},
    }


def conversation() -> dict[str, Any]:
    first = [{"role": "user", "content": "What is STEP?"}, {"role": "assistant", "content": EVIL}]
    turns = [
        turn(1, "What is STEP?", "passed", EVIL, []),
        turn(2, f"How much was allocated to it? {EVIL}", "failed", "Nothing.", first),
        turn(3, "Did its vote pass?", "passed", "Yes.", [*first, {"role": "user", "content": "x"}]),
    ]
    return {
        "key": "eval_sets/chat.jsonl::step",
        "test_case_id": "step",
        "file": "eval_sets/chat.jsonl",
        "line": 1,
        "category": "conversation",
        "tags": ["chat"],
        "answerable": True,
        "question": "What is STEP?",
        "history": "live",
        "turns": turns,
        "outcome": "failed",
        "metrics": {"recall_at_k": 2 / 3, "mrr": 2 / 3},
        "misses": [{**turns[1]["misses"][0], "turn": 2}],
        "answer": "Yes.",
    }


def test_the_failure_message_names_the_turn_its_question_and_the_history_sent() -> None:
    text = format_failure(conversation())
    lines = text.splitlines()
    assert lines[0] == "[step] conversation of 3 turns (live history): turn 2 failed"
    assert lines[1].startswith("--- turn 2: How much was allocated to it?")
    assert lines[2:5] == ["history sent:", "  user: What is STEP?", f"  assistant: {EVIL}"]
    assert "  recall_at_k = 0 (needs >= 1)" in lines
    assert "Did its vote pass?" not in text  # a passing turn is left out


def test_report_html_shows_the_thread_escaped(tmp_path: Path) -> None:
    record = conversation()
    page = render_report({"run_id": "r", **aggregate([record])}, [record])
    assert page.count('<details class="turn o-') == 3
    assert "conversation of 3 turns, live history" in page
    assert "turn 2: recall_at_k" in page  # the case's misses name their turn
    assert '<h3 id="by-turn">By turn</h3>' in page  # metrics.json by_turn as a breakdown
    rest = without_own_script(page)
    assert "<script" not in rest and "<img" not in rest and "&lt;script&gt;alert(1)" in rest


@pytest.mark.usefixtures("needs_chromium")
def test_the_thread_runs_no_script_in_the_browser(tmp_path: Path) -> None:
    record = conversation()
    page = tmp_path / "report.html"
    write_report(page, {"run_id": "r", **aggregate([record])}, [record])
    with Page(tmp_path / "profile") as tab:
        tab.open(page)
        checks = """(() => [document.scripts.length, document.images.length,
            document.querySelectorAll('details.turn').length, document.querySelectorAll('details.turn[open]').length])()"""
        assert tab.js(checks) == [1, 0, 3, 1]  # only the page's own script; the failing turn opens
        assert not [e for e in tab.events if e.get("method") == "Page.javascriptDialogOpening"]
