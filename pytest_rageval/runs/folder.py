"""One run folder: results.jsonl (through ``jsonlines``), metrics.json, config.json and the output folder's ``latest``.

Every file is written here: results.jsonl appended one record per line and
flushed (an interrupted run keeps what it wrote) or rewritten whole, and the JSON
files and ``latest`` atomically (temp file + ``os.replace``) with the mode of
any new file (0666 less the umask). results.jsonl is read here too, by one
reader that names the file and line of a record it cannot read instead of
skipping it (a torn last line may be skipped by readers that only show a run, or
cut by a resume, which says so). Only the controller process writes (never an
xdist worker).
"""

from __future__ import annotations

import errno
import io
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import jsonlines

from pytest_rageval import safejson
from pytest_rageval.atomic import open_atomic, write_bytes_atomic
from pytest_rageval.errors import DataError

from . import readback

__all__ = [
    "RECORD_MAX_DEPTH",
    "RecordIndex",
    "Repair",
    "RunFolder",
    "RunFolderError",
    "RunLock",
    "UnreadableRecord",
    "check_writable",
    "load_record_line",
    "read_checked",
    "read_json_object",
    "read_records",
    "record_problems",
    "repair_results",
    "write_json_atomic",
    "write_text_atomic",
]

#: Deepest nesting of a record read back: a RAG value (bounded by safejson.MAX_DEPTH when it came in)
#: sits a few levels down in a record (``retrieved_chunks[i].field``, ``judge.metric.claims[i]``).
RECORD_MAX_DEPTH = safejson.MAX_DEPTH + 8


class RunFolderError(DataError):
    """A run folder cannot be written or resumed; the message says why, on one line."""


class UnreadableRecord(RunFolderError):
    """A line of results.jsonl that cannot be read: the message names the file and the line."""


# --------------------------------------------------------------------------- writing


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (atomic.write_bytes_atomic), making its folder first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, text.encode("utf-8"))


def append_to_regular_file(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` (created if missing); OSError unless it is a regular file. Opened without
    blocking, so a FIFO or device named there (``$GITHUB_STEP_SUMMARY`` pointing anywhere) cannot hang the run."""
    if path.exists() and not path.is_file():
        raise OSError(errno.EINVAL, "not a regular file")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "a", encoding="utf-8", closefd=False) as fh:
            fh.write(text)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: Any) -> None:
    """A JSON artifact (metrics.json, config.json, a baseline): indented by 2, one newline at the end, atomic.

    Written as it is encoded (safejson.dump), so a metrics.json of many cases is never whole in memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_atomic(path) as fh:
        safejson.dump(data, fh, indent=2)
        fh.write(b"\n")


def stamped(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with this version's ``format_version`` as its first field: what is written now is of that format,
    whatever format the run it was made from had."""
    return {"format_version": readback.FORMAT_VERSION, **{k: v for k, v in data.items() if k != "format_version"}}


def _jsonl_writer(fh: IO[str]) -> jsonlines.Writer:
    """A jsonlines writer of records as :func:`safejson.dumps` writes them (strict, valid UTF-8), flushed per line."""
    return jsonlines.Writer(fh, dumps=safejson.dumps, flush=True)


# --------------------------------------------------------------------------- reading


def load_record_line(text: str | bytes) -> Any:
    """One results.jsonl line as a value: strict JSON (no NaN/Infinity, bounded depth and numbers)."""
    return safejson.loads(text, max_depth=RECORD_MAX_DEPTH)[0]


def record_problems(record: Mapping[str, Any]) -> list[str]:
    """Each field of a record read back whose type is not what the readers use (readback.RECORD); the line reader
    (:func:`load_record_line`) has already bounded its numbers and mended its strings."""
    return readback.problems(record, readback.RECORD, bounds=False)


def read_checked(path: Path, shape: readback.Shape) -> dict[str, Any]:
    """A run folder's JSON file as a command that uses it reads it: {} when there is none, else checked against
    ``shape``; RunFolderError naming the file (and field) when it cannot be read, is no object or breaks the shape."""
    if not path.exists():
        return {}
    try:
        data: dict[str, Any] = readback.read_json(path, shape)
    except (safejson.JsonFileError, readback.ReadbackError) as exc:
        raise RunFolderError(f"{exc}; nothing was changed") from None
    return data


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``, or {} when it is missing, unreadable or not an object."""
    try:
        data = safejson.read_file(path)
    except safejson.JsonFileError:
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class _Line:
    """One non-blank line of results.jsonl as read: its record, or why it could not be read."""

    number: int
    start: int  # byte offset of the line in the file
    end: int  # byte offset after the line and its newline
    ended: bool  # a newline follows it (a line without one was cut short, unless it parses)
    record: dict[str, Any] | None
    problem: str  # why the line is no record ("" when it is one)
    parsed: bool  # the line is JSON (then a line without a record holds a value that is not an object)


_JSON_SPACE = " \t\r\n"


class _Source:
    """The lines of a binary file for ``jsonlines.Reader``, remembering where the line last handed out lies."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh
        self.number = 0
        self.start = 0
        self.end = 0
        self.ended = True

    def __iter__(self) -> Iterator[str]:
        for raw in self._fh:
            self.number += 1
            self.start, self.end = self.end, self.end + len(raw)
            self.ended = raw.endswith(b"\n")
            # without its newline (a parse error then points into the line, not past it); surrogateescape:
            # a stray byte cannot stop the reading, safejson then replaces it by U+FFFD
            yield raw.decode("utf-8", "surrogateescape").strip(_JSON_SPACE)


def _lines(path: Path) -> Iterator[_Line]:
    """Every non-blank line of the results file at ``path``, read by ``jsonlines`` with :func:`load_record_line`."""
    with path.open("rb") as fh:
        source = _Source(fh)
        reader = jsonlines.Reader(source, loads=load_record_line)
        while True:
            try:
                value = reader.read(allow_none=True, skip_empty=True)
            except EOFError:
                return
            except jsonlines.InvalidLineError as exc:
                cause = exc.__cause__ if exc.__cause__ is not None else exc
                yield _Line(source.number, source.start, source.end, source.ended, None, str(cause), parsed=False)
                continue
            record = value if isinstance(value, dict) else None
            problem = "" if record is not None else "not a JSON object"
            yield _Line(source.number, source.start, source.end, source.ended, record, problem, parsed=True)


def read_records(run_dir: Path, *, torn_tail: bool = True) -> Iterator[dict[str, Any]]:
    """The CaseRecords of a run folder's results.jsonl; a line that cannot be read is an UnreadableRecord.

    Each is a JSON object as read whose fields hold what ``record.CaseRecord`` says
    (:func:`record_problems`); a line whose field does not is refused too, naming
    the file, line, field and problem.

    A torn last line (no newline after it: a write cut short by kill -9 or a full
    disk) is skipped when ``torn_tail`` (readers that only show a run), and refused
    otherwise (commands that write what they read, which must not drop it); any
    other unreadable line is always refused, naming the file and line.
    """
    path = run_dir / RunFolder.RESULTS
    for line in _lines(path):
        if line.record is not None:
            found = record_problems(line.record)
            if found:
                raise UnreadableRecord(f"{readback.file_problem(f'{path}:{line.number}', found)}; nothing was changed")
            yield line.record
        elif line.parsed:
            raise UnreadableRecord(f"{path}:{line.number}: a record must be a JSON object; nothing was changed")
        elif torn_tail and not line.ended:
            return
        else:
            raise UnreadableRecord(
                f"{path}:{line.number}: cannot read this record ({line.problem}); nothing was changed"
            )


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
    path = run_dir / RunFolder.RESULTS
    size = path.stat().st_size
    records: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    last: _Line | None = None
    for line in _lines(path):
        if line.record is None:
            if line.end == size:  # the last line of the file, newline or not: a write cut short
                with path.open("r+b") as fh:
                    fh.truncate(line.start)
                return Repair(records, cut_bytes=size - line.start)
            raise RunFolderError(f"{path} line {line.number} is not a JSON record; this run cannot be resumed exactly")
        found = record_problems(line.record)
        if found:
            raise RunFolderError(
                f"{readback.file_problem(f'{path}:{line.number}', found)}; this run cannot be resumed exactly"
            )
        key = line.record.get("key")
        if isinstance(key, str) and key:
            if key in seen:
                raise RunFolderError(
                    f"{path} lines {seen[key]} and {line.number} are two records of {key}; this run cannot be resumed exactly"
                )
            seen[key] = line.number
        records.append(line.record)
        last = line
    if last is not None and not last.ended:
        with path.open("ab") as fh:
            fh.write(b"\n")
        return Repair(records, newline_added=True)
    return Repair(records)


# --------------------------------------------------------------------------- the folder


class RunFolder:
    """One run's folder (``<output>/<run id>``): results.jsonl streamed per case, metrics.json and config.json,
    and the output folder's ``latest``."""

    RESULTS = "results.jsonl"
    METRICS = "metrics.json"
    CONFIG = "config.json"
    REPORT = "report.html"
    LATEST = "latest"

    def __init__(self, run_dir: Path, *, config: Callable[[], dict[str, Any]] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.output_dir = self.run_dir.parent
        self.run_id = self.run_dir.name
        self._results: IO[str] | None = None  # opened with the first record: a run that ran nothing leaves no folder
        self._writer: jsonlines.Writer | None = None
        self._config = config  # config.json written with the first record too: a killed run still says how it was made

    @classmethod
    def new(cls, output_dir: Path, run_id: str, *, config: Callable[[], dict[str, Any]] | None = None) -> RunFolder:
        """The folder of run ``run_id`` under ``output_dir`` (made with the first record)."""
        return cls(Path(output_dir) / run_id, config=config)

    @property
    def results_path(self) -> Path:
        return self.run_dir / self.RESULTS

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / self.METRICS

    @property
    def config_path(self) -> Path:
        return self.run_dir / self.CONFIG

    @property
    def report_path(self) -> Path:
        return self.run_dir / self.REPORT

    # -- writing

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one CaseRecord and flush it, so an interrupted run keeps it."""
        if self._writer is None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if self._config is not None and not self.config_path.exists():
                self.write_config(self._config())
            self._results = self.results_path.open("a", encoding="utf-8")
            self._writer = _jsonl_writer(self._results)
        self._writer.write(record)

    def write_records(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Replace results.jsonl with ``records``, atomically (``rageval judge``)."""
        buffer = io.StringIO()
        with _jsonl_writer(buffer) as writer:
            writer.write_all(records)
        write_text_atomic(self.results_path, buffer.getvalue())

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        write_json_atomic(self.metrics_path, stamped(metrics))

    def write_config(self, config: dict[str, Any]) -> None:
        write_json_atomic(self.config_path, stamped(config))

    def move_latest(self) -> None:
        """Point the output folder's ``latest`` at this run."""
        write_text_atomic(self.output_dir / self.LATEST, self.run_id + "\n")

    def close(self) -> None:
        """Close results.jsonl (idempotent)."""
        if self._writer is not None:
            self._writer.close()
        if self._results is not None:
            self._results.close()
        self._writer = self._results = None

    def finish(self, metrics: dict[str, Any], config: dict[str, Any], *, move_latest: bool = True) -> None:
        """Close results.jsonl and write metrics.json, config.json and (unless told not to) ``latest``."""
        self.close()
        self.write_metrics(metrics)
        self.write_config(config)
        if move_latest:
            self.move_latest()

    # -- reading

    def records(self, *, torn_tail: bool = True) -> Iterator[dict[str, Any]]:
        """The records of results.jsonl (see :func:`read_records`)."""
        return read_records(self.run_dir, torn_tail=torn_tail)

    def metrics(self) -> dict[str, Any]:
        """metrics.json, checked (readback.METRICS), or {} when there is none; RunFolderError when it is damaged."""
        return read_checked(self.metrics_path, readback.METRICS)

    def config(self) -> dict[str, Any]:
        """config.json, checked (readback.CONFIG), or {} when there is none; RunFolderError when it is damaged."""
        return read_checked(self.config_path, readback.CONFIG)

    def record_index(self) -> RecordIndex:
        """results.jsonl indexed by key (see :class:`RecordIndex`); OSError when it cannot be read."""
        return RecordIndex(self.results_path)

    def repair(self) -> Repair:
        """results.jsonl mended for a resume (see :func:`repair_results`)."""
        return repair_results(self.run_dir)


class RecordIndex:
    """Where each record of a results.jsonl lies, by key: one record is read back at a time.

    Built in one streamed pass (only keys and byte offsets are kept, never the records), so a report
    of thousands of cases can look up a baseline's old answer and chunks without holding that run.
    The first record of a key wins; lines that cannot be read are left out (it only shows a run).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._where: dict[str, tuple[int, int]] = {}
        for line in _lines(self.path):
            key = line.record.get("key") if line.record is not None else None
            if isinstance(key, str) and key and key not in self._where:
                self._where[key] = (line.start, line.end)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def get(self, key: str) -> dict[str, Any] | None:
        """The record of ``key`` as read now, or None (not there, or the file changed under it)."""
        where = self._where.get(key)
        if where is None:
            return None
        start, end = where
        try:
            with self.path.open("rb") as fh:
                fh.seek(start)
                value = load_record_line(fh.read(end - start))
        except (OSError, ValueError):
            return None
        if not isinstance(value, dict) or value.get("key") != key or record_problems(value):
            return None  # (a record whose fields cannot be shown is left out, as an unreadable line is)
        return value


# --------------------------------------------------------------------------- checks and the resume lock


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


class RunLock:
    """An exclusive lock on a run folder (``fcntl.flock`` on ``.rageval-resume.lock``), so two sessions never
    resume one run at once. The kernel drops it when its process dies (kill -9 leaves no stale lock)."""

    NAME = ".rageval-resume.lock"

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / self.NAME
        self._fd: int | None = None

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
                    f"{self.path.parent} is being resumed by {who} (it holds {self.path.name}); wait for that session to end"
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
