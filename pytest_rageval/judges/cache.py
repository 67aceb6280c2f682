"""Persistent judge cache.

One SQLite file, ``<cache dir>/judge_cache.sqlite3``, in WAL mode. Every
``put`` is one short ``INSERT OR REPLACE`` transaction, so pytest-xdist
workers and concurrent sessions merge entries and never rewrite the store.
Rows hold raw verdicts (``Verdict.model_dump_json()``); thresholds are applied
later, so changing one costs no judge request. Errors are never stored.

The key is a sha256 over an explicit whitelist of fields (see ``make_key``):
nothing else from a judge's ``describe()`` can reach the key or the file, so
API keys and headers never do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from pytest_rageval.errors import DataError
from pytest_rageval.retry import backoff_delay

from .base import Judge, JudgeInput, Verdict

__all__ = [
    "DB_NAME",
    "KEY_VERSION",
    "CacheStats",
    "CachedJudge",
    "JudgeCache",
    "JudgeCacheError",
    "JudgeCacheLockedError",
    "check_judge_cache",
]

DB_NAME = "judge_cache.sqlite3"
#: Bumped whenever the key's parts or their encoding change (old rows then simply miss).
KEY_VERSION = 1
BUSY_TIMEOUT_S = 30.0
#: Total time the retry loop keeps trying on "database is locked" / "busy" (on top of busy_timeout).
LOCK_RETRY_S = 60.0

_SUFFIXES = ("", "-wal", "-shm", "-journal")
_SCHEMA = "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, verdict TEXT NOT NULL, model TEXT, metric TEXT, prompt_version TEXT, created_at TEXT)"

T = TypeVar("T")


class JudgeCacheError(DataError, RuntimeError):
    """The cache file is corrupt or unreadable; the message names it and the fix."""


class JudgeCacheLockedError(JudgeCacheError):
    """The store stayed locked by other processes for longer than the retry window."""


@dataclass
class CacheStats:
    """Lookups made by this process through one ``JudgeCache``."""

    hits: int = 0
    misses: int = 0


def _is_lock_error(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _num(value: Any) -> Any:
    """0 and 0.0 must hash alike: ints/floats become floats (bools and others pass through)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return float(value)


def _prompt_version(judge: Mapping[str, Any], metric: str) -> Any:
    """The metric's prompt version; a judge without per-metric versions falls back to its overall one."""
    versions = judge.get("prompt_versions")
    if isinstance(versions, Mapping) and versions.get(metric) is not None:
        return versions[metric]
    return judge.get("prompt_version")


class JudgeCache:
    """Entry-level, process- and thread-safe verdict store. Opens its file lazily."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        self.stats = CacheStats()
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None

    # ------------------------------------------------------------------ key
    @staticmethod
    def make_key(*, judge: Mapping[str, Any], metric: str, inp: JudgeInput, repeat_index: int) -> str:
        """sha256 hex of the canonical JSON of exactly the parts that can change a verdict.

        Parts: key version, judge name, model, base URL (trailing ``/`` dropped),
        this metric's prompt version (``prompt_versions[metric]``; if a judge lists
        none for it, its whole ``prompt_version``), temperature, seed, metric, question, answer,
        context hash, reference answer, key facts (in order), repeat index.
        ``json_mode`` is left out on purpose (a mode fallback must not cost a miss),
        as is every other ``describe()`` field.
        """
        base_url = judge.get("base_url")
        if isinstance(base_url, str):
            base_url = base_url.rstrip("/")
        parts = {
            "v": KEY_VERSION,
            "judge": judge.get("name"),
            "model": judge.get("model"),
            "base_url": base_url,
            "prompt_version": _prompt_version(judge, metric),
            "temperature": _num(judge.get("temperature")),
            "seed": judge.get("seed"),
            "metric": metric,
            "question": inp.question,
            "answer": inp.answer,
            "context_hash": inp.context_hash(),
            "reference_answer": inp.reference_answer,
            "key_facts": list(inp.key_facts),
            "repeat_index": int(repeat_index),
        }
        return hashlib.sha256(_canonical(parts).encode("utf-8")).hexdigest()

    # ----------------------------------------------------------- connection
    def _corrupt(self, exc: BaseException) -> JudgeCacheError:
        return JudgeCacheError(
            f"judge cache {self.path} is corrupt or unreadable ({exc}); run pytest with --rageval-clear-cache to delete it (or remove the file)"
        )

    def _connect(self) -> sqlite3.Connection:
        """Return this process's connection, opening and initialising it on first use."""
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        # A connection inherited through fork() must not be used (or closed) in the child.
        self._conn = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise JudgeCacheError(f"judge cache directory {self.directory} cannot be created: {exc}") from exc
        self._write_gitignore()
        try:
            conn = sqlite3.connect(
                str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._corrupt(exc) from exc
        try:
            self._retry(lambda: self._init_db(conn))
        except JudgeCacheError:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        return conn

    @staticmethod
    def _init_db(conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            # Persistent in the file; falls back silently where WAL is unsupported.
            conn.execute("PRAGMA journal_mode=WAL").fetchone()
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(_SCHEMA)

    def _write_gitignore(self) -> None:
        try:
            with open(self.directory / ".gitignore", "x", encoding="utf-8") as fh:
                fh.write("# created by pytest-rageval\n*\n")
        except OSError:
            pass

    def _retry(self, op: Callable[[], T], conn: sqlite3.Connection | None = None) -> T:
        """Run ``op``; on "database is locked"/"busy" back off and try again, up to LOCK_RETRY_S."""
        deadline = time.monotonic() + LOCK_RETRY_S
        attempt = 0
        while True:
            try:
                return op()
            except sqlite3.Error as exc:
                if conn is not None and conn.in_transaction:
                    try:
                        conn.rollback()
                    except sqlite3.Error:
                        pass
                if _is_lock_error(exc) and time.monotonic() < deadline:
                    time.sleep(backoff_delay(attempt, base=0.005, cap=0.5))
                    attempt += 1
                    continue
                if _is_lock_error(exc):
                    raise JudgeCacheLockedError(
                        f"judge cache {self.path} stayed locked for {LOCK_RETRY_S:.0f}s: {exc}"
                    ) from exc
                raise self._corrupt(exc) from exc

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            conn = self._connect()
            return self._retry(lambda: fn(conn), conn)

    # ------------------------------------------------------------------ API
    def open(self) -> None:
        """Open and check the store now (e.g. at session start); raises ``JudgeCacheError``.

        Reads the row count and one row's columns, so garbage bytes, a file that is
        not a database, a ``verdicts`` table of another shape or a file that cannot
        be opened fail here; damage deeper in the file fails at the read that meets it.
        """
        self._run(self._check_shape)

    @staticmethod
    def _check_shape(conn: sqlite3.Connection) -> None:
        """Raise ``sqlite3.Error`` unless ``verdicts`` can be counted and has the columns we read."""
        conn.execute("SELECT count(*) FROM verdicts").fetchone()
        conn.execute("SELECT key, verdict FROM verdicts LIMIT 1").fetchall()

    def get(self, key: str) -> Verdict | None:
        """The stored verdict with ``cached=True`` and ``cost_usd=0`` (tokens as stored), or None."""
        row = self._run(lambda conn: conn.execute("SELECT verdict FROM verdicts WHERE key = ?", (key,)).fetchone())
        verdict: Verdict | None = None
        if row is not None:
            try:
                verdict = Verdict.model_validate_json(row[0])
            except ValidationError:
                verdict = None  # unreadable row (e.g. an older format): a miss; the next put replaces it
        with self._lock:
            if verdict is None:
                self.stats.misses += 1
            else:
                self.stats.hits += 1
        if verdict is None:
            return None
        return verdict.model_copy(update={"cached": True, "cost_usd": 0.0})

    def put(self, key: str, verdict: Verdict, *, meta: Mapping[str, Any]) -> None:
        """Store one raw verdict (one short transaction). ``meta``: model, metric, prompt_version, created_at."""
        payload = verdict.model_copy(update={"cached": False}).model_dump_json()
        created = meta.get("created_at") or datetime.now(timezone.utc).isoformat(timespec="seconds")

        def text(value: Any) -> str | None:
            return None if value is None else str(value)

        row = (
            key,
            payload,
            text(meta.get("model")),
            text(meta.get("metric", verdict.metric)),
            text(meta.get("prompt_version")),
            text(created),
        )
        self._run(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO verdicts (key, verdict, model, metric, prompt_version, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )
        )

    def __len__(self) -> int:
        return int(self._run(lambda conn: conn.execute("SELECT count(*) FROM verdicts").fetchone()[0]))

    def clear(self) -> int:
        """Delete every entry and return how many there were.

        A healthy store is emptied in one transaction (other sessions may hold it
        open); a corrupt or unreadable one is deleted from disk (returns 0).
        """

        def wipe(conn: sqlite3.Connection) -> int:
            self._check_shape(conn)  # a table of another shape is deleted with the file below
            conn.execute("BEGIN IMMEDIATE")
            n = int(conn.execute("SELECT count(*) FROM verdicts").fetchone()[0])
            conn.execute("DELETE FROM verdicts")
            conn.execute("COMMIT")
            return n

        with self._lock:
            if not self.path.exists():
                return 0
            try:
                return self._run(wipe)
            except JudgeCacheLockedError:
                raise
            except JudgeCacheError:
                self.close()
                for suffix in _SUFFIXES:
                    self._remove(Path(f"{self.path}{suffix}"))
                return 0

    @staticmethod
    def _remove(path: Path) -> None:
        """Delete one store file; an empty folder in its place goes too, anything else is a ``JudgeCacheError``."""
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()
            else:
                path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise JudgeCacheError(
                f"judge cache {path} cannot be deleted ({exc.strerror or exc}); remove it by hand"
            ) from None

    def close(self) -> None:
        """Close this process's connection (the next call reopens it)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                try:
                    conn.close()
                except sqlite3.Error:
                    pass


def check_judge_cache(judge: Any) -> None:
    """Open the cache in front of ``judge`` (a :class:`CachedJudge` with a cache) once and close it again.

    Called before any case runs, so a corrupt store is one ``JudgeCacheError``
    (naming the file and ``--rageval-clear-cache``) instead of an error per case.
    """
    cache = getattr(judge, "cache", None) if isinstance(judge, CachedJudge) else None
    if cache is not None:
        try:
            cache.open()
        finally:
            cache.close()


class CachedJudge(Judge):
    """A ``Judge`` that answers from a ``JudgeCache`` and asks ``inner`` only on a miss.

    ``cache=None`` (``--rageval-no-cache``) passes every call through and counts it
    as a miss. ``misses`` therefore equals the number of calls made to ``inner``
    (failed ones included); ``hits`` the number served from the store. SQLite work
    runs in ``asyncio.to_thread`` so a lock wait never stalls the event loop.
    """

    def __init__(self, inner: Judge, cache: JudgeCache | None) -> None:
        super().__init__(name=inner.name, heuristic=inner.heuristic)
        self.inner = inner
        self.cache = cache
        self._hits = 0
        self._misses = 0
        self._count_lock = threading.Lock()

    @property
    def hits(self) -> int:
        return self._hits

    @property
    def misses(self) -> int:
        return self._misses

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def warm(self) -> None:
        """Let the inner judge get ready for requests (:func:`warm`)."""
        warm(self.inner)

    def supports(self, metric: str) -> bool:
        return self.inner.supports(metric)

    def _count(self, hit: bool) -> None:
        with self._count_lock:
            if hit:
                self._hits += 1
            else:
                self._misses += 1

    async def judge(self, metric: str, inp: JudgeInput, *, repeat_index: int = 0) -> Verdict:
        """Cached verdict on a hit; otherwise ask ``inner`` and store its verdict (a ``JudgeError`` propagates, nothing is stored)."""
        if self.cache is None:
            self._count(False)
            return await self.inner.judge(metric, inp, repeat_index=repeat_index)
        described = self.inner.describe()
        key = JudgeCache.make_key(judge=described, metric=metric, inp=inp, repeat_index=repeat_index)
        cached = await asyncio.to_thread(self.cache.get, key)
        if cached is not None:
            self._count(True)
            return cached
        self._count(False)
        verdict = await self.inner.judge(metric, inp, repeat_index=repeat_index)
        meta = {
            "model": described.get("model"),
            "metric": metric,
            "prompt_version": _prompt_version(described, metric),
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        await asyncio.to_thread(self.cache.put, key, verdict, meta=meta)
        return verdict

    async def aclose(self) -> None:
        await self.inner.aclose()


def warm(judge: Any) -> None:
    """Tell ``judge`` that a case needing it has begun, when it has use for that (``warm()``: the OpenAI judge
    starts importing its SDK then, while the case waits for the RAG system)."""
    start = getattr(judge, "warm", None)
    if callable(start):
        start()
