"""Calibrations must be earned before ``rageval_min_judge_agreement`` accepts them: both label classes and at least
``MIN_ITEMS`` answers per metric, judge errors counted as disagreements, figures recomputed from their counts (a
hand-written calibration.json satisfies nothing), the labelled set's hash checked, and the newest chosen by the
time it records, not by its folder's name."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from openai_server import OpenAIServer, error, ok, user_text

from pytest_rageval.cli import main
from pytest_rageval.judges.calibration_measure import Figures, LabelledAnswer, calibrate, set_hash
from pytest_rageval.judges.calibration_store import (
    CALIBRATION_DIR,
    MIN_ITEMS,
    CalibrationRefused,
    required_calibration,
    write_calibration,
)
from pytest_rageval.judges.openai_judge import OpenAIJudge

IDENTITY = {"kind": "lexical", "model": "lexical-heuristic", "base_url": None, "prompt_version": "v1"}
LINE = {"question": "Who?", "contexts": ["Ada wrote it."], "answer": "Ada.", "reference_answer": "Ada."}


def labelled_set(root: Path, n: int) -> str:
    """A labelled set of ``n`` answers, half labelled pass; its name relative to ``root``."""
    lines = [json.dumps({"id": f"a{i}", **LINE, "labels": {"groundedness": i % 2 == 0}}) for i in range(n)]
    (root / "labels.jsonl").write_text("\n".join(lines) + "\n")
    return "labels.jsonl"


def figures(agree_pass: int, agree_fail: int) -> dict[str, Any]:
    f = Figures()
    for i in range(agree_pass):
        f.add(True, True, f"p{i}")
    for i in range(agree_fail):
        f.add(False, False, f"f{i}")
    return f.as_dict()


def store(
    root: Path, folder: str, data: dict[str, Any], *, created: datetime | None = None, set_name: str = ""
) -> None:
    name = set_name or labelled_set(root, 2)
    write_calibration(
        root / CALIBRATION_DIR / folder,
        IDENTITY,
        name,
        set_hash(root / name),
        {"groundedness": data},
        created=created or datetime(2026, 1, 1, tzinfo=timezone.utc),
    )


def refused(root: Path, minimum: float = 0.5) -> str:
    with pytest.raises(CalibrationRefused) as caught:
        required_calibration(root, IDENTITY, ["groundedness"], minimum, root)
    return str(caught.value)


@pytest.mark.parametrize(
    "agree_pass, agree_fail, why",
    [
        (1, 0, "1 labelled answers all of one class"),
        (200, 0, "200 labelled answers all of one class"),
        (10, 10, f"20 labelled answers, fewer than the {MIN_ITEMS} a calibration needs"),
    ],
)
def test_one_class_or_too_few_answers_satisfy_no_floor(
    tmp_path: Path, agree_pass: int, agree_fail: int, why: str
) -> None:
    store(tmp_path, "20260101-000000-aaaaaa", figures(agree_pass, agree_fail))
    assert why in refused(tmp_path, 0.2)


def test_enough_answers_of_both_classes_satisfy_it(tmp_path: Path) -> None:
    store(tmp_path, "20260101-000000-aaaaaa", figures(150, 150))
    used = required_calibration(tmp_path, IDENTITY, ["groundedness"], 0.95, tmp_path)
    assert used["balanced_accuracy"] == {"groundedness": 1.0} and used["balanced_accuracy_low"]["groundedness"] >= 0.95


@pytest.mark.parametrize("count", [None, float("inf"), "1e999", 7.0, True, -1, 10**400])
def test_a_hand_written_calibration_satisfies_nothing(tmp_path: Path, count: Any) -> None:
    data = {"balanced_accuracy": 1.0, "balanced_accuracy_ci": [1.0, 1.0], **figures(150, 150)}
    data["n"] = count
    if count is None:
        data = {"balanced_accuracy": 1.0, "balanced_accuracy_ci": [1.0, 1.0]}
    store(tmp_path, "20260101-000000-aaaaaa", data)
    message = refused(tmp_path)
    assert "groundedness: no count 'n' (a whole number from 0 to 20,000): not written by rageval calibrate" in message


def test_figures_written_beside_the_counts_play_no_part(tmp_path: Path) -> None:
    data = {**figures(15, 15), "n": 30}
    data.update(balanced_accuracy=1.0, balanced_accuracy_ci=[0.99, 1.0], tp=5, fn=10)  # counts: 5 of 15 pass right
    store(tmp_path, "20260101-000000-aaaaaa", data)
    assert "balanced accuracy groundedness 0.667, 95% interval low end" in refused(tmp_path, 0.9)
    data["tp"] = 99  # counts that do not add up
    store(tmp_path, "20260101-000000-aaaaaa", data)
    assert "its counts do not add up" in refused(tmp_path)


def test_the_labelled_set_must_be_the_one_measured(tmp_path: Path) -> None:
    name = labelled_set(tmp_path, 4)
    store(tmp_path, "20260101-000000-aaaaaa", figures(150, 150), set_name=name)
    required_calibration(tmp_path, IDENTITY, ["groundedness"], 0.9, tmp_path)
    (tmp_path / name).write_text((tmp_path / name).read_text().replace("Ada.", "Bea."))  # the labels moved on
    assert "its labelled set labels.jsonl has changed since" in refused(tmp_path)
    (tmp_path / name).unlink()
    assert "its labelled set labels.jsonl cannot be read" in refused(tmp_path)


def test_the_newest_is_chosen_by_the_time_it_records_not_its_folder_name(tmp_path: Path) -> None:
    store(tmp_path, "20260105-000000-bbbbbb", figures(150, 150), created=datetime(2026, 1, 5, tzinfo=timezone.utc))
    store(tmp_path, "20260102-000000-cccccc", figures(300, 300), created=datetime(2026, 1, 9, tzinfo=timezone.utc))
    forged = tmp_path / CALIBRATION_DIR / "99999999-999999-ffffff"
    forged.mkdir()
    hand = {"judge": IDENTITY, "set": "labels.jsonl", "set_hash": set_hash(tmp_path / "labels.jsonl")}
    (forged / "calibration.json").write_text(json.dumps({**hand, "metrics": {"groundedness": figures(150, 150)}}))
    used = required_calibration(tmp_path, IDENTITY, ["groundedness"], 0.9, tmp_path)
    assert used["calibration"] == "calibration/20260102-000000-cccccc"
    (tmp_path / CALIBRATION_DIR / "20260102-000000-cccccc" / "calibration.json").unlink()
    (tmp_path / CALIBRATION_DIR / "20260105-000000-bbbbbb" / "calibration.json").unlink()
    assert "records no time it was made" in refused(tmp_path)


def test_judge_errors_count_as_disagreements_and_calibrate_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge that fails on 99 of 100 answers does not score 1.000 on the one it answered."""
    items = [
        LabelledAnswer(f"a{i}", f"question {i}?", ("c.",), "a.", "a.", (), {"correctness": i % 2 == 0})
        for i in range(100)
    ]

    def respond(body: dict[str, Any], headers: dict[str, Any]) -> Any:
        if "question 0?" in user_text(body):
            return ok(json.dumps({"reasoning": "Fine.", "score": 5}))
        return error(400, "no verdict", type_="invalid_request_error")

    with OpenAIServer(respond) as server:
        judge = OpenAIJudge(model="m", base_url=server.base_url, api_key="sk-test-1234", backoff=0.001)

        async def measure() -> dict[str, Figures]:
            try:
                return await calibrate(judge, items, ["correctness"])
            finally:
                await judge.aclose()

        f = asyncio.run(measure())["correctness"]
        assert (f.n, f.errors, f.tp, f.fn + f.fp) == (100, 99, 1, 99)
        assert f.balanced_accuracy is not None and f.balanced_accuracy < 0.05
        sets = tmp_path / "s.jsonl"
        sets.write_text("\n".join(json.dumps({"id": i.id, **LINE, "labels": i.labels}) for i in items[:3]) + "\n")
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234")
        args = [
            "calibrate",
            "--set",
            str(sets),
            "--judge=openai",
            "--judge-model=m",
            f"--judge-base-url={server.base_url}",
        ]
        assert main([*args, "--no-cache", "-o", str(tmp_path / "out")]) == 1
    written = json.loads((tmp_path / "out" / "calibration.json").read_text())
    assert written["set"] == "s.jsonl" and written["created"].endswith("+00:00")


def test_calibrate_cuts_long_fields_as_runs_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 1 MB answer is cut to rageval_max_answer_chars (the offline judge takes superlinear time over such a line)."""
    huge = {"id": "huge", **LINE, "answer": "Ada wrote it. " * 75_000, "labels": {"groundedness": True}}
    (tmp_path / "s.jsonl").write_text(json.dumps(huge) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "--set", "s.jsonl", "--judge=lexical", "--no-cache", "-o", "out"]) == 0
    out = capsys.readouterr().out
    assert "1 field of the labelled set cut to rageval_max_answer_chars" in out, out
