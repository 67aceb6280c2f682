"""The spot check at the end of a run (``--rageval-spot-check``): the sampled judged cases re-judged by the second
model once every case ran, giving metrics.json's ``judge_reliability``. The sample and the re-judging itself
live in judges/spot_sample.py.
"""

from __future__ import annotations

from typing import Any

from pytest_rageval.judges import spot_sample
from pytest_rageval.judges.base import JudgeAuthError
from pytest_rageval.judges.spot_sample import SpotSample

from .evaluate import Engine
from .run_setup import RunSetup


def spot_check(
    setup: RunSetup, sample: SpotSample, aggregate: dict[str, Any], *, complete: bool
) -> tuple[dict[str, Any], list[str]]:
    """Re-judge ``sample`` with the second model (an incomplete run re-judges nothing); its spend is added to
    ``aggregate``. Returns ``judge_reliability`` and the notes for the summary."""
    spot_setup = setup.spot_setup
    assert spot_setup is not None
    s = setup.settings
    notes: list[str] = []
    chosen = sample.chosen() if complete else []
    results: list[dict[str, Any]] = []
    if chosen:
        engine = Engine(s.concurrency)
        try:
            results = engine.run(spot_sample.rejudge(spot_setup, chosen))
        except JudgeAuthError as exc:
            notes.append(f"spot check not made: {exc.message}")
        finally:
            engine.close(spot_setup.judge.aclose)
    for result in results:
        spent = result.pop("spent")
        aggregate["cost"]["judge_total_tokens"] += spent["judge_tokens"]
        aggregate["cost"]["judge_total_usd"] += spent["judge_cost_usd"]
        aggregate["judge_cache"]["hits"] += spent["hits"]
        aggregate["judge_cache"]["misses"] += spent["misses"]
    reliability = spot_sample.reliability(
        results, requested=s.spot_check, judged=sample.judged, model=s.spot_check_model
    )
    if not complete:
        notes.append("spot check not made: the run is incomplete")
    elif sample.judged < s.spot_check:
        notes.append(
            f"spot check: {s.spot_check} cases asked for, but only {sample.judged} got a judge verdict; re-judged {len(chosen)}"
        )
    failed = [r for r in results if r["error"]]
    if failed:
        notes.append(f"spot check: {len(failed)} of {len(results)} re-judgings failed ({failed[0]['error']})")
    return reliability, notes
