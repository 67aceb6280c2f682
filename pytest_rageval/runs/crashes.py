"""A case whose process died while running it (an xdist worker killed by a signal, out of memory, a crash in native
code): no record came back, so the run controller writes one saying so, and the run is not complete.
"""

from __future__ import annotations

from typing import Any

from pytest_rageval.evaluation.record import error

#: the suffix of an eval-set file: its items' crashes become records (a hand-written test's crash has none to make)
EVAL_SET_SUFFIX = ".jsonl"


def crash_message(worker: str, nodeid: str) -> str:
    """The one line a lost case's record and the summary give."""
    return (
        f"the xdist worker {worker} died while running {nodeid} (killed by a signal, out of memory, or a crash in "
        "native code): the case has no result"
    )


def crash_record(nodeid: str, worker: str) -> dict[str, Any] | None:
    """The record of an eval-set case lost with its worker (an error naming the crash); None for another test."""
    file, sep, name = nodeid.partition("::")
    if not sep or not file.endswith(EVAL_SET_SUFFIX):
        return None
    return {
        "key": nodeid,
        "test_case_id": name.partition("[")[0],  # a config matrix's id in brackets is not the case's
        "file": file,
        "outcome": "error",
        "error": error("other", crash_message(worker, nodeid)),
    }
