"""Stash keys of a ``--rageval`` session's plugin objects (the idiom of pytest's junitxml.py ``xml_key``).

Set by ``plugin.pytest_configure``: the collection hooks in every process, the case runner where cases
run (a serial session, an xdist worker), the run controller where results are kept (a serial session,
the xdist controller).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # types only: these modules import this one
    from .case_runner import CaseRunner
    from .collect import EvalCollection
    from .controller import RunController

collection_key: pytest.StashKey[EvalCollection] = pytest.StashKey()
runner_key: pytest.StashKey[CaseRunner] = pytest.StashKey()
controller_key: pytest.StashKey[RunController] = pytest.StashKey()
