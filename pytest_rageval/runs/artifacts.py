"""What a run folder holds (how it is written and read is runs/folder.py): records made writable and
portable, the documented per-case keys, metrics.json composed, eval-set digests (the git commit: commit.py).

Only the controller process writes a run folder (never an xdist worker).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_rageval import safejson
from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.record import error
from pytest_rageval.sanitize import error_message

from . import readback


def new_run_id(now: datetime | None = None) -> str:
    """A sortable, unique run id: UTC timestamp plus a short random suffix."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def writable_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` itself when it can be written as JSON, else the same without the fields that cannot, as an error.

    safejson.dumps repairs NaN and invalid Unicode; what it still refuses (a
    value nested past safejson.MAX_DEPTH, from a hand-written client) drops
    that field and makes the case an error naming it, so the run goes on.
    """
    try:
        safejson.dumps(record)
        return record
    except Exception:
        pass
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for name, value in record.items():
        try:
            safejson.dumps(value)
        except Exception as exc:
            dropped.append(f"'{name}' ({error_message(exc, 200)})")
        else:
            kept[name] = value
    kept["outcome"] = "error"
    kept["error"] = error(
        "unwritable", "the case's record could not be written: field " + ", ".join(dropped) + " left out"
    )
    return kept


def portable_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as it will be written (writable_record, then through JSON): plain JSON values, no NaN, no lone
    surrogate, so it can also cross to another process (xdist's execnet refuses strings that are not valid UTF-8)."""
    written: dict[str, Any] = json.loads(safejson.dumps(writable_record(record)))
    return written


def case_config(*, k: int | None, config_hash: str | None, judge: Mapping[str, Any]) -> dict[str, Any]:
    """Seed 003's per-case ``config``: what a case's numbers depend on (judge from ``engine.judge_factory.judge_info``;
    k and hash None when ``rageval judge`` rewrites a record that lacks them)."""
    return {
        "k": k,
        "config_hash": config_hash,
        "judge": judge.get("name"),
        "judge_model": judge.get("model"),
        "judge_prompt_version": judge.get("prompt_version"),
        "judge_temperature": judge.get("temperature"),
    }


def with_seed_keys(record: dict[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with the documented results.jsonl keys, derived from ``metrics`` and ``judge``.

    ``retrieval_metrics`` (the deterministic metrics), ``groundedness`` and
    ``correctness`` (score, reasoning, claims; only when judged), ``abstention``
    ``{abstained, hallucinated}`` (hallucinated: an unanswerable case answered)
    and ``config``. Invalid-line records get none of them.
    """
    if record.get("invalid_line"):
        return record
    metrics = record.get("metrics") or {}
    judge = record.get("judge") or {}
    record["retrieval_metrics"] = {name: metrics.get(name) for name in _seed_retrieval() if name in metrics}
    for name, fields in (
        ("groundedness", ("score", "reasoning", "unsupported_claims", "supported_claims")),
        ("correctness", ("score", "reasoning")),
    ):
        verdict = judge.get(name)
        if isinstance(verdict, Mapping):
            record[name] = {f: verdict.get(f, [] if f.endswith("claims") else None) for f in fields}
        else:
            record.pop(name, None)
    abstained = metrics.get("abstained", record.get("abstained"))
    record["abstention"] = {
        "abstained": abstained,
        "hallucinated": None if abstained is None else (abstained is False and record.get("answerable") is False),
    }
    record["config"] = dict(config)
    return record


def _seed_retrieval() -> tuple[str, ...]:
    """Seed 003's ``retrieval_metrics``: every deterministic metric but the abstention ones (under ``abstention``)."""
    return tuple(m.name for m in registry.metrics("deterministic") if m.aggregate_kind != "abstention")


def file_digests(names: Iterable[str], root: Path) -> dict[str, str]:
    """sha256 of each eval-set file, by its path relative to ``root``."""
    out: dict[str, str] = {}
    for name in sorted(set(names)):
        try:
            out[name] = hashlib.sha256((root / name).read_bytes()).hexdigest()
        except OSError:
            out[name] = "missing"
    return out


def eval_set_hash(digests: Mapping[str, str]) -> str:
    """One hash over the sorted (path, digest) pairs: the eval set's identity."""
    outer = hashlib.sha256()
    for name in sorted(digests):
        outer.update(f"{name}\0{digests[name]}\n".encode())
    return outer.hexdigest()


def compose_metrics(
    *,
    run_id: str,
    complete: bool,
    config_hash: str,
    digests: Mapping[str, str],
    judge: Mapping[str, Any],
    k: int,
    aggregated: Mapping[str, Any],
    selection: Mapping[str, Any] | None = None,
    timestamp: str | None = None,
    git_commit: str | None = None,
    run: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """metrics.json: the run's identity and scope, then the aggregates (the documented format).

    ``selection`` holds ``partial, cases_in_eval_set, cases_selected, shard``
    (``selection.Selection.fields``); ``all_error`` is true when no case that
    ran was scored (every one errored, invalid lines included).
    """
    scored = sum(int(aggregated.get(name) or 0) for name in ("passed", "failed", "xfailed", "xpassed"))
    failed_to_run = int(aggregated.get("errors") or 0) + int(aggregated.get("invalid_lines") or 0)
    scope = dict(selection or {"partial": False, "cases_in_eval_set": None, "cases_selected": None, "shard": None})
    return {
        "format_version": readback.FORMAT_VERSION,
        "run_id": run_id,
        # milliseconds: runs made within one second still sort in order (history, trends)
        "timestamp": timestamp or datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "git_commit": git_commit,  # commit.run_commit: trend charts and `rageval history` show its short form
        # what ran: ``target`` {kind, name} (a conftest fixture, an http or callable target), ``git_dirty``
        # (uncommitted changes), ``matrix`` axes; `rageval history` shows them, the gate compares target kinds
        **(dict(run) if run else {}),
        "complete": complete,
        **scope,
        "all_error": scored == 0 and failed_to_run > 0,
        "config_hash": config_hash,
        "eval_set_hash": eval_set_hash(digests),
        "eval_set_files": dict(sorted(digests.items())),
        "judge": dict(judge),
        "k": k,
        **aggregated,
    }


#: metrics.json's fields that say what a run ran (compose_metrics' ``run``), carried by rescore and merge.
WHAT_RAN = ("target", "matrix", "git_dirty")


def what_ran(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`WHAT_RAN` fields a run's metrics.json holds."""
    return {name: metrics[name] for name in WHAT_RAN if name in metrics}


def why_not_latest(metrics: Mapping[str, Any], *, whole_share: bool) -> str | None:
    """Why this run must not become ``latest`` (None when it may): it stands for less than its eval set.

    An incomplete run, a run whose every case errored, and a run of a subset
    (``-k``, ``-m``, ``--lf``) keep their folder but leave ``latest`` alone; a
    shard run that covered its whole share moves it (``rageval merge`` reads it).
    """
    if not metrics.get("complete", True):
        return "the run is incomplete"
    if metrics.get("all_error"):
        return "every case errored"
    if not whole_share:
        return f"a partial run ({metrics.get('cases_selected')} of {metrics.get('cases_in_eval_set')} cases selected)"
    return None


def config_hash(snapshot: dict[str, Any]) -> str:
    """A short stable hash of a configuration snapshot."""
    canonical = json.dumps(snapshot, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
