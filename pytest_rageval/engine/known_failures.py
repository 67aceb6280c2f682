"""Known failures where a case's outcome is decided: the case runner of a serial session or of each xdist worker.

Each process reads the baseline itself (once, at its first case), so a case that failed in the baseline the same
way becomes an xfail on the worker that runs it, before pytest, JUnit XML or pytest-html see its report. The
verdicts are gate/known.py's; this module only finds the baseline, as the gate at the end would use it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_rageval.config.settings import Settings
from pytest_rageval.evaluation.record import CaseRecord
from pytest_rageval.gate.baseline_file import load_baseline
from pytest_rageval.gate.invariants import setting_differences
from pytest_rageval.gate.known import BaselineFailures, known_verdict
from pytest_rageval.sanitize import terminal_safe

if TYPE_CHECKING:
    from pytest_rageval.config.settings import Settings


class KnownFailures:
    """The baseline's failed cases as this process sees them, and each record's verdict against them."""

    def __init__(self, settings: Settings, judge: Mapping[str, Any]) -> None:
        self.settings = settings
        self.judge = dict(judge)  # this run's judge fields (metrics.json ``judge``): the invariants compare them

    @functools.cached_property
    def baseline(self) -> BaselineFailures | None:
        """The baseline's failed cases; None without a baseline, when updating it, or when the gate would refuse
        it for how it was made (another k or judge): then every threshold miss fails, as without one."""
        s = self.settings
        if s.baseline is None or s.update_baseline:
            return None
        try:
            metrics = load_baseline(s.baseline)
        except (ValueError, OSError):
            return None  # the gate at the end says why
        if metrics is None:
            return None
        if not s.ignore_invariants and setting_differences(metrics, {"k": s.k, "judge": self.judge}):
            return None
        return BaselineFailures.from_metrics(metrics)

    def mark(self, record: CaseRecord) -> None:
        """Add ``since_baseline`` to ``record`` when it is a known failure, one that got worse, or fixed; with
        ``rageval_known_failures = fail`` no case is a known failure (its miss fails), the others are still named."""
        baseline = self.baseline
        if baseline is None or not baseline.failed:
            return
        verdict = known_verdict(baseline, record)
        if verdict is None or (verdict.kind == "known" and self.settings.known_failures == "fail"):
            return
        # the baseline's run id came from a file: no escape sequence of it reaches a terminal or pytest's reason
        record["since_baseline"] = {"kind": verdict.kind, "text": terminal_safe(verdict.text)}
