"""A project of 30 cases of which 10 fail in their baseline: the known-failures tests and the reports built on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

#: a callable target, deterministic: each case's gold chunk sits at the rank state.json gives it (1 by default);
#: mrr must be 1, so rank 2 fails (mrr 0.5) and rank 3 fails worse (mrr 0.333)
TARGET = """
import json
from pathlib import Path

STATE = Path(__file__).with_name("state.json")


def ask(question, params):
    ranks = json.loads(STATE.read_text())
    rank = ranks.get(question, 1)
    chunks = [{"chunk_id": f"n{i}", "rel_path": "docs/noise.md", "heading_path": "# Noise", "text": "noise", "rank": i} for i in range(1, 4)]
    gold = {"chunk_id": "g", "rel_path": "docs/a.md", "heading_path": "# A", "text": "gold", "rank": rank}
    chunks = [c for c in chunks if c["rank"] != rank] + [gold]
    chunks = [c for c in chunks if c["rank"] <= ranks.get("top_k", 4)]  # the system's own top_k
    return {"answer": "An answer.", "references": [gold], "debug": {"retrieved_chunks": chunks}}
"""

CASES = 30
FAILING = [f"c{i:02d}" for i in range(10)]  # fail in the baseline (gold at rank 2)


def write_state(root: Path, ranks: dict[str, int]) -> None:
    (root / "state.json").write_text(json.dumps(ranks))


def project(pytester: pytest.Pytester, ini: str = "") -> None:
    """30 cases; c20..c29 need no mrr (their gold may move without failing them, only the gate sees it)."""
    pytester.makepyfile(rag_target=TARGET)
    gold = [{"rel_path": "docs/a.md"}]
    lines = [
        {"id": f"c{i:02d}", "question": f"c{i:02d}", "gold_supports": gold, "thresholds": {"mrr": 1 if i < 20 else 0}}
        for i in range(CASES)
    ]
    pytester.makefile(".jsonl", **{"eval_sets/set": "\n".join(json.dumps(line) for line in lines) + "\n"})
    pytester.makeini(f"[pytest]\nrageval_target = rag_target:ask\n{ini}")
    write_state(pytester.path, {case: 2 for case in FAILING})


def run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--rageval",
        "--rageval-judge=none",
        "--rageval-baseline=baseline",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        *extra,
    )


def newest_run(root: Path) -> Path:
    return max(
        (p.parent for p in (root / "results").glob("*/metrics.json")),
        key=lambda d: (d / "metrics.json").stat().st_mtime_ns,
    )
