"""report.html's trend charts (report/trends.py): each metric on its own fixed scale, dated and committed runs,
the baseline as a line, one eval set's whole runs only, everything from files escaped; and the run's commit."""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from browser import dump_dom

from pytest_rageval.report.browse import render_script
from pytest_rageval.report.html import render_report, write_report
from pytest_rageval.runs.commit import run_commit, short_commit, tree_dirty

EVAL_SET = "e" * 64


def _run(i: int, **aggregates: Any) -> dict[str, Any]:
    extra = aggregates.pop("extra", {})
    return {
        "run_id": f"2024010{i}-120000-aaaaa{i}",
        "timestamp": f"2024-01-0{i}T12:0{i}:00.000+00:00",
        "git_commit": f"{i}bc1234" + "0" * 33,
        "complete": True,
        "partial": False,
        "all_error": False,
        "eval_set_hash": EVAL_SET,
        "aggregate_metrics": aggregates,
        **extra,
    }


def _charts(page: str) -> dict[str, ET.Element]:
    """Each chart's SVG parsed as XML, by the metric it charts."""
    trends = page[page.index('id="trends"') :]
    found = {}
    for svg in re.findall(r"<svg .*?</svg>", trends, re.S):
        root = ET.fromstring(svg)
        found[root.findtext("title") or ""] = root
    return found


def _ticks(svg: ET.Element) -> dict[str, float]:
    """Tick label -> the y of its gridline."""
    return {t.text or "": float(t.get("y", 0)) - 4 for t in svg.iter("text") if t.get("class") == "tick"}


def _value_at(svg: ET.Element, y: float) -> float:
    """The value a y position stands for, read back from the axis' own labels (lowest and highest)."""
    ticks = sorted(((float(label), pos) for label, pos in _ticks(svg).items()))
    (low, y_low), (high, y_high) = ticks[0], ticks[-1]
    return low + (high - low) * (y_low - y) / (y_low - y_high)


def _points(svg: ET.Element) -> list[tuple[float, str]]:
    return [(float(c.get("cy", 0)), c.findtext("title") or "") for c in svg.iter("circle")]


def test_a_rate_spans_0_to_1_and_a_judge_score_0_to_5() -> None:
    history = [_run(i, recall_at_k_avg=0.90 + 0.01 * i, groundedness_avg=3.5 + 0.25 * i) for i in (1, 2, 3)]
    current = _run(4, recall_at_k_avg=0.88, groundedness_avg=4.0)
    charts = _charts(render_report(current, [], history=history))

    recall = charts["recall_at_k_avg"]
    assert set(_ticks(recall)) == {"0", "0.25", "0.5", "0.75", "1"}  # not 0.88 .. 0.93: a small dip stays small
    values = [_value_at(recall, cy) for cy, _ in _points(recall)]
    assert values == pytest.approx([0.91, 0.92, 0.93, 0.88], abs=0.005)

    grounded = charts["groundedness_avg"]
    assert set(_ticks(grounded)) == {"0", "1", "2", "3", "4", "5"}
    assert [_value_at(grounded, cy) for cy, _ in _points(grounded)] == pytest.approx([3.75, 4.0, 4.25, 4.0], abs=0.02)


def test_runs_are_labelled_with_date_and_short_commit_and_the_baseline_is_a_line() -> None:
    history = [_run(i, mrr_avg=0.7) for i in (1, 2, 3)]
    current = _run(4, mrr_avg=0.6)
    baseline = _run(2, mrr_avg=0.8)
    page = render_report(current, [], history=history, baseline=baseline)
    mrr = _charts(page)["mrr_avg"]

    labels = [t.text for t in mrr.iter("text") if t.get("class") == "run"]
    assert labels[:2] == ["2024-01-01", "12:01 1bc1234"]  # the oldest run, left
    assert labels[-2:] == ["2024-01-04", "12:04 4bc1234"]  # this run, right
    titles = [title for _, title in _points(mrr)]
    assert titles[-1] == "20240104-120000-aaaaa4, 2024-01-04 12:04 UTC, commit 4bc1234: 0.600"

    line = mrr.find("g[@class='baseline']")
    assert line is not None
    drawn = line.find("line")
    assert drawn is not None and drawn.get("stroke-dasharray")
    assert drawn.get("y1") == drawn.get("y2")
    assert _value_at(mrr, float(drawn.get("y1", 0))) == pytest.approx(0.8, abs=0.005)
    assert [t.text for t in line.iter("text")] == ["baseline 0.800"]
    assert "2024-01-02 12:02 2bc1234" in (line.findtext("title") or "")

    # a chart without the baseline's metric draws no line; no baseline, no line
    assert "baseline" not in (render_report(current, [], history=history).split('id="trends"')[1])


def test_only_whole_runs_of_one_eval_set_are_charted_and_the_note_says_what_was_left_out() -> None:
    history = [
        _run(1, mrr_avg=0.7),
        _run(2, mrr_avg=0.1, extra={"eval_set_hash": "f" * 64}),
        _run(3, mrr_avg=0.2, extra={"partial": True}),
        _run(5, mrr_avg=0.0, extra={"all_error": True}),
        _run(6, mrr_avg=0.72),
    ]
    page = render_report(
        _run(7, mrr_avg=0.71), [], history=history, baseline=_run(8, mrr_avg=0.5, extra={"eval_set_hash": "f" * 64})
    )
    titles = [title for _, title in _points(_charts(page)["mrr_avg"])]
    assert [t.split(",")[0] for t in titles] == [
        "20240101-120000-aaaaa1",
        "20240106-120000-aaaaa6",
        "20240107-120000-aaaaa7",
    ]
    note = re.search(r'<p class="muted">3 runs of eval set eeeeeeeeeeee[^<]*</p>', page)
    assert note is not None
    for said in ("1 all-error run", "1 partial run", "1 run of other eval sets", "the baseline (another eval set)"):
        assert said in note.group(0)
    assert 'class="baseline"' not in page

    # this run of another eval set than the earlier ones: its own series only (one point: no chart yet)
    other = render_report(
        _run(7, mrr_avg=0.71, extra={"eval_set_hash": "f" * 64}),
        [],
        history=[_run(1, mrr_avg=0.7), _run(2, mrr_avg=0.7)],
    )
    assert "<svg" not in other.split('id="trends"')[1]
    assert "2 runs of other eval sets" in other


def test_run_ids_commits_and_dates_from_files_are_escaped() -> None:
    evil = "<script>alert(1)</script>"
    history = [
        _run(
            1,
            mrr_avg=0.7,
            extra={"run_id": evil, "git_commit": f"<img src=x onerror=alert(2)>{evil}", "timestamp": evil},
        )
    ]
    baseline = _run(2, mrr_avg=0.8, extra={"run_id": f"b{evil}", "git_commit": evil, "timestamp": evil})
    page = render_report(_run(3, mrr_avg=0.6), [], history=history, baseline=baseline)
    assert "<script" not in page.replace(str(render_script()), "") and "<img" not in page  # only the page's own script
    mrr = _charts(page)["mrr_avg"]  # still well-formed: parsed as XML
    titles = [title for _, title in _points(mrr)]
    assert titles[0] == f"{evil}: 0.700"  # the run id as text; no date nor commit from what is neither
    assert [t.text for t in mrr.iter("text") if t.get("class") == "run"][:2] == ["run 1", "2024-01-03"]
    assert mrr.find("g[@class='baseline']/title") is not None
    assert mrr.findtext("g[@class='baseline']/title") == f"baseline b{evil}: 0.800"


def test_the_run_s_commit_comes_from_the_ci_then_git(tmp_path: Path) -> None:
    assert run_commit(tmp_path, {"GITHUB_SHA": "ABCDEF0123456789" + "0" * 24}) == "abcdef0123456789" + "0" * 24
    assert run_commit(tmp_path, {"GITHUB_SHA": "not a commit"}) is None  # and tmp_path is no repository
    assert run_commit(tmp_path / "missing", {}) is None
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert run_commit(repo, {}) == head
    assert short_commit(head) == head[:7]
    assert short_commit("<b>") is None and short_commit(None) is None
    assert tree_dirty(repo) is False and tree_dirty(tmp_path) is None
    (repo / "set.jsonl").write_text("{}\n")
    assert tree_dirty(repo) is False  # untracked files (run folders, caches) are no change to the source
    subprocess.run([*git, "add", "set.jsonl"], check=True)
    assert tree_dirty(repo) is True


def test_a_run_records_its_commit_and_its_report_charts_the_baseline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
    pytester.makefile(
        ".jsonl", **{"eval_sets/s": '{"id": "a", "question": "q", "gold_supports": [{"rel_path": "a.md"}]}\n'}
    )
    pytester.makeconftest("""
        import pytest
        @pytest.fixture(scope="session")
        def rageval_client():
            return lambda question, params: {"answer": "a", "references": [],
                                             "debug": {"retrieved_chunks": [{"rel_path": "a.md"}]}}
    """)
    for more in (["--rageval-update-baseline"], []):
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=none", "-p", "no:cacheprovider", "--rageval-baseline", "base.json", *more
        )
        assert result.ret == 0, result.stdout.str()
    # the second run is `latest` (run ids made within one second do not sort by time)
    second = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    metrics = json.loads((second / "metrics.json").read_text())
    assert (
        metrics["git_commit"]
        == json.loads((second / "config.json").read_text())["git_commit"]
        == "0123456789abcdef0123456789abcdef01234567"
    )
    # the second run's report charts both runs, labelled with the commit, and the baseline it was compared with
    recall = _charts((second / "report.html").read_text(encoding="utf-8"))["recall_at_k_avg"]
    assert len(_points(recall)) == 2 and all("commit 0123456" in title for _, title in _points(recall))
    assert recall.find("g[@class='baseline']") is not None


@pytest.mark.usefixtures("needs_chromium")
def test_the_chart_is_visible_in_a_browser(tmp_path: Path) -> None:
    """The real page's chart, laid out by Chromium: a visible box, its points inside it and on top."""
    report = tmp_path / "report.html"
    write_report(
        report,
        _run(4, mrr_avg=0.6),
        [],
        history=[_run(i, mrr_avg=0.7) for i in (1, 2, 3)],
        baseline=_run(2, mrr_avg=0.8),
    )
    page = report.read_text(encoding="utf-8")
    # The page forbids scripts (CSP); this copy of it, only to measure, allows one probe script at the end.
    probe = tmp_path / "probe.html"
    probe.write_text(
        re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page).replace("</body>", PROBE + "</body>"),
        encoding="utf-8",
    )
    dom = dump_dom(probe, tmp_path / "profile")
    found: re.Match[str] | None = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found is not None, dom[-2000:]
    seen = json.loads(found.group(1).replace("&quot;", '"'))
    assert seen["charts"] >= 1
    assert seen["width"] > 300 and seen["height"] > 150 and seen["visible"]
    assert seen["points"] == 4 and seen["points_inside"] == 4 and seen["points_on_top"] == 4
    assert seen["baseline_inside"]


PROBE = """<script>
const svg = document.querySelector('#trends ~ .chart svg');
svg.scrollIntoView();
const box = svg.getBoundingClientRect();
const inside = r => r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom;
const dots = [...svg.querySelectorAll('circle')];
const style = getComputedStyle(svg);
const out = {
  charts: document.querySelectorAll('.chart svg').length, width: box.width, height: box.height,
  visible: style.display !== 'none' && style.visibility === 'visible' && box.width > 0,
  points: dots.length,
  points_inside: dots.filter(d => inside(d.getBoundingClientRect())).length,
  points_on_top: dots.filter(d => { const r = d.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return hit === d || d.contains(hit); }).length,
  baseline_inside: inside(svg.querySelector('.baseline line').getBoundingClientRect()),
};
const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def test_rageval_report_draws_a_given_baseline(tmp_path: Path) -> None:
    from pytest_rageval import cli

    for i in (1, 2, 3):
        run = tmp_path / "results" / _run(i)["run_id"]
        run.mkdir(parents=True)
        (run / "metrics.json").write_text(json.dumps(_run(i, mrr_avg=0.7)))
        (run / "results.jsonl").write_text("")
    base = tmp_path / "base.json"
    base.write_text(json.dumps(_run(1, mrr_avg=0.9)))
    assert cli.main(["report", str(run), "--baseline", str(base)]) == 0
    mrr = _charts((run / "report.html").read_text(encoding="utf-8"))["mrr_avg"]
    assert [t.text for t in mrr.iter("text") if t.text and t.text.startswith("baseline")] == ["baseline 0.900"]
    assert cli.main(["report", str(run)]) == 0
    assert "baseline" not in (run / "report.html").read_text(encoding="utf-8").split('id="trends"')[1]
