"""The docs job: every code block of README.md, docs/tutorial.md and docs/how-to/*.md, run as a reader would.

Not part of the suite (its name is no ``test_*.py``): ``.ci/run`` runs it by path,
``python -m pytest -p no:randomly -n 2 --dist loadgroup tests/docs_run/check_pages.py``. Each page runs in a fresh
folder of its own, its blocks in page order on one worker (one xdist group a page); the commands are the installed
``pytest`` and ``rageval`` of this interpreter. The markers a page uses are described in ``pages.py``.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from needs import missing

from docs_run.pages import Block, PageError, fenced_blocks, parse
from docs_run.run import Workspace, shims

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "tutorial.md", *sorted((ROOT / "docs" / "how-to").glob("*.md"))]


def _parse_all() -> tuple[list[Block], dict[str, str]]:
    """Every page's blocks, and the error of each page whose markers do not say how to run a block."""
    blocks: list[Block] = []
    errors: dict[str, str] = {}
    for page in PAGES:
        try:
            blocks += parse(page, ROOT)
        except PageError as error:
            errors[page.relative_to(ROOT).as_posix()] = str(error)
    return blocks, errors


BLOCKS, PAGE_ERRORS = _parse_all()
#: Each page's folder and state, made at its first block (the blocks of a page run in order in one process).
WORKSPACES: dict[str, Workspace] = {}
FAILED: dict[str, int] = {}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_block_of_the_page_is_collected(page: Path) -> None:
    name = page.relative_to(ROOT).as_posix()
    assert name not in PAGE_ERRORS, PAGE_ERRORS.get(name)
    found = [block for block in BLOCKS if block.page == name]
    assert len(found) == fenced_blocks(page.read_text(encoding="utf-8"))


def test_the_pages_have_blocks() -> None:
    assert len(BLOCKS) > 40


@pytest.mark.parametrize(
    "block", [pytest.param(block, id=block.test_id, marks=pytest.mark.xdist_group(block.page)) for block in BLOCKS]
)
def test_block(block: Block, tmp_path_factory: pytest.TempPathFactory) -> None:
    if block.page in FAILED:
        pytest.skip(f"{block.page}:{FAILED[block.page]} failed before it")
    if block.page not in WORKSPACES:
        base = tmp_path_factory.mktemp(re.sub(r"\W", "-", block.page))
        WORKSPACES[block.page] = Workspace(base, ROOT, shims(tmp_path_factory.getbasetemp() / "bin"))
    absent = [name for name in block.needs if importlib.util.find_spec(name) is None]
    if absent:
        WORKSPACES[block.page].enter(block)  # its folder and environment markers still hold for the blocks after it
        missing(f"{block.page}:{block.line} needs {', '.join(absent)}, which is not installed")
    try:
        WORKSPACES[block.page].run(block)
    except BaseException:
        FAILED[block.page] = block.line
        raise
