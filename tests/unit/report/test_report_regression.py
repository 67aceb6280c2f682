"""report.html and pytest-html after a regression against a baseline (issue 11 items 1, 4, 5): the verdict and
the flipped cases first, each card's "Since baseline" section, everything from outside kept as text.

One scenario, as a user meets it: a run made the baseline (``--rageval-update-baseline`` into a folder, which
keeps its results.jsonl), the RAG (a loopback ask server) regresses, the next run under ``-n 2`` with
pytest-html fails the gate. Pages are checked in headless Chromium at 1280x800.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk
from browser import chromium, dump_dom
from needs import need_module

from pytest_rageval.cli import main as rageval
from pytest_rageval.report.baseline import BaselineCases, GateOutcome
from pytest_rageval.report.browse import render_script
from pytest_rageval.report.cards import CaseAnchors, case_anchors
from pytest_rageval.report.html import render_report
from pytest_rageval.report.since import MAX_DIFF_WORDS, chunk_moves, word_diff
from pytest_rageval.runs.folder import RecordIndex

PWN = "document.body.setAttribute('data-pwned','{}')"
XSS_ANSWER_OLD = f'Old <img src=x onerror="{PWN.format("old")}"> answer'
XSS_ANSWER_NEW = f"New <script>{PWN.format('new')}</script> answer"
XSS_TEXT = f'<img src=x onerror="{PWN.format("chunk")}">'
XSS_HEADING = f'# <svg onload="{PWN.format("heading")}">'
GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}
IDS = ["keep", "drop", "fix", "evil", "bad"]


class Rag:
    """Run 1: everything but ``fix`` and ``bad`` finds the gold chunk. Run 2 (``regressed``): ``drop`` and ``evil``
    lose it (retrieval reordered, a new chunk), ``fix`` finds it, ``drop`` answers differently."""

    def __init__(self) -> None:
        self.regressed = False

    def __call__(self, body: dict[str, Any]) -> Any:
        case = str(body.get("question")).removeprefix("q-")
        gold, b, c, d = (
            chunk("docs/a.md", "# A", None),
            chunk("docs/b.md", "# B", None),
            chunk("docs/c.md", "# C", None),
            chunk("docs/d.md", "# D", None),
        )
        text = "The answer is in section A of the guide."
        hits = [gold, b, c]
        if case in ("fix", "bad"):
            hits = [b, c]
        if case == "evil":
            text = XSS_ANSWER_OLD
            c = chunk("docs/c.md", XSS_HEADING, None, text=XSS_TEXT)
            hits = [gold, b, c]
        if self.regressed:
            if case == "drop":
                text, hits = "The answer is in section B of the manual, I think.", [c, b, d]
            elif case == "evil":
                text, hits = XSS_ANSWER_NEW, [c, b]
            elif case == "fix":
                hits = [gold, b]
        ranked = [{**h, "rank": i} for i, h in enumerate(hits, start=1)]
        return answer(text, ranked, references=ranked[:1])


@pytest.fixture
def regression(pytester: pytest.Pytester) -> dict[str, Any]:
    """The baseline run, then the regressed run under -n 2 with pytest-html; paths and the result."""
    need_module("pytest_html")
    lines = [json.dumps({"id": i, "question": f"q-{i}", "gold_supports": [GOLD]}) for i in IDS]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(lines) + "\n"})
    rag = Rag()
    with AskServer(rag) as server:
        common = [
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "-p",
            "no:cacheprovider",
            "--rageval-baseline=base",
        ]
        first = pytester.runpytest(*common, "--rageval-update-baseline")
        assert (pytester.path / "base" / "results.jsonl").is_file(), first.stdout.str()  # kept for old answers
        rag.regressed = True
        result = pytester.runpytest(*common, "-n", "2", "--html=pytest-report.html", "--self-contained-html")
    run = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    return {
        "root": pytester.path,
        "run": run,
        "result": result,
        "page": (run / "report.html").read_text(encoding="utf-8"),
    }


def _card(page: str, key: str) -> str:
    """The <details> card of case ``key`` (its summary names it)."""
    for match in re.finditer(
        r'<details class="case[^"]*" id="([^"]+)"[^>]*>(.*?)</details>\s*(?=<details|<h[23]|<div class="case|<p)',
        page,
        re.S,
    ):
        summary = match.group(2).split("</summary>")[0]
        if f"<code>eval_sets/s.jsonl::{key}</code>" in summary:
            return match.group(0)
    raise AssertionError(f"no card of {key}")


def _layout(page: Path, tmp: Path, selectors: dict[str, str]) -> dict[str, tuple[float, float]]:
    """(top, bottom) in CSS pixels of the first element of each selector, laid out in Chromium at 1280x800.

    The page forbids scripts (its CSP); a copy without that meta tag gets a probe script that writes the
    boxes into an attribute, read back from ``--dump-dom``.
    """
    probe = (
        "<script>var out={};"
        + "".join(
            f"(function(){{var e=document.querySelector({json.dumps(sel)});if(e){{var r=e.getBoundingClientRect();"
            f"out[{json.dumps(name)}]=[r.top,r.bottom];}}}})();"
            for name, sel in selectors.items()
        )
        + "document.body.setAttribute('data-layout',JSON.stringify(out));</script>"
    )
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text(encoding="utf-8"))
    copy = tmp / "layout.html"
    copy.write_text(text.replace("</body>", probe + "</body>"), encoding="utf-8")
    cmd = [
        str(chromium()),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={tmp / 'profile-layout'}",
        "--window-size=1280,800",
        "--dump-dom",
        copy.as_uri(),
    ]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    found = re.search(r'data-layout="([^"]*)"', dom)
    assert found, dom[-500:]
    return {k: tuple(v) for k, v in json.loads(html.unescape(found.group(1))).items()}


def _screenshot(page: Path, tmp: Path) -> Path:
    out = tmp / "first-screen.png"
    cmd = [
        str(chromium()),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={tmp / 'profile-shot'}",
        "--window-size=1280,800",
        f"--screenshot={out}",
        page.as_uri(),
    ]
    subprocess.run(cmd, capture_output=True, timeout=120)
    return out


@pytest.mark.usefixtures("needs_chromium")
def test_after_a_regression(regression: dict[str, Any], tmp_path: Path) -> None:
    """One scenario (two pytester runs), checked three ways."""
    check_the_page_opens_with_the_verdict_and_the_flipped_cases(regression, tmp_path)
    check_pytest_html_under_xdist_shows_the_since_section_and_the_flipped_list(regression, tmp_path)
    check_rageval_report_rebuilds_the_same_page_and_a_lone_metrics_json_gives_deltas_only(regression, tmp_path)


def check_the_page_opens_with_the_verdict_and_the_flipped_cases(regression: dict[str, Any], tmp_path: Path) -> None:
    result, page, run = regression["result"], regression["page"], regression["run"]
    assert result.ret == 1, result.stdout.str()
    # page order = nav order: verdict, flipped (pass -> fail, then fail -> pass), other failures, tables, trends, rest
    order = [
        'id="verdict"',
        'id="flipped"',
        'id="flipped-to-fail"',
        'id="flipped-to-pass"',
        'id="failing"',
        'id="aggregate"',
        'id="breakdown"',
        'id="trends"',
        'id="others"',
    ]
    positions = [page.index(marker) for marker in order]
    assert positions == sorted(positions)
    nav = re.search(r'<p class="muted nav">(.*?)</p>', page).group(1)  # type: ignore[union-attr]
    assert re.findall(r'href="#([^"]+)"', nav) == [
        "verdict",
        "flipped",
        "failing",
        "aggregate",
        "breakdown",
        "trends",
        "others",
    ]
    verdict = page[page.index('id="verdict"') : page.index("</section>", page.index('id="verdict"'))]
    assert "gate FAILED" in verdict and "regression: recall_at_k_avg" not in verdict  # the table says it
    row = re.search(r'<tr class="regressed"><td><code>recall_at_k_avg</code></td>(.*?)</tr>', verdict)
    assert row and row.group(1) == (
        '<td class="num">0.600</td><td class="num">0.400</td><td class="num">-0.200</td>'  # old, new, delta,
        '<td class="num">[-0.800, +0.400]</td><td class="num">0.050</td>'
    ), verdict  # interval, tolerance
    assert "2 flipped pass &rarr; fail" in verdict and "1 flipped fail &rarr; pass" in verdict
    flipped = page[page.index('id="flipped-to-fail"') : page.index('id="flipped-to-pass"')]
    assert "s.jsonl::drop" in flipped and "s.jsonl::evil" in flipped and "s.jsonl::fix" not in flipped
    assert "s.jsonl::fix" in page[page.index('id="flipped-to-pass"') : page.index('id="failing"')]
    assert (
        "s.jsonl::bad" not in page[page.index('id="failing"') : page.index('id="aggregate"')]
    )  # failed in both: a known failure
    bad = page[page.index('data-id="eval_sets/s.jsonl::bad"') :]
    assert 'data-outcome="known failure"' in page and "known failure since " in bad[: bad.index("</summary>")]

    drop = _card(page, "drop")
    since = drop[drop.index("<h4>Since baseline</h4>") :]
    assert re.search(
        r"outcome <span class=\"badge b-passed\">passed</span> &rarr; <span class=\"badge b-failed\">failed</span>",
        since,
    )
    assert re.search(
        r'<tr class="changed"><td><code>recall_at_k</code></td><td class="num">1</td><td class="num">0</td>'
        r'<td class="num">-1\.000</td>',
        since,
    )
    assert "<del>A </del>" in since and "<ins>B </ins>" in since and "<del>guide.</del>" in since  # the word diff
    assert "<ins>manual, I think.</ins>" in since
    moves = re.findall(
        r'<td class="mv-[a-z]+">([^<]+)</td><td>(?:<span class="badge b-gold">gold</span>)?</td><td class="mono">([^<]+)',
        since,
    )
    assert moves == [("up 2", "docs/c.md"), ("same", "docs/b.md"), ("new", "docs/d.md"), ("dropped", "docs/a.md")]
    assert re.search(r'<tr class="gold">.*?dropped</td><td><span class="badge b-gold">gold</span>', since)

    # the links of the CI summary's flipped cases land on these cards (same ids)
    ids = case_anchors(
        _records(run),
        {"eval_sets/s.jsonl::drop", "eval_sets/s.jsonl::fix"},
        to_fail=["eval_sets/s.jsonl::drop", "eval_sets/s.jsonl::evil"],
        to_pass=["eval_sets/s.jsonl::fix"],
    )
    assert f'id="{ids["eval_sets/s.jsonl::drop"]}"' in drop and ids["eval_sets/s.jsonl::fix"].startswith("case-f")

    # the first screen in Chromium: the verdict and the list of flipped cases are on it
    box = _layout(
        run / "report.html",
        tmp_path,
        {
            "verdict": "#verdict",
            "flipped": "#flipped",
            "to_fail_list": "#flipped-to-fail + ul.index",
            "aggregate": "#aggregate",
        },
    )
    assert box["verdict"][0] >= 0 and box["verdict"][1] <= 800, box
    assert box["flipped"][1] <= 800 and box["to_fail_list"][1] <= 800, box
    assert box["aggregate"][0] > box["to_fail_list"][1], box
    shot = _screenshot(run / "report.html", tmp_path)
    assert shot.is_file() and shot.stat().st_size > 10_000

    # old and new answers, chunk texts and headings with markup stay text: no script ran, no element was made
    evil = _card(page, "evil")
    assert html.escape(XSS_ANSWER_NEW, quote=True) not in page or "<script>document" not in page
    outside = page.replace(str(render_script()), "")  # the page's own script (the filter bar), by its CSP hash
    assert "<script>" not in outside and "<img src=x" not in page and "<svg onload" not in page
    assert "&lt;script&gt;" in evil and "<del>" in evil and "<ins>" in evil
    dom = dump_dom(run / "report.html", tmp_path / "profile")
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]
    assert "<img" not in dom and "<svg onload" not in dom and "<script>document" not in dom
    assert "onerror=" in html.unescape(dom)  # shown as text


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line.strip()]


def check_rageval_report_rebuilds_the_same_page_and_a_lone_metrics_json_gives_deltas_only(
    regression: dict[str, Any], tmp_path: Path
) -> None:
    run, page = regression["run"], regression["page"]
    (run / "report.html").unlink()
    assert rageval(["report", str(run)]) == 0
    assert (run / "report.html").read_text(encoding="utf-8") == page  # the verdict and since sections as recorded

    lone = tmp_path / "lone.json"
    shutil.copyfile(regression["root"] / "base" / "metrics.json", lone)
    assert rageval(["report", str(run), "--baseline", str(lone)]) == 0
    rebuilt = (run / "report.html").read_text(encoding="utf-8")
    drop = _card(rebuilt, "drop")
    assert "gate FAILED" in rebuilt and "<h4>Since baseline</h4>" in drop and "-1.000" in drop
    assert "Old answer and retrieved chunks not available: the baseline has no results.jsonl beside" in drop
    assert "<del>" not in drop


def check_pytest_html_under_xdist_shows_the_since_section_and_the_flipped_list(
    regression: dict[str, Any], tmp_path: Path
) -> None:
    page = (regression["root"] / "pytest-report.html").read_text(encoding="utf-8")
    blob = json.loads(html.unescape(re.search(r'data-jsonblob="([^"]*)"', page).group(1)))["tests"]  # type: ignore[union-attr]
    extras = [
        e["content"] for entry in blob["eval_sets/s.jsonl::drop"] for e in entry["extras"] if e["format_type"] == "html"
    ]
    assert len(set(extras)) == 1
    drop = extras[0]
    assert "<h4>Since baseline</h4>" in drop and "<del>A </del>" in drop and "<ins>B </ins>" in drop
    summary = page[page.index('id="rageval-summary"') :]
    assert re.search(
        r'flipped pass \u2192 fail \(2\):</p><ul class="flipped to-fail"><li><code>eval_sets/s.jsonl::drop</code></li>'
        r"<li><code>eval_sets/s.jsonl::evil</code></li></ul>",
        summary,
    ), summary[:3000]
    assert "flipped fail \u2192 pass (1)" in summary
    dom = dump_dom(regression["root"] / "pytest-report.html", tmp_path / "profile-pytest-html")
    assert "Since baseline" in dom and "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]
    assert "<script>document" not in dom and "<svg onload" not in dom


# -- without a baseline, and the parts on their own ------------------------------------------------------------


def _record(key: str, outcome: str, answer_text: str = "an answer") -> dict[str, Any]:
    return {
        "key": f"s.jsonl::{key}",
        "test_case_id": key,
        "outcome": outcome,
        "answer": answer_text,
        "metrics": {"mrr": 1.0 if outcome == "passed" else 0.0},
    }


def test_without_a_baseline_the_page_keeps_its_parts_and_says_not_gated() -> None:
    records = [_record("a", "passed"), _record("b", "failed")]
    page = render_report({"run_id": "r1", "aggregate_metrics": {"mrr_avg": 0.5}}, records)
    verdict = page[page.index('id="verdict"') : page.index("</section>")]
    assert "not gated (no baseline)" in verdict and "<table" not in verdict
    assert 'id="flipped"' not in page and "Since baseline" not in page and 'href="#flipped"' not in page
    order = [
        page.index(m)
        for m in ("<h1>", 'id="verdict"', 'id="failing"', 'id="aggregate"', 'id="breakdown"', 'id="others"')
    ]
    assert order == sorted(order)
    assert "Failed and errored cases (1)" in page and 'id="case-0" open' in page and 'id="case-r0"' in page


def test_a_refused_baseline_shows_the_masked_reason_only() -> None:
    outcome = GateOutcome(
        failed=True, refused=True, reason="baseline refused: base.json: mrr_avg is *** (must be a number)"
    )
    page = render_report({"run_id": "r1"}, [_record("a", "passed")], outcome=outcome)
    verdict = page[page.index('id="verdict"') : page.index("</section>")]
    assert "baseline REFUSED" in verdict and "mrr_avg is ***" in verdict


def test_word_diff_marks_words_escapes_and_is_bounded() -> None:
    old, new, cut = word_diff("a <b> c d", "a <i> c d e")
    assert (
        str(old) == "a <del>&lt;b&gt; </del>c d" and str(new) == "a <ins>&lt;i&gt; </ins>c d <ins>e</ins>" and not cut
    )
    long_old = " ".join(f"w{i}" for i in range(MAX_DIFF_WORDS + 50))
    long_new = long_old.replace("w3 ", "x3 ")
    old, new, cut = word_diff(long_old, long_new)
    assert cut and "<del>w3 </del>" in old and "<ins>x3 </ins>" in new and str(new).endswith(f"w{MAX_DIFF_WORDS + 49}")


def test_chunk_moves() -> None:
    a, b, c, d = ({"rel_path": p, "heading_path": ["# H"]} for p in "abcd")
    rows = chunk_moves([{**a, "gold": True}, b, c], [c, a, d])
    assert [(now, before, move, ch["rel_path"], gold) for now, before, move, ch, gold in rows] == [
        (1, 3, "up 2", "c", False),
        (2, 1, "down 1", "a", True),
        (3, None, "new", "d", False),
        (None, 2, "dropped", "b", False),
    ]


def test_chunks_are_the_same_by_anchor_and_text_whatever_their_volatile_ids() -> None:
    """A framework gives every node a new random id on each index build: an unchanged system moves nothing."""

    def chunks(build: str) -> list[dict[str, Any]]:
        return [
            {
                "chunk_id": f"{build}-{i}",
                "rel_path": "hr/leave.md",
                "heading_path": "# Leave > ## Sick days",
                "text": f"Paragraph {i} of the sick-day rules.",
                "rank": i,
            }
            for i in (1, 2, 3, 4)
        ]

    rows = chunk_moves(chunks("uuid-a"), chunks("uuid-b"))
    assert [(now, before, move) for now, before, move, _, _ in rows] == [
        (1, 1, "same"),
        (2, 2, "same"),
        (3, 3, "same"),
        (4, 4, "same"),
    ]
    edited = chunks("uuid-c")
    edited[0]["text"] = "Rewritten: sick days need a note after three days."
    moves = [move for _, _, move, _, _ in chunk_moves(chunks("uuid-a"), edited)]
    assert moves == ["new", "same", "same", "same", "dropped"]  # same anchor, other text: another chunk


def test_case_anchors_place_flipped_cases_first_and_record_index_reads_one_record(tmp_path: Path) -> None:
    anchors = CaseAnchors(to_fail=["s.jsonl::x"], to_pass=["s.jsonl::y"])
    assert anchors.place(_record("y", "passed")) == ("to_pass", "case-f0")
    assert anchors.place(_record("z", "failed")) == ("failing", "case-0")
    assert anchors.place(_record("x", "failed")) == ("to_fail", "case-f1")
    assert anchors.place(_record("w", "passed")) == ("other", "case-r0")
    (tmp_path / "results.jsonl").write_text(
        "".join(json.dumps(_record(k, "passed", f"answer {k}")) + "\n" for k in "abc")
    )
    index = RecordIndex(tmp_path / "results.jsonl")
    assert len(index) == 3 and index.get("s.jsonl::b")["answer"] == "answer b" and index.get("s.jsonl::q") is None  # type: ignore[index]
    (tmp_path / "metrics.json").write_text(
        json.dumps(
            {
                "run_id": "b1",
                "aggregate_metrics": {},
                "cases": {"s.jsonl::b": {"outcome": "passed", "metrics": {"mrr": 1.0}}},
            }
        )
    )
    cases = BaselineCases.load(tmp_path)
    assert cases is not None and cases.run_id == "b1" and cases.record("s.jsonl::b")["answer"] == "answer b"  # type: ignore[index]


def test_judge_verdicts_show_as_fields_and_raw_only_when_unparsed() -> None:
    from pytest_rageval.report.cards import render_case_body

    record = {
        "key": "s.jsonl::j",
        "outcome": "failed",
        "cost": {"judge_tokens": 0, "judge_cost_usd": 0.0},
        "judge": {
            "groundedness": {
                "metric": "groundedness",
                "score": 0.25,
                "reasoning": "<b>half</b>",
                "unsupported_claims": ["<i>x</i>"],
                "raw": '{"score": 0.25}',
                "prompt_tokens": 0,
                "cost_usd": 0.0,
                "attempts": 1,
            },
            "abstention": {"metric": "abstention", "label": True, "raw": "yes", "prompt_tokens": 12},
            "correctness": {"metric": "correctness", "score": None, "raw": "<script>no json</script>"},
        },
    }
    body = str(render_case_body(record))
    assert "<code>groundedness</code> score <strong>0.250</strong>" in body and "&lt;b&gt;half&lt;/b&gt;" in body
    assert (
        "<code>abstention</code> label <strong>yes</strong>" in body and "<dt>prompt_tokens</dt>" in body
    )  # spent: shown
    assert (
        body.count("prompt_tokens") == 1
        and "cost_usd" not in body
        and "attempts" not in body
        and "judge_tokens" not in body
    )
    assert (
        body.count("raw answer") == 1 and '<details class="raw"><summary>' in body
    )  # only the unparsed one, collapsed
    assert "&lt;script&gt;no json&lt;/script&gt;" in body and "{&quot;score" not in body


def test_a_refused_baseline_in_a_run_masks_secrets_on_the_page_and_when_rebuilt(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(
        ".jsonl", **{"eval_sets/s": json.dumps({"id": "c1", "question": "q-c1", "gold_supports": [GOLD]}) + "\n"}
    )
    pytester.makeini("[pytest]\nrageval_headers =\n    X-Api-Key: ${RAG_KEY}\n")
    monkeypatch.setenv("RAG_KEY", "s3cr3t-key")
    baseline = {"aggregate_metrics": {"mrr_avg": "http://u:hunter22@h/?token=tok9876", "recall_at_k_avg": "s3cr3t-key"}}
    (pytester.path / "base.json").write_text(json.dumps(baseline))
    with AskServer(Rag()) as server:
        result = pytester.runpytest(
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            "-p",
            "no:cacheprovider",
            "--rageval-baseline=base.json",
        )
    assert result.ret == 1
    run = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    page = (run / "report.html").read_text(encoding="utf-8")
    verdict = page[page.index('id="verdict"') : page.index("</section>")]
    assert "baseline REFUSED" in verdict and "mrr_avg is" in verdict
    for secret in ("hunter22", "tok9876", "s3cr3t-key"):
        assert secret not in page and secret not in (run / "metrics.json").read_text()
    (run / "report.html").unlink()
    monkeypatch.delenv("RAG_KEY")
    assert rageval(["report", str(run)]) == 0
    assert (run / "report.html").read_text(encoding="utf-8") == page
