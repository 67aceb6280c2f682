"""Small faults with clear answers: a calibration whose balanced accuracy is no number from 0 to 1 (NaN, Infinity)
is named as such, not shown as nothing nor accepted; credentials in the judge's base URL never take the place of
its key; a labelled line's ``kind`` that is not text is refused with the line and the field."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from openai_server import OpenAIServer, verdicts

from pytest_rageval.judges.base import JudgeInput
from pytest_rageval.judges.calibration_measure import SHIPPED_SET, set_hash
from pytest_rageval.judges.calibration_store import (
    CALIBRATION_DIR,
    CalibrationRefused,
    required_calibration,
    write_calibration,
)
from pytest_rageval.judges.openai_judge import OpenAIJudge

IDENTITY = {"kind": "lexical", "model": "lexical-heuristic", "base_url": None, "prompt_version": "v1"}


@pytest.mark.parametrize("value, shown", [(float("nan"), "nan"), (float("inf"), "inf"), (7, "7")])
def test_a_balanced_accuracy_that_is_no_number_from_0_to_1_is_named(tmp_path: Path, value: float, shown: str) -> None:
    figures = {
        "groundedness": {"balanced_accuracy": 0.9, "balanced_accuracy_ci": [0.8, 0.95]},
        "correctness": {"balanced_accuracy": value, "balanced_accuracy_ci": [value, value]},
    }
    write_calibration(
        tmp_path / CALIBRATION_DIR / "20261127-120000-abcdef", IDENTITY, "shipped", set_hash(SHIPPED_SET), figures
    )
    with pytest.raises(CalibrationRefused) as refused:
        required_calibration(tmp_path, IDENTITY, ["groundedness", "correctness"], 0.5, tmp_path)
    message = str(refused.value)  # figures without their counts: named, never accepted nor shown as nothing
    assert "correctness: no count 'n' (a whole number from 0 to 20,000): not written by rageval calibrate" in message
    assert f"correctness {shown}" not in message  # the figure written beside the counts plays no part


def test_credentials_in_the_judge_base_url_do_not_replace_its_key() -> None:
    answers = {"correctness": {"reasoning": "Fine.", "score": 5}}
    with OpenAIServer(verdicts(answers)) as server:
        base_url = server.base_url.replace("://", "://someone:url-password-5678@", 1)
        judge = OpenAIJudge(model="judge-model", base_url=base_url, api_key="sk-the-key-1234", backoff=0.001)
        inp = JudgeInput(
            question="q?", answer="a.", contexts=("c.",), context_ids=(None,), reference_answer="a.", key_facts=()
        )

        async def main() -> None:
            try:
                await judge.judge("correctness", inp)
            finally:
                await judge.aclose()

        asyncio.run(main())
    assert [r["headers"].get("authorization") for r in server.requests] == ["Bearer sk-the-key-1234"]


@pytest.mark.e2e
def test_a_labelled_kind_that_is_not_text_is_refused_with_line_and_field(tmp_path: Path) -> None:
    labelled = tmp_path / "set.jsonl"
    good = {
        "id": "a",
        "question": "q",
        "contexts": ["c"],
        "answer": "a",
        "labels": {"correctness": True},
        "kind": "plain",
    }
    labelled.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "b", "kind": ["multi", "hop"]}) + "\n")
    run = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "calibrate", "--set", str(labelled)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.strip() == f'rageval: calibrate: {labelled}:2: field \'kind\' must be str, got ["multi", "hop"]'
