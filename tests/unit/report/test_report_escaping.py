"""Every text of a case record reaches the HTML reports escaped (report.html and the pytest-html extra): a
hostile string in each field, each one numbered, must come out as text, never as markup."""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from browser import Page, without_own_script

from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.registry import Metric
from pytest_rageval.gate.aggregate import aggregate
from pytest_rageval.report.html import Html, escape, render_report, write_report
from pytest_rageval.report.pytest_html import case_html


class Hostile:
    """Numbered hostile strings, remembering which field each went to."""

    def __init__(self) -> None:
        self.fields: dict[int, str] = {}
        self._numbers = itertools.count()

    def __call__(self, field: str) -> str:
        number = next(self._numbers)
        self.fields[number] = field
        return f"<script>alert({number})</script><img src=x onerror=alert({number})>'\"&x{number}"

    def escaped(self, number: int) -> str:
        return html.escape(
            f"<script>alert({number})</script><img src=x onerror=alert({number})>'\"&x{number}", quote=True
        )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "img") or any(name.startswith("on") for name, _ in attrs):
            self.found.append(tag)


def injected(page: str) -> list[str]:
    """The elements of ``page`` a payload made: script, img, or any with an event-handler attribute."""
    parser = _Tags()
    parser.feed(page)
    return parser.found


def hostile_record(h: Hostile) -> dict[str, Any]:
    chunk = {
        "rank": h("chunk.rank"),
        "rel_path": h("chunk.rel_path"),
        "heading_path": [h("chunk.heading_path")],
        "score_final": h("chunk.score_final"),
        "text": h("chunk.text"),
        "gold": True,
    }
    return {
        "key": h("key"),
        "test_case_id": h("test_case_id"),
        "file": h("file"),
        "line": h("line"),
        "category": h("category"),
        "tags": [h("tags")],
        "outcome": "failed",
        "answerable": False,
        "question": h("question"),
        "reference_answer": h("reference_answer"),
        "expected_key_facts": [h("expected_key_facts")],
        "answer": h("answer"),
        "abstain_reason": h("abstain_reason"),
        "error": {"kind": h("error.kind"), "message": h("error.message")},
        "notes": [h("notes")],
        "misses": [
            {
                "metric": h("misses.metric"),
                "value": h("misses.value"),
                "threshold": h("misses.threshold"),
                "op": h("misses.op"),
            }
        ],
        "metrics": {h("metrics.name"): h("metrics.value")},
        "thresholds": {h("thresholds.name"): h("thresholds.value")},
        "retrieved_chunks": [chunk],
        "references": [{**chunk, "rel_path": None, "doc_id": h("references.doc_id")}],
        "judge": {
            h("judge.metric"): {
                "score": h("judge.score"),
                "reasoning": h("judge.reasoning"),
                "supported_claims": [h("judge.supported_claims")],
                "unsupported_claims": [h("judge.unsupported_claims")],
                h("judge.extra_key"): h("judge.extra"),
            },
            "correctness": h("judge.verdict_text"),
        },
        "params": {h("params.name"): h("params.value")},
        "difficulty": h("difficulty"),
        "runs": h("runs"),
        "latency": {"total_ms": h("latency")},
        "cost": h("cost"),
        "judge_cache": h("judge_cache"),
        "flaky": True,
        "invalid_line": h("invalid_line"),
    }


#: Fields a case's detail does not show (the label is ``key`` when there is one).
NOT_SHOWN = {"test_case_id", "invalid_line"}
#: In a case's summary line (report.html), not in its detail (the pytest-html extra).
SUMMARY = {"key", "category", "tags"}
#: Shown inside ``k=v`` text (params, latency): escaped as part of it, not alone.
INSIDE_TEXT = {"params.name", "params.value", "latency"}


def test_every_record_field_renders_escaped() -> None:
    h = Hostile()
    record = hostile_record(h)
    metrics = {
        "run_id": h("metrics.run_id"),
        "timestamp": h("metrics.timestamp"),
        "judge": {"name": h("metrics.judge")},
    }
    record_fields = {f for f in h.fields.values() if not f.startswith(("metrics.", "title"))}
    pages = [
        (render_report(metrics, [record], title=h("title")), record_fields),
        (case_html(record), record_fields - SUMMARY),
    ]
    for page, fields in pages:
        assert not injected(without_own_script(page) if "<script>" in page else page)
        shown = {h.fields[n] for n in h.fields if h.escaped(n) in page}
        assert fields - NOT_SHOWN - INSIDE_TEXT <= shown, sorted(fields - NOT_SHOWN - INSIDE_TEXT - shown)
        for field in INSIDE_TEXT:
            number = next(n for n, f in h.fields.items() if f == field)
            assert f"&lt;script&gt;alert({number})&lt;/script&gt;" in page
    page = render_report(metrics, [record], title=h("title"))
    assert {"metrics.run_id", "metrics.timestamp", "metrics.judge", "title"} <= {
        h.fields[n] for n in h.fields if h.escaped(n) in page
    }


def test_a_fragment_escapes_what_joins_it_and_keeps_markup() -> None:
    text = "<b>'\"&"
    assert Html("<td>{}</td>").format(text) == "<td>&lt;b&gt;&#x27;&quot;&amp;</td>"
    assert Html("<p>") + text == "<p>&lt;b&gt;&#x27;&quot;&amp;"
    assert Html("").join([Html("<i>"), text]) == "<i>&lt;b&gt;&#x27;&quot;&amp;"
    assert Html("<td>{}</td>").format(Html("<b>ok</b>")) == "<td><b>ok</b></td>"  # markup is not escaped twice
    assert escape(escape(text)) == escape(text) == html.escape(text, quote=True)
    assert escape(None) == "" and isinstance(escape(3), Html)
    assert re.fullmatch(r"<td>3\.142</td>", Html("<td>{:.3f}</td>").format(3.14159))
    assert type(case_html({"question": text})) is str  # a plain str: xdist's serializer takes no str subclass


@pytest.mark.usefixtures("needs_chromium")
def test_hostile_values_stay_text_in_the_browser_through_filters_and_sorting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every field hostile, plus a registered metric with a hostile name (aggregate row, threshold, sort option):
    in Chromium no dialog opens and no element is made, on load and after filtering by the hostile tag and
    category, searching and sorting by the hostile metric; the dropdowns show the hostile values as text."""
    h = Hostile()
    evil_metric = h("registered metric")
    monkeypatch.setattr(registry, "METRICS", list(registry.METRICS))
    registry.register(
        Metric(
            name=evil_metric,
            kind="deterministic",
            scale=(0.0, 1.0),
            direction="higher",
            applies_to="all",
            aggregate_kind="avg",
            score=lambda case, response, ctx: 0.5,
            default_threshold=0.25,
        )
    )
    record = hostile_record(h)
    record["metrics"][evil_metric] = 0.5
    records = [record, {**hostile_record(h), "outcome": "passed", "metrics": {evil_metric: 0.75}}]
    metrics = {"run_id": h("metrics.run_id"), "judge": {"name": h("metrics.judge")}, **aggregate(records)}
    deltas = [
        {"name": f"{evil_metric}_avg", "old": 0.9, "new": 0.625, "delta": -0.275, "tolerance": 0.05, "regressed": True}
    ]
    page = tmp_path / "report.html"
    write_report(page, metrics, records, deltas=deltas, title=h("title"))
    assert not injected(without_own_script(page.read_text(encoding="utf-8")))
    tag, category = records[0]["tags"][0], records[0]["category"]
    counts = """(() => { const own = document.scripts.length === 1 && document.scripts[0].textContent.includes('rv-filters');
        const handlers = Array.from(document.querySelectorAll('*')).filter(e => e.getAttributeNames().some(a => a.startsWith('on')));
        return [own, document.images.length, handlers.length]; })()"""
    with Page(tmp_path / "profile") as tab:
        tab.open(page, urlencode({"t": tag, "c": category, "s": f"m:{evil_metric}", "d": "desc"}))
        assert tab.js(counts) == [True, 0, 0]
        assert tab.js("document.getElementById('rv-t').value") == tag  # the hostile tag, chosen from the hash
        options = tab.js(
            "Array.from(document.querySelectorAll('#rv-t option, #rv-c option, #rv-s option'), o => o.textContent)"
        )
        assert f"{tag} (1)" in options and f"{category} (1)" in options and evil_metric in options
        assert tab.js("document.querySelectorAll('.case:not([hidden])').length") == 1
        tab.js(
            "const q = document.getElementById('rv-q'); q.value = '<img src=x onerror=alert(1)>';"
            "document.getElementById('rv-filters').dispatchEvent(new Event('submit', {cancelable: true}))"
        )
        tab.js("document.getElementById('rv-x').click()")
        assert tab.js(counts) == [True, 0, 0]
        assert tab.js("document.querySelectorAll('.case:not([hidden])').length") == 2
        assert tab.js("document.title").startswith("<script>")
        dialogs = [e for e in tab.events if e.get("method") == "Page.javascriptDialogOpening"]
        assert not dialogs


def test_the_policy_allows_only_the_pages_own_script_by_its_hash() -> None:
    """The CSP names the sha256 of the one script the page carries, and nothing that would let another run."""
    page = render_report({}, [hostile_record(Hostile())])
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert csp is not None
    policy = dict(part.strip().split(" ", 1) for part in html.unescape(csp.group(1)).split(";"))
    assert policy["default-src"] == "'none'"
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode()
    assert policy["script-src"] == f"'sha256-{digest}'"  # no 'unsafe-inline', no host, no nonce
    assert "innerHTML" not in scripts[0] and "insertAdjacentHTML" not in scripts[0]
