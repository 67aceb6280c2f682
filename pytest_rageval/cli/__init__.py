"""cli: the ``rageval`` command: schema, compare, report, history, judge, merge, rescore, label, inspect, calibrate.

Every command first registers the metrics of the installed ``pytest_rageval.metrics`` entry points.

``main`` lives here (the entry points loaded, the command run, the errors every command shares turned into
exit statuses); the parser in ``parser.py``; each command in a module of its own named after it (``compare.py``,
``rescore.py``, ...: its sub-parser, ``add_parser``, and ``run``, which reads the arguments and prints), with the
work in the layer that owns it (``engine/rescore.py``, ``engine/rejudge.py``, ``engine/label.py``,
``runs/merge.py``, ``targets/inspect_target.py``, ...); what several commands share in ``common.py`` and
``project.py``. The top layer: may import every other subpackage; nothing imports it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .common import usage_error
from .parser import build_parser

__all__ = ["build_parser", "main"]


def _load_metric_entry_points() -> None:
    """The metrics of the installed ``pytest_rageval.metrics`` entry points, before any command: a merged, rescored
    or re-judged run aggregates them as ``pytest --rageval`` does (a conftest.py is not read here)."""
    from pytest_rageval.evaluation.external_metrics import MetricPluginError, load_entry_points

    try:
        load_entry_points()
    except MetricPluginError as exc:
        raise usage_error(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_rageval.runs.folder import RunFolderError

    args = build_parser().parse_args(argv)
    _load_metric_entry_points()
    try:
        return int(args.func(args))
    except RunFolderError as exc:  # e.g. a results.jsonl line that cannot be read: never dropped, never rewritten
        raise usage_error(str(exc)) from None
    except BrokenPipeError:  # `rageval ... | head`: the reader left; say nothing more (and no traceback at exit)
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
