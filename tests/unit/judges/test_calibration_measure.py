"""`rageval calibrate` against a real OpenAI-compatible loopback judge (always "pass"), the offline judge on the
shipped set, a bad labelled line; and `rageval_min_judge_agreement` refusing or naming a calibration."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from openai_server import OpenAIServer, verdicts

from pytest_rageval.judges.calibration_measure import SHIPPED_SET, Figures, calibrate, load_set
from pytest_rageval.judges.lexical import LexicalJudge

ALWAYS_PASS = {
    "groundedness": {"reasoning": "Fine.", "supported_claims": ["x"], "unsupported_claims": [], "score": 5},
    "correctness": {"reasoning": "Fine.", "score": 5},
}


def rageval(*args: str, cwd: Path, env: Any = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _calibration(folder: Path) -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads(next(folder.glob("results/calibration/*/calibration.json")).read_text()))


def test_figures_of_a_confusion_table() -> None:
    f = Figures()
    for expected, got in [(True, True)] * 6 + [(True, False)] * 2 + [(False, False)] * 3 + [(False, True)]:
        f.add(expected, got, "x")
    assert (f.n, f.tp, f.fn, f.tn, f.fp) == (12, 6, 2, 3, 1)
    assert f.accuracy == pytest.approx(9 / 12)
    assert f.balanced_accuracy == pytest.approx((6 / 8 + 3 / 4) / 2)
    chance = (7 * 8 + 5 * 4) / 144
    assert f.kappa == pytest.approx((9 / 12 - chance) / (1 - chance))
    always = Figures()
    for expected in [True] * 5 + [False] * 3:
        always.add(expected, True, "x")
    assert (always.kappa, always.balanced_accuracy) == (0.0, 0.5)


def test_a_judge_that_always_passes_has_kappa_0_and_balanced_accuracy_one_half(tmp_path: Path) -> None:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-secret-123"}
    with OpenAIServer(verdicts(ALWAYS_PASS)) as server:
        args = ["calibrate", "--judge", "openai", "--judge-model", "stand-in", "--judge-base-url", server.base_url]
        run = rageval(*args, cwd=tmp_path, env=env)
        requests = len(server.requests)
        again = rageval(*args, "-o", "again", cwd=tmp_path, env=env)  # served by the judge cache: no request
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == requests
    assert run.returncode == 0, run.stderr
    data = _calibration(tmp_path)
    correctness = data["metrics"]["correctness"]
    assert (correctness["kappa"], correctness["balanced_accuracy"]) == (0.0, 0.5)
    assert correctness["fn"] == 0 and correctness["tn"] == 0 and correctness["errors"] == 0
    assert data["judge"] == {
        "kind": "openai",
        "model": "stand-in",
        "base_url": server.base_url,
        "prompt_version": data["judge"]["prompt_version"],
    }
    assert requests == data["metrics"]["groundedness"]["requests"] + correctness["requests"] > 0
    assert json.loads((tmp_path / "again" / "calibration.json").read_text())["metrics"]["correctness"]["requests"] == 0
    assert "sk-test-secret-123" not in run.stdout + json.dumps(data)


def test_the_offline_judge_on_the_shipped_set_gives_what_the_library_gives(tmp_path: Path) -> None:
    run = rageval("calibrate", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    expected = asyncio.run(calibrate(LexicalJudge(), load_set(SHIPPED_SET), ["groundedness", "correctness"]))
    data = _calibration(tmp_path)
    for metric, figures in expected.items():
        assert data["metrics"][metric] == figures.as_dict()
    assert data["judge"]["kind"] == "lexical" and data["set"] == "shipped"
    assert f"correctness    {expected['correctness'].n:>4} {expected['correctness'].accuracy:>8.3f}" in run.stdout


def test_a_bad_labelled_line_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "set.jsonl"
    bad.write_text(
        '{"id": "a", "question": "q", "contexts": ["c"], "answer": "a", "labels": {"correctness": true}}\n'
        '{"id": "b", "question": "q", "contexts": ["c"], "answer": "a", "labels": {"correctness": "yes"}}\n'
    )
    run = rageval("calibrate", "--set", str(bad), cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == f"rageval: calibrate: {bad}:2: field 'labels.correctness' must be true or false"

    twice = tmp_path / "twice.jsonl"  # read as strictly as an eval set: a key given twice is no silent overwrite
    twice.write_text(
        '// a comment line\n{"id": "a", "question": "q", "contexts": ["c"], "answer": "a", "answer": "b", "labels": {"correctness": true}}\n'
    )
    run = rageval("calibrate", "--set", str(twice), cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"rageval: calibrate: {twice}:2: "), run.stderr
    assert "'answer'" in run.stderr and "twice" in run.stderr


def _project(pytester: pytest.Pytester, minimum: str) -> None:
    pytester.makepyfile(
        rag="def ask(question, params):\n    return {'answer': 'The budget was 5 ARB.', 'retrieved_chunks': [{'text': 'The budget was 5 ARB.'}]}\n"
    )
    pytester.makefile(
        ".jsonl",
        **{"eval_sets/s": json.dumps({"id": "c", "question": "What budget?", "reference_answer": "5 ARB."}) + "\n"},
    )
    pytester.makepyprojecttoml(
        f'[tool.pytest.ini_options]\nrageval_target = "rag:ask"\nrageval_judge = "lexical"\nrageval_min_judge_agreement = "{minimum}"\n'
    )


def test_min_judge_agreement_refuses_a_run_without_a_sufficient_calibration_and_names_the_one_it_used(
    pytester: pytest.Pytester,
) -> None:
    measured = asyncio.run(calibrate(LexicalJudge(), load_set(SHIPPED_SET), ["groundedness", "correctness"]))
    low_ends = {
        m: (f.intervals()["balanced_accuracy_ci"] or [0.0])[0] for m, f in measured.items()
    }  # the floor's figure
    lowest_metric = min(low_ends, key=lambda m: low_ends[m])
    lowest = low_ends[lowest_metric]
    assert lowest < 0.99
    _project(pytester, "0.5")
    refused = pytester.runpytest_subprocess("--rageval", "-p", "no:cacheprovider")
    assert refused.ret == 4
    assert "no calibration of the lexical judge lexical-heuristic" in refused.stderr.str()
    assert not list(pytester.path.glob("results/2*"))  # refused before any case: no run folder
    assert rageval("calibrate", cwd=pytester.path).returncode == 0
    _project(pytester, f"{lowest + 0.005:.3f}")
    low = pytester.runpytest_subprocess("--rageval", "-p", "no:cacheprovider")
    assert (
        low.ret == 4
        and f"{lowest_metric} {measured[lowest_metric].balanced_accuracy:.3f}, 95% interval low end {lowest:.3f}"
        in low.stderr.str()
    )
    _project(pytester, f"{lowest - 0.005:.3f}")
    ok = pytester.runpytest_subprocess("--rageval", "-p", "no:cacheprovider")
    ok.assert_outcomes(passed=1)
    metrics = json.loads(next(pytester.path.glob("results/2*/metrics.json")).read_text())
    used = metrics["judge_calibration"]
    assert used["calibration"].startswith("results/calibration/") and used["minimum"] == pytest.approx(
        lowest - 0.005, abs=1e-3
    )
    assert used["balanced_accuracy"]["correctness"] == pytest.approx(
        measured["correctness"].balanced_accuracy, abs=1e-4
    )
    assert "judge calibration: results/calibration/" in ok.stdout.str()
