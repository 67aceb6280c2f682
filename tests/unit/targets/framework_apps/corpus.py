"""Where the demo corpus lies, for the apps below."""

from pathlib import Path

import pytest_rageval.demo

CORPUS = Path(pytest_rageval.demo.__file__).parent / "corpus"
FILES = sorted(CORPUS.rglob("*.md"))
