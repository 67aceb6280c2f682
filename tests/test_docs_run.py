"""The docs job's own parts: the markers read from a page, shown output compared with what ran, a page that fails.

The docs job itself (``tests/docs_run/check_pages.py``, run by ``.ci/run``) runs every page; these tests keep it
honest: every fenced block of a page is a step, a block nothing runs is refused, an output that differs or a
command whose option is gone fails its page.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_run.pages import PageError, fenced_blocks, parse
from docs_run.run import Workspace, mismatch, shims

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "docs" / "tutorial.md", *sorted((ROOT / "docs" / "how-to").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_fenced_block_of_a_page_is_a_step(page: Path) -> None:
    blocks = parse(page, ROOT)
    assert len(blocks) == fenced_blocks(page.read_text(encoding="utf-8"))
    assert all(block.kind for block in blocks)


def test_the_pages_run_more_than_they_skip() -> None:
    blocks = [block for page in PAGES for block in parse(page, ROOT)]
    skipped = [block for block in blocks if block.kind == "skip"]
    assert len(blocks) >= 60 and len(skipped) * 3 < len(blocks), f"{len(skipped)} of {len(blocks)} blocks skipped"


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    return page


def test_a_block_nothing_runs_is_refused_naming_its_line(tmp_path: Path) -> None:
    page = _page(tmp_path, "# T\n\nSome toml:\n\n```toml\n[tool.x]\n```\n")
    with pytest.raises(PageError, match=r"^page.md:5: a toml block that nothing runs: mark it <!-- file: PATH -->"):
        parse(page, tmp_path)


def test_markers_give_blocks_their_kind_path_exit_and_reason(tmp_path: Path) -> None:
    text = (
        "Write it: <!-- folder: /home/me clone --><!-- file: a/b.toml -->\n\n```toml\nx = 1\n```\n\n"
        "1. In a list: <!-- exit: 3 -->\n\n   ```bash\n   false\n   ```\n\n"
        "```text\n$ echo a \\\n  b\na b\n$ true\n```\n\n<!-- skip: a CI workflow -->\n```yaml\non: push\n```\n"
    )
    blocks = parse(_page(tmp_path, text), tmp_path)
    assert [(block.kind, block.line) for block in blocks] == [("file", 3), ("run", 9), ("commands", 13), ("skip", 21)]
    assert blocks[0].path == "a/b.toml" and blocks[0].folder == ("/home/me", frozenset({"clone"}))
    assert blocks[1].exit_code == 3 and blocks[1].source == "false\n"
    assert [(command.command, command.shown) for command in blocks[2].commands] == [("echo a b", "a b"), ("true", "")]
    assert blocks[3].test_id == "page.md:21:skip:a CI workflow"


def test_fenced_blocks_are_counted_without_sybil() -> None:
    assert fenced_blocks("```bash\nx\n```\n\n  - item\n\n    ```toml\n    y\n    ```\n````md\n```\n````\n") == 3


def test_shown_output_matches_with_cut_lines_and_variable_parts() -> None:
    actual = (
        "==================== test session starts ====================\nplatform linux\ncollected 4 items\n\n"
        "run: /tmp/x/results/20261127-101010-abcdef (metrics.json)\n========== 4 passed in 0.91s ==========\n"
    )
    assert (
        mismatch(
            "collected 4 items\n...\nrun: /tmp/x/results/20261126-163504-c062a1 (...)\n=== 4 passed in 0.5s ===", actual
        )
        is None
    )
    problem = mismatch("collected 4 items\nrun: /tmp/x/results/20261126-163504-c062a1 (metrics.json)", actual)
    assert problem is not None and "the first that differs: 'run: /tmp/x/results/<run_id> (metrics.json)'" in problem
    assert mismatch("collected 5 items", actual) is not None


@pytest.mark.e2e
def test_a_command_whose_option_is_gone_fails_its_page(tmp_path: Path) -> None:
    text = (
        "<!-- folder: <clone> clone -->\n```text\n$ pytest --rageval --rageval-k=3 --rageval-no-such-option -q\n```\n"
    )
    workspace = Workspace(tmp_path / "work", ROOT, shims(tmp_path / "bin"))
    (block,) = parse(_page(tmp_path, text), tmp_path)
    with pytest.raises(
        AssertionError,
        match=r"(?s)page.md:2: pytest --rageval .* exited 4, the page expects 0.*--rageval-no-such-option",
    ):
        workspace.run(block)


@pytest.mark.e2e
def test_a_configuration_pytest_does_not_take_fails_its_page(tmp_path: Path) -> None:
    text = "<!-- folder: <clone> clone --><!-- alt: pytest.ini -->\n```ini\n[pytest]\nrageval_tagret = pytest_rageval.demo:ask\n```\n"
    workspace = Workspace(tmp_path / "work", ROOT, shims(tmp_path / "bin"))
    (block,) = parse(_page(tmp_path, text), tmp_path)
    with pytest.raises(AssertionError, match=r"(?s)page.md:2: pytest does not take pytest.ini.*rageval_tagret"):
        workspace.run(block)
