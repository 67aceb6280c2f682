"""report.html with a baseline at scale: the cost of each card's "Since baseline" section.

Makes a baseline folder of ``--cases`` records (results.jsonl + metrics.json; answers of 120 words that all
differ from the new run's, 5 chunks each, every tenth case failed) and renders the new run's report.html with
and without it. Prints the time to index the baseline's results.jsonl, the render times, the page sizes and
what the baseline's index holds in memory.

    python bench/report_since.py [--cases 5000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from pytest_rageval.gate.compare import Comparison
from pytest_rageval.report.baseline import BaselineCases, GateOutcome
from pytest_rageval.report.html import render_report


def record(i: int, run: int) -> dict[str, Any]:
    failed = i % 10 == 0 if run else i % 20 == 0
    words = " ".join(f"word{(j * (run + 1)) % 97}" for j in range(120))
    chunks = [
        {
            "rel_path": f"docs/{(i + k + run) % 50}.md",
            "heading_path": ["# H", f"## {k}"],
            "rank": k + 1,
            "text": "t" * 200,
            "gold": k == 0,
        }
        for k in range(5)
    ]
    return {
        "key": f"s.jsonl::c{i}",
        "test_case_id": f"c{i}",
        "outcome": "failed" if failed else "passed",
        "question": f"q{i}",
        "answer": words,
        "retrieved_chunks": chunks,
        "metrics": {"mrr": 0.5 if failed else 1.0, "recall_at_k": 1.0},
        "tags": ["t"],
        "category": "c",
        "misses": [{"metric": "mrr", "value": 0.5, "op": ">=", "threshold": 1.0}] if failed else [],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000)
    n = parser.parse_args().cases
    folder = Path(tempfile.mkdtemp(prefix="rageval-since-"))
    base = [record(i, 0) for i in range(n)]
    with (folder / "results.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in base)
    cases = {r["key"]: {"outcome": r["outcome"], "metrics": r["metrics"]} for r in base}
    (folder / "metrics.json").write_text(json.dumps({"run_id": "base", "aggregate_metrics": {}, "cases": cases}))
    new = [record(i, 1) for i in range(n)]
    to_fail = [r["key"] for r, o in zip(new, base) if r["outcome"] == "failed" and o["outcome"] == "passed"]
    to_pass = [r["key"] for r, o in zip(new, base) if r["outcome"] == "passed" and o["outcome"] == "failed"]
    comparison = Comparison(
        flipped_to_fail=to_fail, flipped_to_pass=to_pass, shared_cases=n, baseline_cases=n, current_cases=n
    )
    outcome = GateOutcome(comparison, failed=True, reason="regression")

    tracemalloc.start()
    start = time.perf_counter()
    baseline = BaselineCases.load(folder)
    indexed = time.perf_counter() - start
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    start = time.perf_counter()
    page = render_report({"run_id": "new"}, iter(new), outcome=outcome, baseline_cases=baseline)
    with_baseline = time.perf_counter() - start
    start = time.perf_counter()
    plain = render_report({"run_id": "new"}, iter(new))
    without = time.perf_counter() - start
    size = (folder / "results.jsonl").stat().st_size
    print(
        f"{n} cases ({len(to_fail)} flipped to fail, {len(to_pass)} to pass); baseline results.jsonl {size / 1e6:.1f} MB"
    )
    print(f"index the baseline: {indexed:.2f} s, holds {held / 1e6:.1f} MB (metrics.json cases + key -> offset)")
    print(f"render with the baseline: {with_baseline:.2f} s, {len(page) / 1e6:.1f} MB page")
    print(f"render without:           {without:.2f} s, {len(plain) / 1e6:.1f} MB page")


if __name__ == "__main__":
    main()
