"""docs/reference/api.md, the API and hooks reference, is what docs/hooks/api_page.py writes from the code now."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest_rageval
from pytest_rageval.plugin import hookspecs

ROOT = Path(__file__).resolve().parents[1]


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_api_page", ROOT / "docs" / "hooks" / "api_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_what_the_generator_writes() -> None:
    page = ROOT / "docs" / "reference" / "api.md"
    committed = page.read_text(encoding="utf-8") if page.is_file() else ""
    assert committed == generator().render(), "docs/reference/api.md is stale: run `python docs/hooks/api_page.py`"


def test_every_exported_name_and_every_hook_has_its_heading() -> None:
    headings = set(re.findall(r"^### (\S+)$", generator().render(), flags=re.MULTILINE))
    hooks = {name for name in vars(hookspecs) if name.startswith("pytest_rageval_")}
    assert hooks == {"pytest_rageval_metrics", "pytest_rageval_judges", "pytest_rageval_run_fields"}
    assert headings == (set(pytest_rageval.__all__) - {"__version__"}) | hooks


def test_the_check_mode_fails_on_a_stale_page_and_passes_once_written(tmp_path: Path) -> None:
    module = generator()
    stale = tmp_path / "api.md"
    stale.write_text("# old\n", encoding="utf-8")
    setattr(module, "PAGE", stale)  # noqa: B010 (the generator module is loaded from its file: no attribute types)
    setattr(module, "ROOT", tmp_path)  # noqa: B010
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0
    assert module.main(["--check"]) == 0
