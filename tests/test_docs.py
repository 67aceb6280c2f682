"""The README and the docs site stay true: short entry, working links, reference tables generated from the code.

The tables of options, ini keys and eval-set fields are rendered by ``docs/hooks/reference.py`` from the
settings table and the eval-set schema; these tests call the same functions and compare them with what
``pytest_addoption`` registers, and build the whole site with ``mkdocs build --strict`` (which fails on a
broken link or anchor).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from types import ModuleType

import pytest
from _pytest.config.argparsing import Parser
from needs import need_module

from pytest_rageval.plugin import pytest_addoption

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The two set-up commands the README opens with, word for word.
SETUP_COMMANDS = ("pip install -e '.[dev]' && pytest --rageval", "pip install -e '.[dev]' && pytest")
#: Words of the project's own bookkeeping that user-facing text never uses.
INTERNAL_WORDS = ("seed 00", "SPEC", "issue #")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
INCLUDE = re.compile(r'^--8<-- "([^"]+)"$', re.M)


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _prose(text: str) -> str:
    """The Markdown outside fenced code blocks and code spans (where a link is only text)."""
    text = re.sub(r"(?ms)^ *```.*?^ *```", "", text)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """A heading's anchor as MkDocs makes it (Python-Markdown's toc slugify): markup dropped, lower case,
    punctuation dropped, runs of spaces and hyphens as one hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    text = INCLUDE.sub(lambda m: (ROOT / m.group(1)).read_text(encoding="utf-8"), page.read_text(encoding="utf-8"))
    text = re.sub(r"(?ms)^ *```.*?^ *```", "", text)
    return {_slug(m.group(1)) for m in re.finditer(r"(?m)^#{1,6} +(.+?) *$", text)}


def _broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of ``page`` whose file, or whose heading in a Markdown file, does not exist."""
    broken = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue  # a URL, not a file of the repository
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.is_file():
            broken.append(f"{page.relative_to(root)}: {target}: no file {path_part}")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{page.relative_to(root)}: {target}: no heading #{anchor} in {linked.relative_to(root)}")
    return broken


def _cells(line: str) -> list[str]:
    """The cells of a table row: split on the pipes outside code spans and not escaped, as Python-Markdown does."""
    pieces = re.findall(r"`[^`]*`|\\.|[^`\\|]+|\|", line.strip())
    cells, cell = [], ""
    for piece in pieces:
        if piece == "|":
            cells.append(cell.strip())
            cell = ""
        else:
            cell += piece
    return cells[1:]


def _table_rows(markdown: str) -> list[list[str]]:
    """The cells of each row of the Markdown tables in ``markdown`` (each table's header and rule rows left out)."""
    lines = markdown.splitlines()
    rule = [line.startswith("|---") for line in lines]
    return [
        _cells(line)
        for i, line in enumerate(lines)
        if line.startswith("|") and not rule[i] and not (i + 1 < len(lines) and rule[i + 1])
    ]


def test_readme_is_a_short_entry_with_the_two_setup_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 260, f"README.md has {len(lines)} lines; move detail into docs/"
    commands = [line.split("  #")[0].rstrip() for line in lines]
    for command in SETUP_COMMANDS:
        assert command in commands, f"README.md lacks the set-up command {command!r}"


@pytest.mark.parametrize("page", _pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file_and_heading(page: Path) -> None:
    assert _broken_links(page) == []


def test_a_link_to_a_missing_heading_is_caught(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\n## Set `it` up, now!\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#set-it-up-now) [bad](a.md#setup) `[code](nowhere.md)` [gone](c.md)\n", encoding="utf-8")
    assert _broken_links(page, tmp_path) == ["b.md: a.md#setup: no heading #setup in a.md", "b.md: c.md: no file c.md"]


def test_the_options_table_lists_every_option_the_plugin_registers() -> None:
    parser = Parser(_ispytest=True)
    pytest_addoption(parser)
    registered = {"--" + dest.replace("_", "-") for dest in vars(parser.parse_known_args([])) if dest != "file_or_dir"}
    rows = _table_rows(_hook().options_markdown())
    documented = {row[0].strip("`").split(" ")[0].split(",")[0] for row in rows}
    assert documented == registered
    assert all(row[2] for row in rows), "an option without help text"


def test_the_ini_table_lists_every_ini_key_the_plugin_registers() -> None:
    parser = Parser(_ispytest=True)
    pytest_addoption(parser)
    rows = _table_rows(_hook().ini_markdown())
    assert [row[0].strip("`") for row in rows] == list(parser._inidict)
    assert all(row[3] for row in rows), "an ini key without help text"


def test_the_eval_fields_table_lists_every_schema_field_with_a_meaning() -> None:
    hook = _hook()
    properties = hook.eval_schema()["properties"]
    rows = _table_rows(hook.eval_fields_markdown())
    assert sorted(row[0].strip("`") for row in rows) == sorted(properties)
    assert all(row[4] for row in rows)
    assert [name for name, spec in properties.items() if not spec.get("description")] == [], (
        "a field the schema does not describe"
    )


def test_an_unknown_generated_table_is_refused() -> None:
    with pytest.raises(ValueError, match=r"page.md: unknown generated table 'option'"):
        _hook().render("<!-- generated: option -->", "page.md")


@pytest.mark.parametrize("page", _pages() + sorted(DOCS.rglob("*.py")), ids=lambda page: str(page.relative_to(ROOT)))
def test_no_internal_vocabulary(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert [word for word in INTERNAL_WORDS if word in text] == []


@pytest.mark.e2e
def test_the_site_builds_strict(tmp_path: Path) -> None:
    need_module("mkdocs")
    need_module("material")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "NO_MKDOCS_2_WARNING": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr
    options = (tmp_path / "site" / "reference" / "options" / "index.html").read_text(encoding="utf-8")
    assert "--rageval-summary-md" in options and "generated:" not in options
