"""The files a source distribution carries besides the package: the license pyproject.toml names, the changelog."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_license_is_the_mit_license_pyproject_names() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the pytest-rageval developers\n")
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_the_changelog_has_an_unreleased_section_by_area() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "[Keep a Changelog](https://keepachangelog.com/" in text
    sections = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert sections[0] == "[Unreleased]"
    assert len(re.findall(r"^### ", text, flags=re.MULTILINE)) >= 3


@pytest.mark.e2e
def test_the_sdist_carries_the_license_and_the_changelog(tmp_path: Path) -> None:
    """setuptools' own sdist build of this checkout (started in a process of its own: it writes egg-info)."""
    build = "from setuptools import build_meta; import sys; print(build_meta.build_sdist(sys.argv[1]))"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    with tarfile.open(tmp_path / done.stdout.strip().splitlines()[-1]) as sdist:
        names = {name.partition("/")[2] for name in sdist.getnames()}
    assert {"LICENSE", "CHANGELOG.md", "README.md", "pytest_rageval/__init__.py"} <= names
