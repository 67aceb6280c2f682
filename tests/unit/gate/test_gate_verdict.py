"""gate.gate_verdict: the one gate policy, the same for the pytest session and for ``rageval compare``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_rageval import cli
from pytest_rageval.gate.aggregate import aggregate
from pytest_rageval.gate.compare import ALLOWED_NOTE, gate_runs, gate_verdict
from pytest_rageval.runs.folder import write_json_atomic

JUDGE = {"name": "lexical", "model": None, "prompt_version": "lex1", "temperature": 0}


def metrics_json(mrr: float, *, cases: int = 4, outcome: str = "passed", **top: Any) -> dict[str, Any]:
    """A metrics.json of ``cases`` cases, each with this mrr."""
    records = [
        {
            "key": f"s.jsonl::c{i}",
            "test_case_id": f"c{i}",
            "category": "factual",
            "tags": [],
            "answerable": True,
            "outcome": outcome,
            "metrics": {"mrr": mrr},
        }
        for i in range(cases)
    ]
    return {
        "run_id": "r",
        "eval_set_hash": "a" * 64,
        "judge": dict(JUDGE),
        "complete": True,
        **aggregate(records),
        **top,
    }


CASES = {
    "no regression": (metrics_json(1.0), metrics_json(1.0), {}, (False, 0, "", None)),
    "regression": (metrics_json(1.0), metrics_json(0.5), {}, (True, 1, "regression: mrr_avg 1.000 → 0.500", None)),
    "allowed": (metrics_json(1.0), metrics_json(0.5), {"allow_regressions": True}, (False, 0, "", ALLOWED_NOTE)),
    "refused": (
        metrics_json(1.0),
        metrics_json(1.0, eval_set_hash="b" * 64),
        {"allow_regressions": True},
        (True, 2, "baseline refused: eval_set_hash differs", None),
    ),
    "not compared": (
        metrics_json(1.0),
        metrics_json(1.0, outcome="error"),
        {},
        (True, 2, "not compared with the baseline: ", None),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_verdict_of_each_kind_of_comparison(name: str) -> None:
    base, new, options, (failed, exit_code, reason, note) = CASES[name]
    comparison = gate_runs(base, new)
    verdict = gate_verdict(comparison, **options)
    assert (verdict.failed, verdict.exit_code, verdict.note) == (failed, exit_code, note)
    assert verdict.reason.startswith(reason) and bool(verdict.reason) == failed
    assert comparison.status == ("regression" if name == "allowed" else name)


@pytest.mark.parametrize("name", [n for n in CASES if n != "allowed"])
def test_rageval_compare_exits_with_the_verdicts_code(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, new, _options, _ = CASES[name]
    write_json_atomic(tmp_path / "base" / "metrics.json", base)
    write_json_atomic(tmp_path / "new" / "metrics.json", new)
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above: default tolerances, as gate_verdict's
    code = cli.main(["compare", str(tmp_path / "base"), str(tmp_path / "new")])
    assert code == gate_verdict(gate_runs(base, new)).exit_code == {"no regression": 0, "regression": 1}.get(name, 2)
    out = capsys.readouterr().out
    assert ("REGRESSION" in out) == (name == "regression")
