"""The run folder before any case, where results are kept: the output folder must be writable; a resumed run
is locked, must have been made with this configuration and selection, and has its results.jsonl mended.

``run_identity`` is what a resume must share with its run (config.json holds it too); ``recorded_identity``
reads it back from a run folder. Each refusal is one usage error.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pytest_rageval.config.settings import Settings
from pytest_rageval.runs.artifacts import config_hash
from pytest_rageval.runs.folder import (
    RunFolder,
    RunFolderError,
    RunLock,
    check_writable,
    read_json_object,
    read_records,
    repair_results,
)
from pytest_rageval.runs.resume import differences, selection_of


@dataclasses.dataclass
class PreparedRunFolder:
    """What preparing the run folder leaves: a resumed run's records (as read back: plain dicts), its lock,
    and notes for the summary (a torn last line cut). A new run has none of them."""

    resumed: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    lock: RunLock | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    def release(self) -> None:
        """Release the resumed run's lock (once; later calls do nothing)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None


def prepare_run_folder(config: pytest.Config, settings: Settings) -> PreparedRunFolder:
    """Check the output folder, or lock, check and mend a resumed run (``--rageval-resume``)."""
    s = settings
    prepared = PreparedRunFolder()
    try:
        if s.resume is None:
            check_writable(s.output_dir)
            return prepared
        check_writable(s.resume.parent)  # `latest` is written there
        prepared.lock = RunLock(s.resume)
        prepared.lock.acquire()
        check_writable(s.resume)
        changed = differences(recorded_identity(s.resume), run_identity(config, s))
        if changed:
            raise RunFolderError(
                f"{s.resume} was made with another configuration ({'; '.join(changed)}): "
                "resume it with the options it was made with, or start a new run"
            )
        repair = repair_results(s.resume)
    except (RunFolderError, OSError) as exc:
        prepared.release()
        where = "--rageval-resume" if s.resume is not None else "--rageval-output"
        raise pytest.UsageError(f"pytest-rageval: {where}: {exc}") from None
    prepared.resumed = repair.records
    if repair.cut_bytes:
        prepared.notes.append(
            f"resume: results.jsonl ended in a torn line ({repair.cut_bytes} bytes), cut; {len(repair.records)} records kept"
        )
    return prepared


def run_identity(config: pytest.Config, settings: Settings) -> dict[str, Any]:
    """What a resume must share with its run: the configuration snapshot, its hash, the selection."""
    s, option = settings, config.option
    return {
        "config_hash": config_hash(s.snapshot()),
        "config": s.snapshot(),
        "selection": selection_of(
            args=[str(a) for a in config.args],
            invocation_dir=Path(str(config.invocation_params.dir)),
            rootdir=s.rootdir,
            keyword=getattr(option, "keyword", "") or "",
            markexpr=getattr(option, "markexpr", "") or "",
            deselect=[str(d) for d in getattr(option, "deselect", None) or []],
            shard=f"{s.shard[0]}/{s.shard[1]}" if s.shard else None,
        ),
    }


def recorded_identity(run_dir: Path) -> dict[str, Any]:
    """The run's config.json; without one (a run folder of an older version, killed) its first case's ``config``."""
    recorded = read_json_object(RunFolder(run_dir).config_path)
    if recorded:
        return recorded
    per_case = next((r["config"] for r in read_records(run_dir) if isinstance(r.get("config"), dict)), None)
    if per_case is None:  # invalid-line records carry no `config`
        return {}
    return {
        "config_hash": per_case.get("config_hash"),
        "config": {name: per_case[name] for name in ("k", "judge", "judge_model") if name in per_case},
    }
