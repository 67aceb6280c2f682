"""Look-alike ids are one case (their NFKC forms compared: composed and decomposed accents, the Kelvin sign), and
``rageval_min_shared_cases`` is also a share of the baseline's cases, so 20 shared cases of 5,020 do not gate."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_rageval.config.pyproject import RagevalConfig
from pytest_rageval.config.settings import SettingsError, build_settings
from pytest_rageval.config.table import SETTINGS
from pytest_rageval.evaluation.evalset import load_eval_file
from pytest_rageval.gate.compare import Comparison, too_few_shared


@pytest.mark.parametrize(
    "first, second",
    [("caf\u00e9", "cafe\u0301"), ("\u212a1", "K1")],  # NFC and NFD; the Kelvin sign and the letter K
    ids=["nfc-nfd", "kelvin"],
)
def test_ids_that_look_alike_are_one_case(tmp_path: Path, first: str, second: str) -> None:
    path = tmp_path / "s.jsonl"
    lines = [{"id": i, "question": "q?", "gold_supports": [{"rel_path": "a.md"}]} for i in (first, second)]
    path.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n", encoding="utf-8")
    loaded = load_eval_file(path, "s.jsonl")
    assert [c.case.id for c in loaded.cases] == [first]
    assert [b.message for b in loaded.bad] == [
        f"s.jsonl:2: field 'id': duplicate id {second!r} (first used on line 1, as {first!r} once Unicode-normalised (NFKC))"
    ]


def test_ids_that_differ_in_case_stay_two_cases(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [{"id": i, "question": "q?", "gold_supports": [{"rel_path": "a.md"}]} for i in ("A", "a")]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert len(load_eval_file(path).cases) == 2


def min_shared(value: str, tmp_path: Path) -> Any:
    option = SimpleNamespace(**{s.dest: s.option_attrs()["default"] for s in SETTINGS if s.dest})
    return build_settings(
        rootdir=tmp_path,
        invocation_dir=tmp_path,
        option=option,
        ini={"rageval_min_shared_cases": value},
        pyproject=RagevalConfig(),
        environ={},
    ).min_shared_cases


def test_a_share_of_the_baseline_cases_refuses_20_shared_of_5020(tmp_path: Path) -> None:
    share = min_shared("0.5", tmp_path)
    assert share == 0.5 and min_shared("10", tmp_path) == 10
    few = Comparison(shared_cases=20, baseline_cases=5020, current_cases=5020)
    assert too_few_shared(few, 10) is None  # a count of 10 lets it gate
    assert too_few_shared(few, share) == (
        "only 20 unchanged cases shared with the baseline, fewer than 2510 (0.5 of the baseline's 5020) "
        "(rageval_min_shared_cases)"
    )
    assert too_few_shared(Comparison(shared_cases=2510, baseline_cases=5020, current_cases=5020), share) is None
    partial = Comparison(shared_cases=20, baseline_cases=5020, current_cases=20)  # a run of 20 cases: all of them
    assert too_few_shared(partial, share) is None


@pytest.mark.parametrize("value", ["0", "0.0", "1.5", "nan", "-0.5", "inf", "1e-3"])
def test_a_share_outside_0_to_1_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(
        SettingsError, match="rageval_min_shared_cases: must be a whole number of at least 1, or a share"
    ):
        min_shared(value, tmp_path)
