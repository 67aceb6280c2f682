"""report.html in a real headless Chromium (tests/helpers/browser.py's DevTools driver): the filter bar on a 5,000-case
page, the layout at 1280 px, the page without JavaScript. Hostile values through the filters: test_report_escaping.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from browser import Page

from pytest_rageval.gate.aggregate import aggregate
from pytest_rageval.report.html import write_report

pytestmark = pytest.mark.usefixtures("needs_chromium")

TAGS = ("alpha", "beta", "gamma", "delta", "epsilon")


def _case(i: int) -> dict[str, Any]:
    outcome = "error" if i % 50 == 0 else "failed" if i % 9 == 0 else "passed"
    return {
        "key": f"eval_sets/big.jsonl::case-{i:05d}",
        "test_case_id": f"case-{i:05d}",
        "file": "eval_sets/big.jsonl",
        "line": i + 1,
        "category": f"cat-{i % 4}",
        "tags": [TAGS[i % 5], TAGS[(i // 5) % 5]],
        "answerable": True,
        "question": f"question {i}?",
        "answer": f"answer {i} " + ("needle " if i % 1000 == 7 else "") + "x" * 60,
        "retrieved_chunks": [{"rank": 1, "rel_path": "a.md", "text": "chunk text", "gold": True}],
        "metrics": {}
        if outcome == "error"
        else {"recall_at_k": int(outcome == "passed"), "mrr": round((i * 37 % 101) / 100, 2)},
        "thresholds": {"recall_at_k": 1},
        "misses": [],
        "outcome": outcome,
        "error": {"kind": "timeout", "message": "timed out"} if outcome == "error" else None,
    }


def _write(folder: Path, records: list[dict[str, Any]], **kwargs: object) -> Path:
    page = folder / "report.html"
    write_report(page, {"run_id": "r1", **aggregate(records)}, records, **kwargs)  # type: ignore[arg-type]
    return page


VISIBLE = "Array.from(document.querySelectorAll('.case:not([hidden])'), e => e.dataset.id)"


def test_a_5000_case_report_filters_to_the_failed_cases_of_one_tag(tmp_path: Path) -> None:
    records = [_case(i) for i in range(5000)]
    page = _write(tmp_path, records)
    expected = [r["test_case_id"] for r in records if r["outcome"] == "failed" and "gamma" in r["tags"]]
    assert 50 < len(expected) < 500
    with Page(tmp_path / "profile") as tab:
        tab.open(page, "o=failed&t=gamma")  # a shared link: the view is in the URL hash
        shown = tab.js(VISIBLE)
        assert isinstance(shown, list) and sorted(s.split("::")[1] for s in shown) == expected
        assert tab.js("document.getElementById('rv-n').textContent") == f"{len(expected)} of 5000 cases shown"
        assert tab.js("document.getElementById('rv-filters').hidden") is False
        # the index of failed and errored cases lists the shown ones
        assert tab.js("document.querySelectorAll('ul.index li:not([hidden])').length") == len(expected)
        # the options come from the data, with counts
        assert tab.js("Array.from(document.getElementById('rv-t').options, o => o.textContent)") == [
            "all",
            "alpha (2000)",
            "beta (2000)",
            "delta (2000)",
            "epsilon (2000)",
            "gamma (2000)",
        ]

        # as a user: clear, then pick an outcome and sort by a metric, highest first
        tab.js("document.getElementById('rv-x').click()")
        assert len(tab.js(VISIBLE)) == 5000
        tab.js("""(() => { const set = (id, v) => { const el = document.getElementById(id); el.value = v;
                   el.dispatchEvent(new Event('change')); };
                   set('rv-o', 'error'); set('rv-s', 'm:mrr'); set('rv-d', 'desc'); })()""")
        assert tab.js("location.hash") == "#o=error&s=m%3Amrr&d=desc"
        errored = tab.js(VISIBLE)
        assert isinstance(errored, list) and len(errored) == 100
        # the other cases' section says that none of its cases is shown
        assert tab.js(
            "Array.from(document.querySelectorAll('p.muted:not([hidden])'), p => p.textContent).filter(t => t.startsWith('No case here'))"
        ) == ["No case here matches the filters."]
        # errored cases have no metrics: they keep their page order; sorting moves the cards in the page
        assert errored == sorted(errored)
        tab.js(
            "document.getElementById('rv-o').value = ''; document.getElementById('rv-o').dispatchEvent(new Event('change'))"
        )
        mrr = tab.js("Array.from(document.querySelectorAll('.case'), e => e.dataset.m)")
        assert isinstance(mrr, list)
        values = [float(m.split("mrr=")[1]) for m in mrr[:4000] if "mrr=" in m]
        failed_first = sum(1 for r in records if r["outcome"] in ("failed", "error"))
        # each section (failed and errored first, then the others) is sorted on its own
        others = values[failed_first - 100 :]
        assert others == sorted(others, reverse=True)
        # each card names the value it is sorted by; errored cases have none
        labels = tab.js("Array.from(document.querySelectorAll('.case'), e => e.querySelector('.sortval').textContent)")
        assert (
            isinstance(labels, list)
            and labels[-1] == f"mrr {float(mrr[-1].split('mrr=')[1]):g}"
            and "mrr \u2014" in labels
        )

        # the text search looks in question, answer and id
        tab.js(
            "document.getElementById('rv-x').click(); const q = document.getElementById('rv-q'); q.value = 'NEEDLE';"
            "document.getElementById('rv-filters').dispatchEvent(new Event('submit', {cancelable: true}))"
        )
        assert sorted(s.split("::")[1] for s in tab.js(VISIBLE)) == [
            "case-00007",
            "case-01007",
            "case-02007",
            "case-03007",
            "case-04007",
        ]


def test_no_horizontal_scroll_at_1280_px(tmp_path: Path) -> None:
    long = "x" * 400
    records = [
        {
            **_case(i),
            "key": f"eval_sets/{long}.jsonl::{long}-{i}",
            "category": f"category-{long}-{i % 3}",
            "tags": [f"tag-{i}-{long}", f"tag{i % 40}"],
            "answer": "y" * 3000,
            "retrieved_chunks": [
                {
                    "rank": 1,
                    "rel_path": f"{long}/{long}.md",
                    "heading_path": [long, long],
                    "text": "z" * 1000,
                    "gold": True,
                }
            ],
        }
        for i in range(60)
    ]
    metrics = {"run_id": long, "timestamp": long, "config_hash": long, **aggregate(records)}
    for i, group in enumerate(metrics["by_tag"].values()):
        group.update({f"a_rather_long_metric_name_number_{c}_avg": (i * c % 10) / 10 for c in range(24)})
    metrics["aggregate_metrics"][f"{long}_avg"] = 0.5
    page = tmp_path / "report.html"
    deltas = [
        {
            "name": f"{long}_avg",
            "old": 0.7,
            "new": 0.5,
            "delta": -0.2,
            "tolerance": 0.05,
            "regressed": True,
            "ci_low": -0.3,
            "ci_high": -0.1,
        }
    ]
    write_report(
        page,
        metrics,
        records,
        deltas=deltas,
        history=[{"run_id": long, "timestamp": "2024-01-01T00:00:00Z", "aggregate_metrics": {"mrr_avg": 0.4}}],
    )
    with Page(tmp_path / "profile", width=1280) as tab:
        tab.open(page)
        # every card open and laid out (content-visibility would skip the cards off screen)
        tab.js(
            "document.querySelectorAll('details').forEach(d => d.open = true);"
            "const s = document.createElement('style'); s.textContent = 'details.case{content-visibility:visible!important}';"
            "document.head.appendChild(s); void document.body.offsetHeight"
        )
        assert tab.js("window.innerWidth") == 1280
        width = tab.js("document.documentElement.scrollWidth")
        assert isinstance(width, int) and width <= 1280, width
        # the wide breakdown scrolls inside its own box
        wide = tab.js("Math.max(...Array.from(document.querySelectorAll('table'), t => t.scrollWidth - t.clientWidth))")
        assert isinstance(wide, (int, float)) and wide > 0


def test_the_page_works_without_javascript(tmp_path: Path) -> None:
    records = [_case(i) for i in range(600)]
    page = _write(tmp_path, records)
    with Page(tmp_path / "profile", javascript=False) as tab:
        tab.open(page, "o=failed")
        assert tab.js("document.getElementById('rv-filters').hidden") is True  # no dead controls
        assert tab.js("document.getElementById('rv-o').options.length") == 1  # the script did not run
        assert tab.js("document.querySelectorAll('.case').length") == 600
        assert tab.js("document.querySelectorAll('.case[hidden]').length") == 0
        # a light card (beyond the 500 shown in full) still opens on its question and answer
        text = tab.js(
            "const d = document.querySelector('details.light'); d.open = true; d.scrollIntoView(); d.innerText"
        )
        assert isinstance(text, str) and "question" in text and "answer" in text
        assert json.loads(json.dumps(tab.js("document.querySelector('details.light').dataset.outcome"))) == "passed"


def test_a_link_to_a_card_lands_on_it_below_the_filter_bar(tmp_path: Path) -> None:
    """The CI summary links cards by id: the card opens at the top of the window, not under the sticky filter bar,
    also past hundreds of open failed cards above it."""
    records = [_case(i) for i in range(2000)]
    page = _write(tmp_path, records)
    with Page(tmp_path / "profile") as tab:
        tab.open(page, "case-150")
        where = tab.js(
            "[document.getElementById('case-150').getBoundingClientRect().top, document.getElementById('rv-filters').getBoundingClientRect().bottom]"
        )
        assert isinstance(where, list)
        top, bar = where
        assert bar <= top < bar + 60, where
