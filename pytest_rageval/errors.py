"""The errors and the warning pytest-rageval raises on purpose, each a message for the user (never a bug).

``RagevalError`` is the root; under it ``ConfigError`` (a setting, table, map, target or threshold is wrong: the run
stops before any case), ``DataError`` (something read cannot be used: a stored run, a baseline, a cache, a labelled
set; ``BaselineError`` for a baseline), and where they are raised ``RagCallError`` (the system under test failed a
call), ``JudgeError`` (the judge failed) and ``EvaluateError`` (a hand-written test's ``evaluate`` failed).
``RagevalWarning`` is the root of every warning. Foundations: no pytest.
"""

from __future__ import annotations


class RagevalError(Exception):
    """An error pytest-rageval raises on purpose; its message says what to fix."""


class ConfigError(RagevalError, ValueError):
    """A configuration value is wrong; the message names the setting (and its file and line where there is one)."""


class DataError(RagevalError):
    """Something read from disk (a stored run, a cache, a labelled set) cannot be used; the message names it."""


class BaselineError(DataError, ValueError):
    """The baseline to compare with cannot be read or is not a metrics.json."""


class RagevalWarning(UserWarning):
    """Every warning pytest-rageval emits (a filter on this class covers them all)."""
