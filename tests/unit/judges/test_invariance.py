"""`rageval calibrate --invariance`: each change made from the item's id alone, the offline judge unmoved by
every meaning-preserving change on the shipped set, and a real OpenAI-compatible loopback judge that reads only
the first retrieved chunk caught flipping when the chunks are reordered."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from openai_server import OpenAIServer, error, ok, user_text

from pytest_rageval.judges.calibration_measure import SHIPPED_SET, LabelledAnswer, load_set
from pytest_rageval.judges.invariance import CHANGES, PRESERVING, as_json, invariance, perturb
from pytest_rageval.judges.lexical import LexicalJudge

CHANGE = {change.name: change for change in CHANGES}


def item(
    answer: str, contexts: tuple[str, ...] = ("A.", "B.", "C."), item_id: str = "x", reference: str | None = "ref"
) -> LabelledAnswer:
    return LabelledAnswer(
        item_id, "Where is the festival held?", contexts, answer, reference, (), {"correctness": True}
    )


def test_each_change_is_made_from_the_id_alone() -> None:
    one = item("The festival is held in Lisbon in July, for 3 days.")
    other = item("The Porto fair ran for two weeks.", ("D.",), "y")
    made = {name: perturb(change, one, [one, other]) for name, change in CHANGE.items()}
    again = {name: perturb(change, one, [one, other]) for name, change in CHANGE.items()}
    assert made == again
    reordered = made["chunks-reordered"]
    assert (
        reordered is not None
        and sorted(reordered.contexts) == sorted(one.contexts)
        and reordered.contexts != one.contexts
    )
    assert made["whitespace"] is not None and made["whitespace"].answer.split() == one.answer.split()
    assert made["trailing-punctuation"] is not None and made["trailing-punctuation"].answer == one.answer[:-1]
    emphasised = made["emphasis"]
    assert (
        emphasised is not None
        and "**" in emphasised.answer
        and re.sub(r"\*\*|(?<!\w)_|_(?!\w)", "", emphasised.answer) == one.answer
    )
    assert made["other-contexts"] is not None and made["other-contexts"].contexts == ("D.",)
    assert (
        made["number-changed"] is not None
        and made["number-changed"].answer == "The festival is held in Lisbon in July, for 4 days."
    )
    assert (
        made["name-swapped"] is not None
        and made["name-swapped"].answer == "The festival is held in Porto in July, for 3 days."
    )
    assert (
        made["negation-added"] is not None
        and made["negation-added"].answer == "The festival is not held in Lisbon in July, for 3 days."
    )
    assert made["yes-no-flipped"] is None  # the answer opens with neither
    assert perturb(CHANGE["yes-no-flipped"], item("No, only in July."), [one]) == item("Yes, only in July.")
    assert perturb(CHANGE["chunks-reordered"], item("x", ("A.",)), [one]) is None  # one chunk: no other order
    assert (
        perturb(CHANGE["other-contexts"], item("x", reference=None), [one, other]) is None
    )  # correctness reads the chunks then


def test_the_offline_judge_keeps_every_verdict_under_meaning_preserving_changes_of_the_shipped_set() -> None:
    items = load_set(SHIPPED_SET)
    figures = asyncio.run(invariance(LexicalJudge(), items, ["groundedness", "correctness"]))
    data = as_json(figures)
    preserving = {name: per for name, per in data.items() if per["kind"] == PRESERVING}
    assert set(preserving) == {"chunks-reordered", "whitespace", "trailing-punctuation", "emphasis", "other-contexts"}
    for name, per in preserving.items():
        for metric, f in per["metrics"].items():
            assert f["n"] > 150 and f["flips"] == 0, (name, metric, f["flipped"])
    assert set(preserving["other-contexts"]["metrics"]) == {"correctness"}
    # what lexical/v9 catches, kept from getting worse (measured: 0.710, 0.588, 1.000, 0.774)
    floors = {"number-changed": 0.7, "name-swapped": 0.58, "yes-no-flipped": 1.0, "negation-added": 0.77}
    for name, floor in floors.items():
        assert data[name]["metrics"]["correctness"]["detection_rate"] >= floor, (name, data[name])


def rageval(*args: str, cwd: Path, env: Any = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def first_chunk_judge(body: dict[str, Any], headers: dict[str, Any]) -> tuple[int, dict[str, Any], Any]:
    """A judge that reads only the first retrieved chunk: grounded when the answer's last word is in it."""
    text = user_text(body)
    answer = re.search(r"<answer>\s*(.*?)\s*</answer>", text, re.S)
    first = re.search(r'<context id="1"[^>]*>\s*(.*?)\s*</context>', text, re.S)
    if answer is None:
        return error(400, "test server: no answer")
    word = re.findall(r"\w+", answer.group(1))[-1]
    score = 5 if first is not None and word in first.group(1) else 1
    verdict = {"reasoning": "Read the first chunk.", "supported_claims": [], "unsupported_claims": [], "score": score}
    return ok(json.dumps(verdict))


SMALL_SET = [
    {
        "id": f"fest-{n}",
        "question": f"Where is festival {n} held?",
        "contexts": [f"Festival {n} is held in {city}.", "Tickets go on sale in May."],
        "answer": f"Festival {n} is held in {city}.",
        "labels": {"groundedness": True},
    }
    for n, city in enumerate(["Lisbon", "Porto", "Braga", "Faro"], start=1)
]


def test_a_judge_reading_only_the_first_chunk_flips_when_the_chunks_are_reordered(tmp_path: Path) -> None:
    labelled = tmp_path / "set.jsonl"
    labelled.write_text("".join(json.dumps(line) + "\n" for line in SMALL_SET))
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-secret-456"}
    with OpenAIServer(first_chunk_judge) as server:
        args = [
            "--judge",
            "openai",
            "--judge-model",
            "first-chunk",
            "--judge-base-url",
            server.base_url,
            "--metric",
            "groundedness",
        ]
        run = rageval("calibrate", "--invariance", "--set", str(labelled), "-o", "out", *args, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    data = json.loads((tmp_path / "out" / "calibration.json").read_text())
    reordered = data["invariance"]["chunks-reordered"]["metrics"]["groundedness"]
    assert reordered == {
        "n": 4,
        "flips": 4,
        "flip_rate": 1.0,
        "errors": 0,
        "flipped": ["fest-1", "fest-2", "fest-3", "fest-4"],
    }
    assert data["invariance"]["whitespace"]["metrics"]["groundedness"]["flips"] == 0
    assert re.search(r"chunks-reordered\s+preserves\s+groundedness\s+4\s+4\s+1\.000", run.stdout), run.stdout
    assert "chunks-reordered flips groundedness of: fest-1, fest-2, fest-3, fest-4" in run.stdout
    assert "sk-test-secret-456" not in run.stdout + json.dumps(data)

    offline = rageval(
        "calibrate", "--invariance", "--set", str(labelled), "-o", "lexical", "--metric", "groundedness", cwd=tmp_path
    )
    assert offline.returncode == 0, offline.stderr
    lexical = json.loads((tmp_path / "lexical" / "calibration.json").read_text())["invariance"]
    assert lexical["chunks-reordered"]["metrics"]["groundedness"]["flips"] == 0


def test_without_invariance_calibration_json_has_no_such_section(tmp_path: Path) -> None:
    labelled = tmp_path / "set.jsonl"
    labelled.write_text(json.dumps(SMALL_SET[0]) + "\n")
    run = rageval("calibrate", "--set", str(labelled), "-o", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "invariance" not in json.loads((tmp_path / "out" / "calibration.json").read_text())
    assert "flip rate" not in run.stdout
