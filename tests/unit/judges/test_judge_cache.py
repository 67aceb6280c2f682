"""Tests of judges/cache.py on real SQLite files (no mocks): keys, hits, errors, concurrency, secrets."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from needs import need_module

from pytest_rageval.judges.base import CLASSIFIERS, SCALES, Judge, JudgeError, JudgeInput, Verdict
from pytest_rageval.judges.cache import DB_NAME, CachedJudge, JudgeCache, JudgeCacheError

SECRET = "sk-test-SECRET-never-store-7f3a9c21"

DESCRIBE: dict[str, Any] = {
    "name": "openai",
    "model": "gpt-4o-mini",
    "base_url": "https://judge.example.com/v1",
    "prompt_versions": {"groundedness": "groundedness-v3", "correctness": "correctness-v2"},
    "temperature": 0.0,
    "seed": 1234,
    "json_mode": "json_schema",
    "heuristic": False,
}

INP = JudgeInput(
    question="When was the bridge opened?",
    answer="It opened in 1932.",
    contexts=("The bridge opened in 1932.", "It spans the harbour."),
    context_ids=("doc-1", "doc-2"),
    reference_answer="1932",
    key_facts=("opened 1932", "harbour bridge"),
)


def key(judge: dict[str, Any] = DESCRIBE, metric: str = "groundedness", inp: JudgeInput = INP, repeat: int = 0) -> str:
    return JudgeCache.make_key(judge=judge, metric=metric, inp=inp, repeat_index=repeat)


def with_judge(**changes: Any) -> dict[str, Any]:
    return {**DESCRIBE, **changes}


def with_input(**changes: Any) -> JudgeInput:
    return dataclasses.replace(INP, **changes)


def make_verdict(metric: str = "groundedness", score: float = 4.0, reasoning: str = "all claims supported") -> Verdict:
    return Verdict(
        metric=metric,
        score=score,
        reasoning=reasoning,
        supported_claims=["opened in 1932"],
        unsupported_claims=[],
        raw='{"score": 4, "reasoning": "all claims supported"}',
        prompt_tokens=321,
        completion_tokens=45,
        cost_usd=0.00123,
        attempts=2,
    )


META = {
    "model": "gpt-4o-mini",
    "metric": "groundedness",
    "prompt_version": "groundedness-v3",
    "created_at": "2024-01-01T00:00:00+00:00",
}


class CountingJudge(Judge):
    """A tiny real judge: holds a key and headers like the OpenAI judge, counts calls, may fail first."""

    def __init__(self, *, fail_times: int = 0, api_key: str = SECRET) -> None:
        super().__init__(name="openai")
        self.api_key = api_key
        self.headers = {"Authorization": f"Bearer {api_key}", "X-Api-Key": api_key}
        self.fail_times = fail_times
        self.json_mode = "json_schema"
        self.calls = 0
        self.closed = False

    def describe(self) -> dict[str, Any]:
        # What a real judge reports: configuration, never a key.
        return {**DESCRIBE, "json_mode": self.json_mode}

    def supports(self, metric: str) -> bool:
        return metric in SCALES or metric in CLASSIFIERS

    async def judge(self, metric: str, inp: JudgeInput, *, repeat_index: int = 0) -> Verdict:
        self.calls += 1
        if self.calls <= self.fail_times:
            raise JudgeError(metric, "malformed answer after 2 re-asks")
        await asyncio.sleep(0)
        return make_verdict(metric, score=float(len(inp.answer) % 6), reasoning=f"{inp.question} #{repeat_index}")

    async def aclose(self) -> None:
        self.closed = True


class LeakyDescribeJudge(CountingJudge):
    """A badly written judge whose describe() leaks its key: the cache must still never store it."""

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "api_key": self.api_key, "default_headers": dict(self.headers)}


# ---------------------------------------------------------------------- keys

KEY_CHANGES: dict[str, Callable[[], str]] = {
    "judge name": lambda: key(with_judge(name="lexical")),
    "model": lambda: key(with_judge(model="gpt-4o")),
    "base_url": lambda: key(with_judge(base_url="http://localhost:8080/v1")),
    "prompt version": lambda: key(
        with_judge(prompt_versions={**DESCRIBE["prompt_versions"], "groundedness": "groundedness-v4"})
    ),
    "metric": lambda: key(metric="correctness"),
    "temperature": lambda: key(with_judge(temperature=0.2)),
    "seed": lambda: key(with_judge(seed=1235)),
    "question": lambda: key(inp=with_input(question="When was the bridge closed?")),
    "answer": lambda: key(inp=with_input(answer="It opened in 1933.")),
    "one context's text": lambda: key(inp=with_input(contexts=("The bridge opened in 1932.", "It spans the river."))),
    "context order": lambda: key(inp=with_input(contexts=tuple(reversed(INP.contexts)))),
    "extra context": lambda: key(inp=with_input(contexts=(*INP.contexts, "More text."))),
    "no contexts": lambda: key(inp=with_input(contexts=())),
    "reference answer": lambda: key(inp=with_input(reference_answer="1933")),
    "reference None": lambda: key(inp=with_input(reference_answer=None)),
    "reference empty": lambda: key(inp=with_input(reference_answer="")),
    "key fact text": lambda: key(inp=with_input(key_facts=("opened 1933", "harbour bridge"))),
    "key facts added": lambda: key(inp=with_input(key_facts=(*INP.key_facts, "steel arch"))),
    "key facts order": lambda: key(inp=with_input(key_facts=tuple(reversed(INP.key_facts)))),
    "repeat index": lambda: key(repeat=1),
}


def test_judge_without_per_metric_versions_keys_on_its_overall_version() -> None:
    bare = {k: v for k, v in DESCRIBE.items() if k != "prompt_versions"}
    assert key({**bare, "prompt_version": "lexical-v1"}) != key({**bare, "prompt_version": "lexical-v2"})
    # With a per-metric version, the overall one (covering other metrics) does not matter.
    assert key(with_judge(prompt_version="a")) == key(with_judge(prompt_version="b")) == key()


def test_key_is_sha256_hex_and_deterministic() -> None:
    k = key()
    assert len(k) == 64 and all(c in "0123456789abcdef" for c in k)
    assert key() == k == key(dict(reversed(list(DESCRIBE.items()))))


@pytest.mark.parametrize("what", sorted(KEY_CHANGES))
def test_key_changes_with_each_part(what: str) -> None:
    assert KEY_CHANGES[what]() != key()


def test_all_key_variants_are_distinct() -> None:
    keys = [fn() for fn in KEY_CHANGES.values()] + [key()]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize(
    "judge",
    [
        with_judge(json_mode="json_object"),
        with_judge(json_mode="text"),
        {k: v for k, v in DESCRIBE.items() if k != "json_mode"},
        with_judge(heuristic=True),
        with_judge(temperature=0),  # 0 and 0.0 are the same temperature
        with_judge(base_url="https://judge.example.com/v1/"),  # same endpoint
        with_judge(
            prompt_versions={**DESCRIBE["prompt_versions"], "correctness": "correctness-v9"}
        ),  # other metric's prompt
        with_judge(api_key=SECRET, default_headers={"Authorization": f"Bearer {SECRET}"}),  # never part of a key
    ],
    ids=[
        "json_object",
        "text",
        "json_mode-absent",
        "heuristic-flag",
        "int-temperature",
        "trailing-slash",
        "other-metric-prompt",
        "api-key-in-describe",
    ],
)
def test_key_ignores_json_mode_and_non_key_fields(judge: dict[str, Any]) -> None:
    assert key(judge) == key()


# ------------------------------------------------------------- get and put


def test_get_after_put_returns_equal_verdict_marked_cached(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "c")
    assert not (tmp_path / "c").exists()  # lazy
    assert cache.get(key()) is None
    verdict = make_verdict()
    cache.put(key(), verdict, meta=META)
    got = cache.get(key())
    assert got is not None
    assert got.cached is True and got.cost_usd == 0.0
    assert (got.prompt_tokens, got.completion_tokens) == (321, 45)
    assert got.model_dump(exclude={"cached", "cost_usd"}) == verdict.model_dump(exclude={"cached", "cost_usd"})
    assert (cache.stats.hits, cache.stats.misses) == (1, 1)
    assert len(cache) == 1
    cache.close()

    # Persistent, raw (uncached, with its original cost) and with its meta columns.
    db = tmp_path / "c" / DB_NAME
    assert _rows(db, "PRAGMA journal_mode") == [("wal",)]
    [(stored, model, metric, pv, created)] = _rows(
        db, "SELECT verdict, model, metric, prompt_version, created_at FROM verdicts"
    )
    assert Verdict.model_validate_json(stored) == verdict
    assert (model, metric, pv, created) == ("gpt-4o-mini", "groundedness", "groundedness-v3", META["created_at"])
    reopened = JudgeCache(tmp_path / "c")
    assert reopened.get(key()) == got
    reopened.close()


def test_put_replaces_and_unreadable_row_is_a_miss(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    cache.put(key(), make_verdict(score=1.0), meta=META)
    cache.put(key(), make_verdict(score=2.0), meta=META)
    assert len(cache) == 1 and cache.get(key()).score == 2.0  # type: ignore[union-attr]
    _rows(tmp_path / DB_NAME, "UPDATE verdicts SET verdict = ?", ('{"not": "a verdict"}',))
    assert cache.get(key()) is None
    cache.put(key(), make_verdict(score=3.0), meta=META)
    assert cache.get(key()).score == 3.0  # type: ignore[union-attr]
    cache.close()


def test_clear_returns_count_and_empties(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "c")
    assert cache.clear() == 0 and not (tmp_path / "c" / DB_NAME).exists()
    for i in range(7):
        cache.put(key(repeat=i), make_verdict(), meta=META)
    other = JudgeCache(tmp_path / "c")  # another session holding the store open
    assert other.get(key(repeat=3)) is not None
    assert cache.clear() == 7
    assert len(cache) == 0 and other.get(key(repeat=3)) is None
    cache.put(key(), make_verdict(), meta=META)
    assert other.get(key()) is not None
    assert cache.clear() == 1
    cache.close()
    other.close()


# ------------------------------------------------------------- CachedJudge


def test_errors_are_never_cached(tmp_path: Path) -> None:
    async def main() -> None:
        inner = CountingJudge(fail_times=2)
        cache = JudgeCache(tmp_path)
        judge = CachedJudge(inner, cache)
        for attempt in (1, 2):
            with pytest.raises(JudgeError):
                await judge.judge("groundedness", INP)
            assert inner.calls == attempt and len(cache) == 0
        verdict = await judge.judge("groundedness", INP)
        assert inner.calls == 3 and len(cache) == 1 and verdict.cached is False
        again = await judge.judge("groundedness", INP)
        assert inner.calls == 3 and again.cached is True and again.score == verdict.score
        assert (judge.hits, judge.misses) == (1, 3)
        await judge.aclose()
        assert inner.closed
        cache.close()

    asyncio.run(main())


def test_cached_judge_hit_makes_no_inner_call_and_survives_json_mode_fallback(tmp_path: Path) -> None:
    async def main() -> None:
        first = CountingJudge()
        judge = CachedJudge(first, JudgeCache(tmp_path))
        assert (judge.name, judge.heuristic, judge.describe()) == ("openai", False, first.describe())
        assert judge.supports("groundedness") and not judge.supports("bogus")
        verdicts = [await judge.judge(m, INP, repeat_index=r) for m in ("groundedness", "correctness") for r in (0, 1)]
        assert first.calls == 4 and (judge.hits, judge.misses) == (0, 4)

        # A new session: the server rejected json_schema so the judge fell back to json_object.
        second = CountingJudge()
        second.json_mode = "json_object"
        cache2 = JudgeCache(tmp_path)
        judge2 = CachedJudge(second, cache2)
        again = [await judge2.judge(m, INP, repeat_index=r) for m in ("groundedness", "correctness") for r in (0, 1)]
        assert second.calls == 0 and (judge2.hits, judge2.misses) == (4, 0)
        assert (cache2.stats.hits, cache2.stats.misses) == (4, 0)
        assert [v.model_dump(exclude={"cached", "cost_usd"}) for v in again] == [
            v.model_dump(exclude={"cached", "cost_usd"}) for v in verdicts
        ]
        assert all(v.cached and v.cost_usd == 0.0 and v.prompt_tokens == 321 for v in again)

        # A changed answer is a miss, asked once.
        await judge2.judge("groundedness", with_input(answer="It opened in 1933."))
        assert second.calls == 1 and judge2.misses == 1

    asyncio.run(main())


def test_no_cache_passes_through_and_counts_misses(tmp_path: Path) -> None:
    async def main() -> None:
        inner = CountingJudge()
        judge = CachedJudge(inner, None)
        for _ in range(3):
            v = await judge.judge("groundedness", INP)
            assert v.cached is False
        assert inner.calls == 3 and (judge.hits, judge.misses) == (0, 3)

    asyncio.run(main())
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------- concurrency


def _mp_input(owner: int, i: int) -> JudgeInput:
    prefix = "shared" if owner < 0 else f"worker{owner}"
    return dataclasses.replace(INP, question=f"{prefix} question {i}", answer=f"{prefix} answer {i}")


def _mp_jobs(wid: int) -> list[JudgeInput]:
    return [_mp_input(wid, i) for i in range(300)] + [_mp_input(-1, j) for j in range(50)]


def _mp_expected(inp: JudgeInput) -> Verdict:
    return make_verdict(score=float(len(inp.question) % 6), reasoning=f"for {inp.question}")


def _writer(directory: str, wid: int, barrier: Any, times: Any) -> None:
    """Process body: open the cache, wait for the others, then put 350 entries in random order."""
    cache = JudgeCache(Path(directory))
    cache.open()
    jobs = _mp_jobs(wid)
    random.Random(wid).shuffle(jobs)
    barrier.wait(timeout=60)
    start = time.perf_counter()
    for inp in jobs:
        cache.put(key(inp=inp), _mp_expected(inp), meta=META)
    times.put((wid, time.perf_counter() - start))
    cache.close()


def _reader(directory: str, wid: int) -> tuple[int, int, int, int]:
    """Process body of a second run: every lookup through CachedJudge; returns hits, misses, inner calls, wrong."""

    async def main() -> tuple[int, int, int, int]:
        inner = CountingJudge()
        judge = CachedJudge(inner, JudgeCache(Path(directory)))
        wrong = 0
        for inp in _mp_jobs(wid):
            got = await judge.judge("groundedness", inp)
            if got.model_dump(exclude={"cached", "cost_usd"}) != _mp_expected(inp).model_dump(
                exclude={"cached", "cost_usd"}
            ):
                wrong += 1
        return judge.hits, judge.misses, inner.calls, wrong

    return asyncio.run(main())


def test_three_processes_write_at_once_and_a_second_run_only_hits(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    times = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), wid, barrier, times)) for wid in range(3)]
    for p in procs:
        p.start()
    durations = dict(times.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert sorted(durations) == [0, 1, 2]

    assert _rows(tmp_path / DB_NAME, "PRAGMA integrity_check") == [("ok",)]
    assert _rows(tmp_path / DB_NAME, "SELECT count(*) FROM verdicts") == [(900 + 50,)]

    cache = JudgeCache(tmp_path)
    every = [inp for wid in range(3) for inp in _mp_jobs(wid)]
    for inp in every:
        got = cache.get(key(inp=inp))
        assert got is not None and got.reasoning == f"for {inp.question}"
    cache.close()

    with ctx.Pool(3) as pool:
        results = pool.starmap(_reader, [(str(tmp_path), wid) for wid in range(3)])
    assert results == [(350, 0, 0, 0)] * 3


def test_threads_share_one_cache(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(tid: int) -> None:
        try:
            barrier.wait(timeout=30)
            for i in range(100):
                k = key(repeat=tid * 1000 + i)
                cache.put(k, make_verdict(score=float(i % 6)), meta=META)
                got = cache.get(k)
                assert got is not None and got.score == float(i % 6)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert len(cache) == 800
    assert (cache.stats.hits, cache.stats.misses) == (800, 0)
    cache.close()


# ------------------------------------------------------------- safety


def _rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the file with a plain sqlite3 connection (committed, then closed)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        with conn:
            return conn.execute(sql, params).fetchall()


def _cache_file_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name.startswith(DB_NAME)}


def test_secret_never_reaches_the_files(tmp_path: Path) -> None:
    needles = [SECRET.encode(), SECRET.encode("utf-16-le"), b"Bearer"]

    async def main() -> None:
        for n, inner in ((40, CountingJudge()), (80, LeakyDescribeJudge())):
            cache = JudgeCache(tmp_path)
            judge = CachedJudge(inner, cache)
            for i in range(n):
                await judge.judge("groundedness", with_input(question=f"q{i}"), repeat_index=i % 3)
            files = _cache_file_bytes(tmp_path)
            assert files.get(f"{DB_NAME}-wal")  # the WAL is checked while live
            for name, data in files.items():
                for needle in needles:
                    assert needle not in data, f"{needle!r} found in {name}"
            assert (judge.hits, judge.misses) == (n - 40, 40)
            await judge.aclose()
            cache.close()
        # The leaky describe() produced the same keys (40 hits): its secret had nowhere to go.
        check = JudgeCache(tmp_path)
        assert len(check) == 80
        check.close()

    asyncio.run(main())
    for name, data in _cache_file_bytes(tmp_path).items():
        for needle in needles:
            assert needle not in data, f"{needle!r} found in {name} after close"


def test_garbage_database_gives_a_clear_error_and_clear_recovers(tmp_path: Path) -> None:
    db = tmp_path / DB_NAME
    db.write_bytes(b"this is not an sqlite database\n" * 200)
    cache = JudgeCache(tmp_path)
    calls: list[Callable[[], object]] = [
        lambda: cache.get(key()),
        lambda: cache.put(key(), make_verdict(), meta=META),
        cache.open,
    ]
    for call in calls:
        with pytest.raises(JudgeCacheError) as info:
            call()
        assert str(db) in str(info.value) and "--rageval-clear-cache" in str(info.value)

    async def through_judge() -> None:
        with pytest.raises(JudgeCacheError, match="--rageval-clear-cache"):
            await CachedJudge(CountingJudge(), cache).judge("groundedness", INP)

    asyncio.run(through_judge())
    assert cache.clear() == 0
    assert not db.exists()
    cache.put(key(), make_verdict(), meta=META)
    assert cache.get(key()) is not None
    cache.close()


def test_secret_of_the_real_openai_judge_never_reaches_the_files(tmp_path: Path) -> None:
    """describe() comes from the real OpenAI judge built with a key; answers are local (no network)."""
    openai_judge = need_module("pytest_rageval.judges.openai_judge")
    real = openai_judge.OpenAIJudge(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key=SECRET)
    assert SECRET not in repr(real.describe())

    class RealDescribe(CountingJudge):
        def describe(self) -> dict[str, Any]:
            return cast("dict[str, Any]", real.describe())

    async def main() -> None:
        cache = JudgeCache(tmp_path)
        judge = CachedJudge(RealDescribe(), cache)
        for i in range(30):
            await judge.judge(("groundedness", "correctness", "abstention")[i % 3], with_input(question=f"q{i}"))
        files = _cache_file_bytes(tmp_path)
        assert files[f"{DB_NAME}-wal"]
        for name, data in files.items():
            assert SECRET.encode() not in data and b"Bearer" not in data, name
        assert all(r[0] for r in _rows(tmp_path / DB_NAME, "SELECT prompt_version FROM verdicts"))
        cache.close()

    asyncio.run(main())
    for name, data in _cache_file_bytes(tmp_path).items():
        assert SECRET.encode() not in data, name
