"""The run folder: streamed results.jsonl, atomic metrics.json/config.json, ``latest``.

Only the controller process writes here (never an xdist worker).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import secrets
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Mapping, Optional

from . import registry, safejson
from .sanitize import error_message


def new_run_id(now: Optional[datetime] = None) -> str:
    """A sortable, unique run id: UTC timestamp plus a short random suffix."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def dumps(data: Any) -> str:
    """One JSON line of an artifact: strict (no NaN), valid UTF-8 (no lone surrogate); see safejson.dumps."""
    return safejson.dumps(data)


def writable_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` itself when it can be written as JSON, else the same without the fields that cannot, as an error.

    safejson.dumps repairs NaN and invalid Unicode; what it still refuses (a
    value nested past safejson.MAX_DEPTH, from a hand-written client) drops
    that field and makes the case an error naming it, so the run goes on.
    """
    try:
        dumps(record)
        return record
    except Exception:  # noqa: BLE001 - find the fields at fault below
        pass
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for name, value in record.items():
        try:
            dumps(value)
        except Exception as exc:  # noqa: BLE001
            dropped.append(f"'{name}' ({error_message(exc, 200)})")
        else:
            kept[name] = value
    kept["outcome"] = "error"
    kept["error"] = {"kind": "unwritable", "message": "the case's record could not be written: field "
                     + ", ".join(dropped) + " left out"}
    return kept


def portable_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as it will be written (writable_record, then through JSON): plain JSON values, no NaN, no lone
    surrogate, so it can also cross to another process (xdist's execnet refuses strings that are not valid UTF-8)."""
    return json.loads(dumps(writable_record(record)))


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and ``os.replace``.

    The temp file is created as any new file is (mode 0666 less the umask:
    0644 usually), not 0600 as ``tempfile.mkstemp`` makes it, so every
    artifact is as readable as results.jsonl (pytest's cacheprovider fixed
    the same mkstemp trap).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:  # another writer's temp name: draw again
            continue
        break
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, safejson.dumps(data, indent=2) + "\n")


def case_config(*, k: int, config_hash: str, judge: Mapping[str, Any]) -> dict[str, Any]:
    """Seed 003's per-case ``config``: what a case's numbers depend on (judge from ``judges.factory.judge_info``)."""
    return {
        "k": k,
        "config_hash": config_hash,
        "judge": judge.get("name"),
        "judge_model": judge.get("model"),
        "judge_prompt_version": judge.get("prompt_version"),
        "judge_temperature": judge.get("temperature"),
    }


def with_seed_keys(record: dict[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with seed 003's "Results JSONL Format" keys, derived from ``metrics`` and ``judge``.

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
    for name, fields in (("groundedness", ("score", "reasoning", "unsupported_claims", "supported_claims")),
                         ("correctness", ("score", "reasoning"))):
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


class RunWriter:
    """Writes one run's folder; results.jsonl is appended and flushed per case."""

    def __init__(self, output_dir: Path, run_id: str, *, config: Optional[Callable[[], dict[str, Any]]] = None) -> None:
        self.output_dir = output_dir
        self.run_id = run_id
        self.run_dir = output_dir / run_id
        self._results: Optional[IO[str]] = None  # opened with the first record: a run that ran nothing leaves no folder
        self._config = config  # config.json written with the first record too: a killed run still says how it was made

    @property
    def results_path(self) -> Path:
        return self.run_dir / "results.jsonl"

    def add(self, record: dict[str, Any]) -> None:
        """Append one CaseRecord and flush it, so an interrupted run keeps it."""
        if self._results is None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if self._config is not None and not (self.run_dir / "config.json").exists():
                write_json_atomic(self.run_dir / "config.json", self._config())
            self._results = self.results_path.open("a", encoding="utf-8")
        self._results.write(dumps(record) + "\n")
        self._results.flush()

    def finish(self, metrics: dict[str, Any], config: dict[str, Any], *, move_latest: bool = True) -> None:
        """Close results.jsonl and write metrics.json, config.json and (unless told not to) ``latest``."""
        if self._results is not None:
            self._results.close()
        write_json_atomic(self.run_dir / "metrics.json", metrics)
        write_json_atomic(self.run_dir / "config.json", config)
        if move_latest:
            write_text_atomic(self.output_dir / "latest", self.run_id + "\n")


def read_records(run_dir: Path, *, torn_tail: bool = True) -> Iterable[dict[str, Any]]:
    """The CaseRecords of a run folder's results.jsonl; a line that cannot be read is an UnreadableRecord.

    A torn last line (no newline after it: a write cut short by kill -9 or a full
    disk) is skipped when ``torn_tail`` (readers that only show a run), and refused
    otherwise (commands that write what they read, which must not drop it); any
    other unreadable line is always refused, naming the file and line.
    """
    path = run_dir / "results.jsonl"
    with path.open(encoding="utf-8", errors="surrogateescape") as fh:
        for number, raw in enumerate(fh, start=1):
            line = raw.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                if torn_tail and not raw.endswith("\n"):
                    return
                raise UnreadableRecord(f"{path}:{number}: cannot read this record ({exc}); nothing was changed") from None
            if not isinstance(record, dict):
                raise UnreadableRecord(f"{path}:{number}: a record must be a JSON object; nothing was changed")
            yield record


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``, or {} when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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
    selection: Optional[Mapping[str, Any]] = None,
    timestamp: Optional[str] = None,
) -> dict[str, Any]:
    """metrics.json: the run's identity and scope, then the aggregates (seed 003's format).

    ``selection`` holds ``partial, cases_in_eval_set, cases_selected, shard``
    (``selection.Selection.fields``); ``all_error`` is true when no case that
    ran was scored (every one errored, invalid lines included).
    """
    scored = int(aggregated.get("passed") or 0) + int(aggregated.get("failed") or 0)
    failed_to_run = int(aggregated.get("errors") or 0) + int(aggregated.get("invalid_lines") or 0)
    scope = dict(selection or {"partial": False, "cases_in_eval_set": None, "cases_selected": None, "shard": None})
    return {
        "run_id": run_id,
        # milliseconds: runs made within one second still sort in order (history, trends)
        "timestamp": timestamp or datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
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


def why_not_latest(metrics: Mapping[str, Any], *, whole_share: bool) -> Optional[str]:
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


def git_commit(root: Path) -> Optional[str]:
    """HEAD's commit of the repository holding ``root``, or None."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


class RunFolderError(Exception):
    """A run folder cannot be written or resumed; the message says why, on one line."""


class UnreadableRecord(RunFolderError):
    """A line of results.jsonl that cannot be read: the message names the file and the line."""


def check_writable(folder: Path) -> None:
    """RunFolderError unless files can be made in ``folder``, or (when it does not exist yet) in the
    nearest folder above it that does; creates nothing that stays."""
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise RunFolderError(f"{folder} cannot be made: {probe} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=probe, prefix=".rageval-probe-"):
            pass
    except OSError as exc:
        raise RunFolderError(f"cannot write in {probe}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class Repair:
    """What :func:`repair_results` did: records kept, and the bytes of a torn last line it cut (0: none)."""

    records: list[dict[str, Any]]
    cut_bytes: int = 0
    newline_added: bool = False


def repair_results(run_dir: Path) -> Repair:
    """Read a run's results.jsonl for a resume, first mending its end so new records start on a line of their own.

    A last line that is not a JSON object (a write cut short by kill -9 or a
    full disk) is truncated away; a complete last record missing only its
    newline gets one. A bad line before the last, or two records of one key,
    is a RunFolderError naming the line: such a run cannot be resumed exactly.
    """
    path = run_dir / "results.jsonl"
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # what follows the last newline: b"" unless the last write was cut short
    records: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        record = _record(raw)
        if record is None:
            if number == len(lines) and not tail:  # the last line, newline and all, but unreadable
                return _cut(path, records, cut=len(raw) + 1, size=len(data))
            raise RunFolderError(f"{path} line {number} is not a JSON record; this run cannot be resumed exactly")
        _keep(record, number, seen, records, path)
    if not tail:
        return Repair(records)
    record = _record(tail)
    if record is None:
        return _cut(path, records, cut=len(tail), size=len(data))
    _keep(record, len(lines) + 1, seen, records, path)
    with path.open("ab") as fh:
        fh.write(b"\n")
    return Repair(records, newline_added=True)


def _record(raw: bytes) -> Optional[dict[str, Any]]:
    try:
        value = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _keep(record: dict[str, Any], number: int, seen: dict[str, int], records: list[dict[str, Any]], path: Path) -> None:
    key = record.get("key")
    if isinstance(key, str) and key:
        if key in seen:
            raise RunFolderError(
                f"{path} lines {seen[key]} and {number} are two records of {key}; this run cannot be resumed exactly"
            )
        seen[key] = number
    records.append(record)


def _cut(path: Path, records: list[dict[str, Any]], *, cut: int, size: int) -> Repair:
    with path.open("r+b") as fh:
        fh.truncate(size - cut)
    return Repair(records, cut_bytes=cut)


class RunLock:
    """An exclusive lock on a run folder (``fcntl.flock`` on ``.rageval-resume.lock``), so two sessions never
    resume one run at once. The kernel drops it when its process dies (kill -9 leaves no stale lock)."""

    NAME = ".rageval-resume.lock"

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / self.NAME
        self._fd: Optional[int] = None

    def acquire(self) -> None:
        """Take the lock or raise RunFolderError naming the process that holds it."""
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            return
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise RunFolderError(f"cannot write in {self.path.parent}: {exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 64).decode("ascii", "replace").strip()
                os.close(fd)
                who = f"process {holder}" if holder.isdigit() else "another process"
                raise RunFolderError(
                    f"{self.path.parent} is being resumed by {who} (it holds {self.path.name}); "
                    "wait for that session to end"
                ) from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:  # its holder removed the file as we opened it: lock the new one
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            self._fd = fd
            return

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass
        os.close(fd)
