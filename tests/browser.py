"""Headless Chromium for tests that look at a page as a person would (skips without it, fails under CI)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest


def chromium() -> Optional[str]:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM Chromium builds from ``page`` (no network, fresh profile)."""
    cmd = [
        str(chromium()), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
        "--dump-dom", page.as_uri(),
    ]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("chromium did not finish in time", pytrace=False)
    if result.returncode != 0 or "<html" not in result.stdout:
        pytest.fail(f"chromium could not render: {result.stderr[-500:]}", pytrace=False)
    return result.stdout
