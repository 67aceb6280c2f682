"""resume.py: what a resumed run must share with its run, named when it differs (pure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_rageval.runs.resume import differences, selection_of


def identity(**changes: object) -> dict[str, Any]:
    config: dict[str, Any] = {"target": "http://x/ask", "k": 5, "judge": "none", "thresholds": {"global": {"mrr": 0.5}}}
    selection: dict[str, Any] = {"paths": ["eval_sets"], "keyword": "", "markexpr": "", "deselect": [], "shard": None}
    for name, value in changes.items():
        (config if name in config else selection)[name] = value
    return {"config_hash": str(sorted(config.items())), "config": config, "selection": selection}


def test_the_same_configuration_has_no_differences() -> None:
    assert differences(identity(), identity()) == []


def test_each_difference_is_named_with_both_values() -> None:
    assert differences(identity(), identity(k=3, keyword="c001", judge="lexical")) == [
        "k: 5 in the run, 3 now",
        "judge: 'none' in the run, 'lexical' now",
        "-k: none in the run, 'c001' now",
    ]
    assert differences(identity(thresholds={}), identity()) == [
        "thresholds: none in the run, {'global': {'mrr': 0.5}} now"
    ]


def test_a_run_without_a_selection_or_snapshot_compares_what_it_has() -> None:
    old = identity()
    del old["selection"]
    assert differences(old, identity(keyword="c001")) == []  # a run folder of an older version
    assert differences({"config_hash": "abc", "config": {"k": 5}}, identity(target="http://y")) == [
        f"config_hash: abc in the run, {identity(target='http://y')['config_hash']} now"
    ]


def test_a_field_kept_only_when_set_is_named_when_one_side_has_it() -> None:
    repeated = identity()
    repeated["config"] = {**repeated["config"], "repeat": 3, "matrix": {"axes": {"top_k": [3, 5]}}}
    repeated["config_hash"] = "other"
    assert differences(identity(), repeated) == [
        "repeat: none in the run, 3 now",
        "matrix: none in the run, {'axes': {'top_k': [3, 5]}} now",
    ]
    assert differences(repeated, identity()) == [
        "repeat: 3 in the run, none now",
        "matrix: {'axes': {'top_k': [3, 5]}} in the run, none now",
    ]


def test_selection_paths_are_relative_to_rootdir_and_sorted(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    got = selection_of(
        args=[str(tmp_path / "b.jsonl"), "a.jsonl::c1"],
        invocation_dir=tmp_path / "sub",
        rootdir=tmp_path,
        keyword="",
        markexpr="",
        deselect=[],
        shard="1/2",
    )
    assert got["paths"] == ["b.jsonl", "sub/a.jsonl::c1"] and got["shard"] == "1/2"
