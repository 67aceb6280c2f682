"""``rageval merge RUN...``: join shard runs into one run whose metrics equal an unsharded run's."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_rageval import safejson
from pytest_rageval.errors import DataError
from pytest_rageval.evaluation.selection import merged_selection
from pytest_rageval.gate.aggregate import Aggregator
from pytest_rageval.gate.configs import add_ranking
from pytest_rageval.runs import readback, user_fields
from pytest_rageval.runs.artifacts import compose_metrics, new_run_id, what_ran
from pytest_rageval.runs.folder import RunFolder


class MergeError(DataError, ValueError):
    """A run folder cannot be merged; the message names it."""


def _read_json(path: Path, shape: readback.Shape) -> dict[str, Any]:
    """A shard's metrics.json or config.json, checked against ``shape``; MergeError naming file (and field)."""
    try:
        data: dict[str, Any] = readback.read_json(path, shape)
    except safejson.JsonFileError as exc:
        raise MergeError(f"{path}: cannot read: {exc.detail}") from None
    except readback.ReadbackError as exc:
        raise MergeError(str(exc)) from None
    return data


def merge_runs(run_dirs: Sequence[Path], output_dir: Path) -> tuple[Path, dict[str, Any], list[str]]:
    """Merge the runs into a new run folder under ``output_dir``; returns (folder, metrics, notes)."""
    if not run_dirs:
        raise MergeError("name at least one run folder")
    notes: list[str] = []
    metrics = [_read_json(RunFolder(d).metrics_path, readback.METRICS) for d in run_dirs]
    configs = [_read_json(RunFolder(d).config_path, readback.CONFIG) for d in run_dirs]
    if len({m.get("config_hash") for m in metrics}) > 1:
        notes.append("warning: the runs were made with different configurations (config_hash differs)")
    if len({json.dumps(m.get("judge"), sort_keys=True) for m in metrics}) > 1:
        notes.append("warning: the runs used different judges")
    records: dict[str, dict[str, Any]] = {}
    for run_dir in run_dirs:
        for record in RunFolder(run_dir).records(torn_tail=False):  # a merged run must hold every record
            records[record.get("key") or f"{record.get('file')}::{record.get('test_case_id')}"] = record
    digests: dict[str, str] = {}
    for config in configs:
        files = config.get("eval_set_files") or {}
        if isinstance(files, dict):
            digests.update(files)
    aggregator = Aggregator()
    for record in records.values():
        aggregator.add(record)
    run_id = new_run_id()
    merged = compose_metrics(
        run_id=run_id,
        complete=all(bool(m.get("complete")) for m in metrics),
        config_hash=str(metrics[0].get("config_hash")),
        digests=digests,
        judge=metrics[0].get("judge") or {},
        k=int(metrics[0].get("k") or 0),
        aggregated=aggregator.result(),
        selection=merged_selection(metrics),
        git_commit=_one({str(m["git_commit"]) for m in metrics if isinstance(m.get("git_commit"), str)}),
        run={
            **what_ran(metrics[0]),
            **({"git_dirty": True} if any(m.get("git_dirty") is True for m in metrics) else {}),
            **user_fields.carried(metrics[0]),  # the first run's user section
        },
    )
    add_ranking(merged, (metrics[0].get("config_ranking") or {}).get("metric"))  # matrix shards: configs ranked
    folder = RunFolder.new(output_dir, run_id)
    for record in records.values():
        folder.add(record)
    config = dict(configs[0])
    config.update(
        run_id=run_id,
        merged_from=[str(d) for d in run_dirs],
        eval_set_files=digests,
        eval_set_hash=merged["eval_set_hash"],
    )
    folder.finish(merged, config)
    return folder.run_dir, merged, notes


def _one(values: set[str]) -> str | None:
    """The value the shards share, or None when they differ or none has one."""
    return next(iter(values)) if len(values) == 1 else None
