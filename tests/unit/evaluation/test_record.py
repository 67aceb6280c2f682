"""record.py: every outcome and error kind the package writes is in its Literal types; the plugin's records fit CaseRecord."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonlines
import pytest
from needs import need_module

import pytest_rageval
from pytest_rageval import safejson
from pytest_rageval.evaluation.record import CALL_ERROR_KINDS, ERROR_KINDS, OUTCOMES, CaseRecord

PACKAGE = Path(pytest_rageval.__file__).parent
#: Calls whose first argument is an error kind: record.error (also imported as case_error), runner's _error and
#: _Step.at, client's RagCallError and HttpClient._error.
KIND_CALLS = {"error", "case_error", "_error", "at", "RagCallError"}


def _sources() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if "demo" not in path.relative_to(PACKAGE).parts:
            yield str(path.relative_to(PACKAGE)), ast.parse(path.read_text(encoding="utf-8"))


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _literal(node: ast.AST) -> Any:
    return node.value if isinstance(node, ast.Constant) else ...


def _values(node: ast.AST) -> list[Any]:
    """The constants an expression may be: both branches of ``a if c else b``."""
    if isinstance(node, ast.IfExp):
        return _values(node.body) + _values(node.orelse)
    return [_literal(node)]


def test_every_error_kind_and_outcome_written_is_in_the_literals() -> None:
    kinds: dict[str, set[str]] = {}  # kind -> files writing it
    outcomes: dict[Any, set[str]] = {}
    hand_made: list[str] = []
    for where, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node.func) in KIND_CALLS and node.args:
                kind = _literal(node.args[0])
                if isinstance(kind, str):
                    kinds.setdefault(kind, set()).add(where)
                    if _name(node.func) == "RagCallError":
                        assert kind in CALL_ERROR_KINDS, f"{where}:{node.lineno}: RagCallError({kind!r})"
            elif isinstance(node, ast.Dict):
                keys = [_literal(k) if k is not None else None for k in node.keys]
                if set(keys) == {"kind", "message"} and where != "evaluation/record.py":
                    hand_made.append(f"{where}:{node.lineno}")
                if "outcome" in keys:
                    for value in _values(node.values[keys.index("outcome")]):
                        outcomes.setdefault(value, set()).add(where)
            elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
                if _literal(node.targets[0].slice) == "outcome":
                    for value in _values(node.value):
                        outcomes.setdefault(value, set()).add(where)
    assert not hand_made, f"an error made without record.error: {hand_made}"
    assert set(kinds) == set(ERROR_KINDS), {k: sorted(v) for k, v in kinds.items() if k not in ERROR_KINDS}
    written = {o for o in outcomes if isinstance(o, str)}
    assert written <= set(OUTCOMES), {o: sorted(outcomes[o]) for o in written - set(OUTCOMES)}
    assert {"passed", "failed", "error", "xfailed", "xpassed"} <= written  # the scan sees the writers


@pytest.mark.e2e
def test_mypy_refuses_a_kind_outside_the_literal(tmp_path: Path) -> None:
    need_module("mypy")
    snippet = tmp_path / "kinds.py"
    snippet.write_text(
        "from pytest_rageval.evaluation.record import error\n\nerror('judge', 'ok')\nerror('judge_failed', 'stray')\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            str(snippet),
            "--cache-dir=/dev/null",
            "--follow-imports=silent",
            "--ignore-missing-imports",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "kinds.py:4:" in errors[0] and "judge_failed" in errors[0], proc.stdout + proc.stderr


EVAL_SET = [
    {"id": "good", "question": "What is A?", "gold_supports": [{"rel_path": "a.md"}]},
    {"id": "raises", "question": "boom", "gold_supports": [{"rel_path": "a.md"}]},
    {"id": "missing", "question": "What is B?", "gold_supports": [{"rel_path": "b.md"}]},
]
RAG = """
def ask(question, params):
    if question == "boom":
        raise RuntimeError("the target fell over")
    return {"answer": "A is a letter.", "debug": {"retrieved_chunks": [{"rel_path": "a.md", "text": "A is a letter."}]}}
"""


def test_the_plugins_records_are_case_records_read_by_jsonlines(pytester: pytest.Pytester) -> None:
    lines = [json.dumps(c) for c in EVAL_SET] + ['{"id": "bad", "question": ']
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(lines)})
    pytester.makepyfile(rag=RAG)
    result = pytester.runpytest("--rageval", "--rageval-judge=lexical", "--rageval-target=rag:ask")
    result.assert_outcomes(passed=1, failed=1, errors=2)
    run_dir = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    with jsonlines.open(run_dir / "results.jsonl") as reader:
        records = list(reader)
    raw = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert raw == [safejson.dumps(r) for r in records]  # one record a line, as safejson writes it
    keys = set(CaseRecord.__annotations__)
    for rec in records:
        assert set(rec) <= keys, set(rec) - keys
        assert rec["outcome"] in OUTCOMES
        assert rec["error"] is None or (
            set(rec["error"]) == {"kind", "message"} and rec["error"]["kind"] in ERROR_KINDS
        )
    by_id = {r.get("test_case_id", "bad line"): r for r in records}
    assert {k: (r["outcome"], (r["error"] or {}).get("kind")) for k, r in by_id.items()} == {
        "good": ("passed", None),
        "raises": ("error", "target"),
        "missing": ("failed", None),
        "bad line": ("error", "invalid_line"),
    }
