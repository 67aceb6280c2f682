"""The source commit a run was made from: a CI's commit variable, else ``git rev-parse HEAD``; and its short form.

Recorded in config.json and metrics.json (``git_commit``), shown in report.html's trend charts and in
``rageval history``. Finding it never fails a run: no git, no repository or a slow git give None.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["CI_COMMIT_VARS", "GIT_TIMEOUT", "run_commit", "short_commit", "tree_dirty"]

#: CI variables holding the commit being built, asked first (no subprocess): GitHub Actions, GitLab CI,
#: Buildkite, CircleCI, Travis CI, Jenkins' git plugin
CI_COMMIT_VARS = ("GITHUB_SHA", "CI_COMMIT_SHA", "BUILDKITE_COMMIT", "CIRCLE_SHA1", "TRAVIS_COMMIT", "GIT_COMMIT")
#: seconds git may take before the commit is left out
GIT_TIMEOUT = 2.0

_HEX = re.compile(r"[0-9a-fA-F]{7,64}")


def run_commit(root: Path, environ: Mapping[str, str]) -> str | None:
    """The commit of this run: the first CI variable holding a hex commit id, else HEAD of the repository
    holding ``root`` (``git rev-parse HEAD``, at most :data:`GIT_TIMEOUT` seconds), else None."""
    for name in CI_COMMIT_VARS:
        value = environ.get(name, "").strip()
        if _HEX.fullmatch(value):
            return value.lower()
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=GIT_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    commit = out.stdout.strip()
    return commit.lower() if out.returncode == 0 and _HEX.fullmatch(commit) else None


def short_commit(value: Any) -> str | None:
    """The first 7 characters of a recorded commit id, or None when ``value`` is no commit id (files may lie)."""
    if isinstance(value, str) and _HEX.fullmatch(value.strip()):
        return value.strip()[:7].lower()
    return None


def tree_dirty(root: Path) -> bool | None:
    """Whether the repository holding ``root`` has uncommitted changes to tracked files (an edited eval set, a
    changed system): ``git status --porcelain --untracked-files=no``, at most :data:`GIT_TIMEOUT` seconds;
    None without git or a repository."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None
