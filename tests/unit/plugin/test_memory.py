"""Memory stays flat on long runs: parsed cases let go once they ran, items keep their line, the schedule keeps no
per-item table in a serial session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_rageval.plugin.schedule import Lookahead

TARGET = """
CHUNK = {"rel_path": "docs/a.md", "heading_path": "# A", "text": "A.", "rank": 1}

def ask(question, params):
    return {"answer": "An answer.", "references": [CHUNK], "debug": {"retrieved_chunks": [CHUNK]}}
"""


def eval_set(n: int, question: str = "q") -> str:
    lines = [
        {"id": f"c{i}", "question": f"{question}-{i}", "gold_supports": [{"rel_path": "docs/a.md"}], "tags": ["t"]}
        for i in range(n)
    ]
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def test_parsed_cases_are_let_go_once_they_ran(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(rag=TARGET)
    pytester.makefile(".jsonl", **{"eval_sets/s": eval_set(300)})
    pytester.makeconftest(
        """
import gc, json
from pytest_rageval.evaluation.schema import EvalCase

def pytest_sessionfinish(session):
    gc.collect()
    alive = sum(1 for o in gc.get_objects() if isinstance(o, EvalCase))
    with open("alive.json", "w") as fh:
        json.dump({"alive": alive, "items": len(session.items)}, fh)
"""
    )
    result = pytester.runpytest_subprocess(
        "--rageval", "--rageval-target=rag:ask", "--rageval-judge=none", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=300)
    counts = json.loads((pytester.path / "alive.json").read_text())
    assert counts["items"] == 300
    assert counts["alive"] < 10, counts  # one per item when items kept their parsed case


def test_a_case_runs_the_line_as_collected_when_the_file_changes_during_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(rag=TARGET)
    pytester.makefile(".jsonl", **{"eval_sets/s": eval_set(5)})
    pytester.makeconftest(
        f"""
from pathlib import Path

def pytest_collection_finish(session):
    Path("eval_sets/s.jsonl").write_text({eval_set(5, question="changed")!r})
"""
    )
    result = pytester.runpytest(
        "--rageval", "--rageval-target=rag:ask", "--rageval-judge=none", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=5)
    run = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    questions = [json.loads(line)["question"] for line in (run / "results.jsonl").read_text().splitlines()]
    assert sorted(questions) == [f"q-{i}" for i in range(5)]


class _Item:
    """Stands in for a pytest item: the lookahead only compares them by identity."""


def test_lookahead_finds_items_next_to_the_last_one_and_out_of_order_too() -> None:
    items: list[Any] = [_Item() for _ in range(50)]
    ahead = Lookahead(cast(pytest.Config, None), items)
    for place in range(50):  # a serial session: each item just after the last
        assert ahead.index(items[place]) == place
    assert ahead._position is None  # no table of every item was made
    assert [ahead.index(items[i]) for i in (40, 3, 3, 17)] == [40, 3, 3, 17]  # an xdist worker's order
    assert ahead.index(cast(Any, _Item())) is None and ahead.order(cast(Any, _Item())) == 50
    assert [place for place, _ in ahead.upcoming(items[46], None, 10)] == [46, 47, 48, 49]


def test_a_bad_line_still_errors_after_the_good_ones_are_let_go(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(rag=TARGET)
    pytester.makefile(
        ".jsonl",
        **{
            "eval_sets/s": eval_set(3)
            + '{"id": "bad", "question": ""}\n'
            + eval_set(1, question="z").replace('"c0"', '"d0"')
        },
    )
    result = pytester.runpytest(
        "--rageval", "--rageval-target=rag:ask", "--rageval-judge=none", "-p", "no:cacheprovider", "-v"
    )
    result.assert_outcomes(passed=4, errors=1)
    order = [line.split("::")[1].split()[0] for line in result.stdout.lines if line.startswith("eval_sets/s.jsonl::")]
    assert order == ["c0", "c1", "c2", "line4", "d0"]  # file order, the bad line in its place
