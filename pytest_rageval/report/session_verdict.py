"""The session's one verdict: its exit status and its parts, worded once for the terminal's last line, the CI
summary's headline and report.html's header.

``3 new failures, 14 known failures, gate passed`` with ``FAILED (exit 1)`` before it: the word is the exit
status's (``passed`` only for exit 0), the parts say what made it (cases that failed or errored, known
failures, the gate). Pure: metrics.json and the gate's verdict kind in, words out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SessionVerdict", "session_verdict", "verdict_from_metrics"]

#: the gate's part of the verdict, per baseline.verdict_kind ("not gated" has none)
_GATE_PARTS = {
    "passed": "gate passed",
    "allowed": "gate: regressions allowed",
    "failed": "gate FAILED",
    "refused": "gate FAILED",
}


@dataclass(frozen=True)
class SessionVerdict:
    """The session's exit status and the parts that made it; ``text`` is the one line every report shows."""

    exit_status: int
    parts: tuple[str, ...]
    gate_reason: str = ""  # why the gate failed (masked); the terminal's line ends with it, the reports show it below

    @property
    def passed(self) -> bool:
        return self.exit_status == 0

    @property
    def word(self) -> str:
        """``passed`` (exit 0) or ``FAILED (exit N)``."""
        return "passed" if self.passed else f"FAILED (exit {self.exit_status})"

    @property
    def text(self) -> str:
        """``FAILED (exit 1): 3 new failures, 14 known failures, gate passed``."""
        return f"{self.word}: {', '.join(self.parts)}" if self.parts else self.word

    @property
    def line(self) -> str:
        """The terminal's last line: :attr:`text`, and the gate's reason after a failed gate."""
        return f"{self.text}: {self.gate_reason}" if self.gate_reason else self.text

    def as_dict(self) -> dict[str, Any]:
        """metrics.json's ``session`` block (``rageval report`` shows the same verdict)."""
        return {"exit_status": self.exit_status, "parts": list(self.parts), "verdict": self.text}


def _count(metrics: Mapping[str, Any], name: str) -> int:
    value = metrics.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def session_verdict(
    metrics: Mapping[str, Any], exit_status: int, gate_kind: str, gate_reason: str = "", *, known: bool = True
) -> SessionVerdict:
    """The verdict of a session that exits with ``exit_status``: its failed and errored cases (``new failures``
    when a baseline was compared and ``known``: what failed there the same way is not among them), known
    failures, the gate (``gate_kind`` as baseline.verdict_kind names it, ``gate_reason`` its masked reason); an
    exit status no part explains (a hand-written test failed, a usage error) is named too."""
    gated = gate_kind != "not gated"
    failed, errors = _count(metrics, "failed"), _count(metrics, "errors") + _count(metrics, "invalid_lines")
    parts = [_plural(failed, "new failure") if gated and known else f"{failed} failed"]
    if errors:
        parts.append(_plural(errors, "error"))
    known_count = _count(metrics, "known_failures")
    if known_count:
        parts.append(_plural(known_count, "known failure"))
    fixed = _count(metrics, "fixed_since_baseline")
    if fixed:
        parts.append(f"{fixed} fixed since the baseline")
    gate = _GATE_PARTS.get(gate_kind)
    if gate is not None:
        parts.append(gate)
    explained = failed or errors or gate == "gate FAILED"
    if exit_status != 0 and not explained:
        parts.append(f"exit status {exit_status} (outside the eval cases)")
    return SessionVerdict(exit_status, tuple(parts), gate_reason if gate == "gate FAILED" else "")


def verdict_from_metrics(metrics: Mapping[str, Any]) -> SessionVerdict | None:
    """The verdict a run stored in metrics.json (``session``), or None (a run made before it was stored)."""
    block = metrics.get("session")
    if not isinstance(block, Mapping):
        return None
    status, parts = block.get("exit_status"), block.get("parts")
    if not isinstance(status, int) or not isinstance(parts, list):
        return None
    return SessionVerdict(status, tuple(str(p) for p in parts))
