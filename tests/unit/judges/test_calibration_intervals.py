"""Calibration you can lean on: 95% intervals of every agreement figure, the floor on their low end, and the ids
on which judge and labels disagree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rageval.judges.calibration_measure import Figures, agreement_intervals, disagreement_lines, set_hash
from pytest_rageval.judges.calibration_store import CalibrationRefused, required_calibration, write_calibration

IDENTITY = {"kind": "lexical", "model": "lexical-heuristic", "base_url": None, "prompt_version": "lex-test"}


def figures(agree_pass: int, agree_fail: int, wrong_pass: int = 0, wrong_fail: int = 0) -> Figures:
    """Figures of ``agree_pass + wrong_pass`` answers labelled pass and ``agree_fail + wrong_fail`` labelled fail."""
    f = Figures()
    for i in range(agree_pass):
        f.add(True, True, f"p{i}")
    for i in range(wrong_pass):
        f.add(True, False, f"wp{i}")
    for i in range(agree_fail):
        f.add(False, False, f"f{i}")
    for i in range(wrong_fail):
        f.add(False, True, f"wf{i}")
    return f


def store(root: Path, name: str, f: Figures) -> None:
    (root / "set.jsonl").write_text("labels\n")
    write_calibration(
        root / "calibration" / name, IDENTITY, "set.jsonl", set_hash(root / "set.jsonl"), {"groundedness": f.as_dict()}
    )


def test_four_agreeing_answers_cannot_satisfy_a_floor_of_0_8_and_300_can_satisfy_0_95(tmp_path: Path) -> None:
    few = figures(2, 2)
    assert few.balanced_accuracy == 1.0
    low, high = few.as_dict()["balanced_accuracy_ci"]
    assert low < 0.8 and high == 1.0
    store(tmp_path, "a-few", few)
    with pytest.raises(CalibrationRefused, match=r"groundedness: 4 labelled answers, fewer than the 30"):
        required_calibration(tmp_path, IDENTITY, ["groundedness"], 0.8, tmp_path)
    store(tmp_path, "a-few", figures(16, 16))  # enough answers; the interval's low end still short of 0.9
    with pytest.raises(CalibrationRefused, match=r"groundedness 1\.000, 95% interval low end 0\.8"):
        required_calibration(tmp_path, IDENTITY, ["groundedness"], 0.9, tmp_path)

    many = figures(149, 149, wrong_pass=1, wrong_fail=1)
    data = many.as_dict()
    assert data["balanced_accuracy"] == pytest.approx(298 / 300, abs=1e-4)
    assert data["balanced_accuracy_ci"][0] >= 0.95 and data["accuracy_ci"][0] >= 0.95
    assert data["kappa_ci"][0] <= data["kappa"] <= data["kappa_ci"][1]
    store(tmp_path, "b-many", many)  # the newest that reaches the floor is used
    used = required_calibration(tmp_path, IDENTITY, ["groundedness"], 0.95, tmp_path)
    assert used["calibration"] == "calibration/b-many" and used["balanced_accuracy_low"]["groundedness"] >= 0.95


def test_intervals_are_the_same_every_run_and_contain_the_figure() -> None:
    pairs = [(True, True)] * 40 + [(True, False)] * 7 + [(False, False)] * 30 + [(False, True)] * 5
    first = agreement_intervals(pairs)
    assert first == agreement_intervals(list(pairs))
    f = figures(40, 30, wrong_pass=7, wrong_fail=5)
    for key, value in (
        ("accuracy_ci", f.accuracy),
        ("balanced_accuracy_ci", f.balanced_accuracy),
        ("kappa_ci", f.kappa),
    ):
        low, high = first[key] or (None, None)
        assert low is not None and high is not None and value is not None and low <= value <= high


def test_a_calibration_of_before_intervals_and_times_were_stored_satisfies_no_floor(tmp_path: Path) -> None:
    store(tmp_path, "old", figures(149, 149))
    path = tmp_path / "calibration" / "old" / "calibration.json"
    data = json.loads(path.read_text())
    del data["created"], data["metrics"]["groundedness"]["balanced_accuracy_ci"]
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationRefused, match="records no time it was made"):
        required_calibration(tmp_path, IDENTITY, ["groundedness"], 0.5, tmp_path)


def test_the_disagreeing_ids_are_listed_the_first_20_and_the_rest_counted() -> None:
    lines = disagreement_lines({"correctness": figures(10, 10, wrong_pass=25)})
    assert lines[0].startswith("correctness: 95% intervals: accuracy ")
    assert (
        lines[1]
        == "correctness: judge and labels disagree on 25: " + ", ".join(f"wp{i}" for i in range(20)) + " (+5 more)"
    )


def test_rageval_calibrate_prints_the_intervals_and_the_ids_and_writes_them(tmp_path: Path) -> None:
    labelled = tmp_path / "set.jsonl"
    lines = [
        {
            "id": "good",
            "question": "What budget?",
            "contexts": ["The budget was 5 ARB."],
            "answer": "The budget was 5 ARB.",
            "labels": {"groundedness": True},
        },
        {
            "id": "made-up",
            "question": "What budget?",
            "contexts": ["The budget was 5 ARB."],
            "answer": "The budget was 5 ARB.",
            "labels": {"groundedness": False},
        },
    ]
    labelled.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_rageval.cli",
            "calibrate",
            "--set",
            str(labelled),
            "--judge",
            "lexical",
            "--metric",
            "groundedness",
            "-o",
            "out",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert "groundedness: 95% intervals: accuracy " in run.stdout
    assert "groundedness: judge and labels disagree on 1: made-up" in run.stdout
    written = json.loads((tmp_path / "out" / "calibration.json").read_text())["metrics"]["groundedness"]
    assert {"accuracy_ci", "balanced_accuracy_ci", "kappa_ci"} <= set(written) and "pairs" not in written
