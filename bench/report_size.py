"""report.html at 5,000 cases: page size, KB per case, render time, and in headless Chromium the time to load
the page and to filter it, against the same records rendered by another commit's pytest-rageval (main).

    python bench/report_size.py [--cases 5000 --peer main --repeat 3 --no-browser]

The records are realistic: a ~600-character answer, 10 retrieved chunks of 200 characters (one gold), two judge
verdicts with reasoning and claims, 10 % failed, 2 % errored, 8 categories, 1-3 of 20 tags. The peer's code is
taken with ``git archive`` into a temp folder and renders the same records in a child process. The ideal
is results.jsonl itself (the same records as JSON lines): the page shows what it holds, so near 1x is lean.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, load_note, python, source_state, table

WORDS = (
    "the embeddings index setup model granite chunk retrieval answer cite source policy refund "
    "window days customer order shipping invoice account password reset token limit"
).split()


def _text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def make_records(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    tags = [f"tag-{i:02d}" for i in range(20)]
    records = []
    for i in range(n):
        roll = rng.random()
        outcome = "error" if roll < 0.02 else "failed" if roll < 0.12 else "passed"
        chunks = [
            {
                "rank": r,
                "rel_path": f"docs/section-{rng.randrange(300):03d}.md",
                "doc_id": f"d{rng.randrange(9999)}",
                "heading_path": ["# Guide", f"## Part {r}"],
                "score_final": round(1 - r * 0.07, 3),
                "text": _text(rng, 200),
                "gold": r == 2,
            }
            for r in range(1, 11)
        ]
        recall = 0 if outcome == "failed" else 1
        metrics = {
            "recall_at_k": recall,
            "mrr": round(rng.random(), 3),
            "precision_at_k": round(rng.random(), 3),
            "ndcg_at_k": round(rng.random(), 3),
            "groundedness": rng.choice([2, 3, 4, 5]),
            "correctness": rng.choice([2, 3, 4, 5]),
            "latency_ms": round(rng.uniform(50, 900), 1),
        }
        verdict = {
            "score": metrics["groundedness"],
            "reasoning": _text(rng, 240),
            "supported_claims": [_text(rng, 60)],
            "unsupported_claims": [_text(rng, 60)] if outcome == "failed" else [],
        }
        records.append(
            {
                "key": f"eval_sets/big.jsonl::case-{i:05d}",
                "test_case_id": f"case-{i:05d}",
                "file": "eval_sets/big.jsonl",
                "line": i + 1,
                "category": f"category-{i % 8}",
                "tags": rng.sample(tags, rng.randint(1, 3)),
                "answerable": True,
                "question": _text(rng, 120) + "?",
                "reference_answer": _text(rng, 200),
                "expected_key_facts": [_text(rng, 40)],
                "answer": _text(rng, 600),
                "retrieved_chunks": chunks,
                "references": chunks[1:2],
                "metrics": metrics if outcome != "error" else {},
                "thresholds": {"recall_at_k": 1.0, "groundedness": 3.0, "correctness": 3.0},
                "misses": [{"metric": "recall_at_k", "value": 0, "threshold": 1.0, "op": ">="}]
                if outcome == "failed"
                else [],
                "outcome": outcome,
                "error": {"kind": "timeout", "message": "RAG call timed out after 30s"} if outcome == "error" else None,
                "latency": {"total_ms": metrics["latency_ms"]},
                "cost": {"judge_tokens": 812, "judge_cost_usd": 0.0004},
                "judge": {"groundedness": verdict, "correctness": {**verdict, "score": metrics["correctness"]}},
            }
        )
    return records


RENDER = """
import json, sys, time
try:
    from pytest_rageval.gate.aggregate import aggregate
except ImportError:  # a peer commit from before the subpackages
    from pytest_rageval.aggregate import aggregate
from pytest_rageval.report.html import render_report
records = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
metrics = {"run_id": "bench", "timestamp": "2026-01-01T00:00:00Z", "complete": True,
           "judge": {"name": "openai", "model": "bench-judge"}, **aggregate(records)}
times = []
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    page = render_report(metrics, iter(records))
    times.append(time.perf_counter() - start)
open(sys.argv[2], "w", encoding="utf-8").write(page)
print(json.dumps(times))
"""


def render_with(source: Path, results: Path, out: Path, repeat: int) -> list[float]:
    """Render ``results`` with the pytest_rageval under ``source`` (a child process); the render times."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    proc = subprocess.run(
        [python(), "-c", RENDER, str(results), str(out), str(repeat)],
        env=env,
        capture_output=True,
        cwd=out.parent,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode:
        raise SystemExit(f"render with {source} failed:\n{proc.stderr[-2000:]}")
    return cast("list[float]", json.loads(proc.stdout.strip().splitlines()[-1]))


def export(ref: str, into: Path) -> Path:
    """``pytest_rageval/`` of commit ``ref`` (git archive) under ``into``."""
    data = subprocess.run(["git", "archive", ref, "pytest_rageval"], cwd=REPO, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def browser_times(page: Path, profile: Path, tag: str, repeat: int, filters: bool) -> dict[str, float | None]:
    """Median ms to load ``page`` (navigation start to the end of the load event) and, if it has a filter bar,
    to show the failed cases of ``tag``, to search, and to sort by a metric (each with layout)."""
    sys.path.insert(0, str(REPO / "tests" / "helpers"))
    from browser import Page, chromium

    if chromium() is None:
        return {}
    apply = """(function (changes) {{
      var start = performance.now();
      changes.forEach(function (c) {{ var el = document.getElementById(c[0]); el.value = c[1];
        el.dispatchEvent(new Event(c[2], {{bubbles: true}})); }});
      if ({submit}) document.getElementById("rv-filters").dispatchEvent(new Event("submit", {{cancelable: true}}));
      void document.body.offsetHeight;
      return performance.now() - start;
    }})({changes})"""
    runs: dict[str, list[float]] = {"load": [], "filter": [], "search": [], "sort": [], "shown": []}
    for i in range(repeat):
        with Page(profile / str(i), width=1280) as tab:
            start = time.perf_counter()
            tab.open(page)
            wall = (time.perf_counter() - start) * 1000
            load = tab.js("performance.getEntriesByType('navigation')[0].loadEventEnd")
            runs["load"].append(float(load) if isinstance(load, (int, float)) else wall)
            if not filters:
                continue
            runs["filter"].append(
                float(
                    tab.js(
                        apply.format(
                            submit="false", changes=json.dumps([["rv-o", "failed", "change"], ["rv-t", tag, "change"]])
                        )
                    )
                )
            )
            runs["shown"].append(float(tab.js("document.querySelectorAll('.case:not([hidden])').length")))
            runs["search"].append(
                float(
                    tab.js(
                        apply.format(
                            submit="true",
                            changes=json.dumps(
                                [["rv-o", "", "change"], ["rv-t", "", "change"], ["rv-q", "refund window", "input"]]
                            ),
                        )
                    )
                )
            )
            runs["sort"].append(
                float(
                    tab.js(
                        apply.format(
                            submit="false",
                            changes=json.dumps(
                                [["rv-q", "", "input"], ["rv-s", "m:mrr", "change"], ["rv-d", "desc", "change"]]
                            ),
                        )
                    )
                )
            )
    return {k: (statistics.median(v) if v else None) for k, v in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--peer", default="main", help="the git commit or branch to compare with (default main)")
    parser.add_argument("--repeat", type=int, default=3, help="renders and browser loads per side (median)")
    parser.add_argument("--no-browser", action="store_true", help="skip the headless Chromium timings")
    args = parser.parse_args()
    print(load_note())
    print(source_state(), f"against {args.peer}")
    with tempfile.TemporaryDirectory(prefix="rageval-report-size-") as tmp:
        folder = Path(tmp)
        records = make_records(args.cases)
        results = folder / "results.jsonl"
        results.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        sides = {"this": REPO, args.peer: export(args.peer, folder / "peer")}
        rows: list[list[Any]] = []
        timings: dict[str, dict[str, Any]] = {}  # browser_times() per side
        for name, source in sides.items():
            out = folder / f"report-{name.replace('/', '_')}.html"
            times = render_with(source, results, out, args.repeat)
            size = out.stat().st_size
            timings[name] = (
                {}
                if args.no_browser
                else browser_times(
                    out, folder / f"profile-{len(timings)}", "tag-03", args.repeat, filters=name == "this"
                )
            )
            rows.append(
                [
                    name,
                    size,
                    f"{size / 1e6:.2f} MB",
                    f"{size / 1024 / args.cases:.2f}",
                    f"{size / results.stat().st_size:.2f}x",
                    f"{statistics.median(times):.2f} s",
                ]
            )
        this, peer = rows[0][1], rows[1][1]
        print(
            f"\n{args.cases} cases; results.jsonl {results.stat().st_size / 1e6:.2f} MB (the ideal: the page holds what it holds)"
        )
        print(table(["code", "bytes", "size", "KB/case", "vs results.jsonl", "render (median)"], rows))
        print(f"page size this / {args.peer}: {this / peer:.2f}x")
        if not args.no_browser:
            brows = [
                [
                    name,
                    *(f"{t[k]:.0f} ms" if t.get(k) is not None else "-" for k in ("load", "filter", "search", "sort")),
                    f"{t['shown']:.0f}" if t.get("shown") is not None else "-",
                ]
                for name, t in timings.items()
            ]
            print("\nheadless Chromium, 1280x800, median of", args.repeat)
            print(
                table(
                    ["code", "load", "failed + tag-03", "search", "sort by mrr desc", "cards shown by the filter"],
                    brows,
                )
            )
            if timings.get("this") and timings.get(args.peer):
                print(f"load this / {args.peer}: {timings['this']['load'] / timings[args.peer]['load']:.2f}x")
    print(load_note())


if __name__ == "__main__":
    main()
