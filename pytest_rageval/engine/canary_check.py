"""The judge canary at the end of a judged run (ini ``rageval_judge_canary``): the canary's labelled answers
re-judged by a fresh judge without the cache, once, by the process that keeps the results (the xdist controller,
never a worker), giving metrics.json's ``judge_canary``. The items and the figures are judges/canary.py's; the
comparison with the baseline's canary is the gate's (gating.py).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from pytest_rageval.judges.base import JudgeAuthError
from pytest_rageval.judges.calibration_measure import set_hash
from pytest_rageval.judges.calibration_store import judge_identity
from pytest_rageval.judges.canary import judge_canary

from .evaluate import Engine
from .judge_factory import build_judge, judge_info
from .run_setup import RunSetup


def canary_check(
    setup: RunSetup, aggregate: dict[str, Any], *, complete: bool
) -> tuple[dict[str, Any] | None, list[str]]:
    """Re-judge the canary (nothing for an incomplete run, or without a judge or a canary); its spend is added
    to ``aggregate``. Returns metrics.json's ``judge_canary`` and the notes for the summary."""
    s = setup.settings
    items = setup.canary_items
    if not items or setup.judge_setup is None:
        return None, []
    if not complete:
        return None, ["judge canary not made: the run is incomplete"]
    fresh = build_judge(dataclasses.replace(s, no_cache=True), os.environ, limits=setup.limits)
    assert fresh is not None
    engine = Engine(s.concurrency)
    try:
        result = engine.run(judge_canary(fresh.judge, items, setup.judge_setup.metrics, concurrency=s.concurrency))
    except JudgeAuthError as exc:
        return None, [f"judge canary not made: {exc.message}"]
    finally:
        engine.close(fresh.judge.aclose)
    aggregate["cost"]["judge_total_tokens"] += result.tokens
    aggregate["cost"]["judge_total_usd"] += result.cost_usd
    identity = judge_identity(fresh.judge.describe(), judge_info(fresh.judge))
    path = setup.canary_path
    shown = "shipped" if s.calibration_set is None else _relative(path, s.rootdir)
    return result.as_dict(identity, shown, set_hash(path)), []


def _relative(path: Any, root: Any) -> str:
    try:
        return str(path.relative_to(root).as_posix())
    except ValueError:
        return str(path)
