"""Heading paths in both forms and with attribute lists: what matching, reachability, display and the read-back of
a run make of them; and which chunk paths mean the target drops folders. Pure parts, no framework needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_rageval.evaluation.anchors import matched_gold_items, normalize_heading_path, strip_attribute_list
from pytest_rageval.evaluation.reach import markdown_heading_paths, shape_problems, unreachable_gold
from pytest_rageval.evaluation.schema import Chunk, EvalCase
from pytest_rageval.evaluation.stored_chunk import chunk_of, heading_text, stored_chunk
from pytest_rageval.runs import readback

#: title -> what matching sees of it
TITLES = {
    "Declare Cookie parameters { #declare-cookie-parameters }": "Declare Cookie parameters",  # MkDocs Material
    "Install {#install}": "Install",
    "Install {: #install }": "Install",  # Python-Markdown's attr_list with its colon
    "Install {#install .tab data-level=2}": "Install",  # Pandoc: id, class, key=value
    'Install {title="Set up" #install}': "Install",
    "Appendix {-}": "Appendix",  # Pandoc's unnumbered
    "Appendix {.unnumbered}": "Appendix",
    # braces that are no trailing attribute list stay
    "Use {braces} here": "Use {braces} here",
    "Set {x}": "Set {x}",
    "{x}": "{x}",
    "{#x}": "{#x}",  # nothing would be left of the heading
    "Templates {{.Name}}": "Templates {{.Name}}",
    "Sets {#a} and more": "Sets {#a} and more",
    "Glued{#id}": "Glued{#id}",  # an attribute list follows whitespace
    "Maps {a b}": "Maps {a b}",
}


def test_a_trailing_attribute_list_is_not_part_of_a_heading() -> None:
    assert {title: strip_attribute_list(title) for title in TITLES} == TITLES


def test_both_forms_and_attribute_lists_normalise_alike() -> None:
    expected = ("Cookies", "Declare Cookie parameters")
    for form in (
        "# Cookies > ## Declare Cookie parameters { #declare-cookie-parameters }",
        ["Cookies { #cookies }", "Declare Cookie parameters {#declare-cookie-parameters}"],
        "Cookies > Declare Cookie parameters",
        ["Cookies", "Declare Cookie parameters"],
    ):
        assert normalize_heading_path(form) == expected, form
        assert heading_text(form) == "Cookies > Declare Cookie parameters"
    assert heading_text(None) == ""


def test_gold_written_as_shown_matches_a_chunk_under_an_attributed_heading() -> None:
    case = EvalCase.model_validate(
        {
            "id": "c",
            "question": "q",
            "gold_supports": [{"rel_path": "cookies.md", "heading_path": "Cookies > Declare Cookie parameters"}],
        }
    )
    chunk = Chunk(
        rel_path="cookies.md",
        heading_path="# Cookies { #cookies } > ## Declare Cookie parameters { #declare-cookie-parameters }",
    )
    assert matched_gold_items(chunk, case, require_snippets=False) == {"s0"}
    braces = Chunk(rel_path="cookies.md", heading_path=["Cookies", "Declare Cookie parameters {x}"])
    assert matched_gold_items(braces, case, require_snippets=False) == frozenset()


MKDOCS_PAGE = "# Cookies { #cookies }\n\n## Declare Cookie parameters { #declare-cookie-parameters }\n\nText.\n\n## Use {braces} here\n"


def test_gold_under_an_attributed_heading_is_reachable(tmp_path: Path) -> None:
    (tmp_path / "cookies.md").write_text(MKDOCS_PAGE)
    assert markdown_heading_paths(MKDOCS_PAGE) == [
        ("Cookies",),
        ("Cookies", "Declare Cookie parameters"),
        ("Cookies", "Use {braces} here"),
    ]
    supports = [
        {"rel_path": "cookies.md", "heading_path": "Cookies > Declare Cookie parameters"},
        {
            "rel_path": "cookies.md",
            "heading_path": "# Cookies > ## Declare Cookie parameters { #declare-cookie-parameters }",
        },
        {"rel_path": "cookies.md", "heading_path": ["Cookies", "Use {braces} here"]},
        {"rel_path": "cookies.md", "heading_path": "Cookies > Use braces here"},  # not a heading of the page
    ]
    case = EvalCase.model_validate({"id": "c", "question": "q", "gold_supports": supports})
    assert [u.index for u in unreachable_gold([("s.jsonl", 1, case)], tmp_path)] == [3]


def _case(*rel_paths: str) -> EvalCase:
    return EvalCase.model_validate({"id": "c", "question": "q", "gold_supports": [{"rel_path": p} for p in rel_paths]})


def test_chunks_at_the_top_of_docs_root_are_no_folder_problem(tmp_path: Path) -> None:
    (tmp_path / "it").mkdir()
    (tmp_path / "handbook.md").write_text("# Handbook\n")
    (tmp_path / "it" / "security.md").write_text("# Security\n")
    cases = [_case("handbook.md"), _case("it/security.md")]
    top_level = [Chunk(rel_path="handbook.md", heading_path=["Handbook"])]
    assert shape_problems(cases, top_level, tmp_path) == []


def test_chunk_paths_without_their_folders_are_named(tmp_path: Path) -> None:
    (tmp_path / "it").mkdir()
    (tmp_path / "handbook.md").write_text("# Handbook\n")
    (tmp_path / "it" / "security.md").write_text("# Security\n")
    cases = [_case("handbook.md"), _case("it/security.md")]
    stripped = [
        Chunk(rel_path="security.md", heading_path=["Security"]),
        Chunk(rel_path="handbook.md", heading_path=["Handbook"]),
    ]
    problems = shape_problems(cases, stripped, tmp_path)
    assert (
        len(problems) == 1
        and "file names without folders (e.g. security.md)" in problems[0]
        and "(e.g. it/security.md)" in problems[0]
    )


def test_a_stored_chunk_of_either_form_reads_back_and_turns_back_into_its_chunk() -> None:
    forms: tuple[str | list[str], ...] = ("# A > ## B", ["A", "B"])
    for form in forms:
        chunk = Chunk(rel_path="a.md", heading_path=form, text="x" * 300, rank=1, score_final=0.5)
        stored = stored_chunk(chunk, position=1, gold=True, max_text=200)
        record = json.loads(json.dumps({"retrieved_chunks": [stored], "references": [stored]}))
        assert readback.problems(record, readback.RECORD) == []
        assert chunk_of(record["retrieved_chunks"][0]) == chunk.model_copy(update={"text": "x" * 200})
    bad: dict[str, Any] = {"retrieved_chunks": [{"heading_path": ["A", 2]}], "references": [{"heading_path": 3}]}
    assert readback.problems(bad, readback.RECORD) == [
        "retrieved_chunks[0].heading_path: expected a heading path (a string or a list of strings), got a list",
        "references[0].heading_path: expected a heading path (a string or a list of strings), got 3",
    ]


@pytest.mark.e2e
def test_inspect_warns_of_no_folder_when_one_answer_is_all_top_level(tmp_path: Path) -> None:
    (tmp_path / "it").mkdir()
    (tmp_path / "handbook.md").write_text("# Handbook\n\n## Leave { #leave }\n\nTwenty days.\n")
    (tmp_path / "it" / "security.md").write_text("# Security\n\n## Keys\n\nEvery 90 days.\n")
    (tmp_path / "app.py").write_text(
        "def ask(question, params):\n"
        "    return {'answer': 'Twenty days.', 'retrieved_chunks': [{'rel_path': 'handbook.md', 'heading_path': "
        "['Handbook', 'Leave { #leave }']}]}\n"
    )
    lines = [
        {
            "id": "leave",
            "question": "How much leave?",
            "gold_supports": [{"rel_path": "handbook.md", "heading_path": "Handbook > Leave"}],
        },
        {
            "id": "keys",
            "question": "Key rotation?",
            "gold_supports": [{"rel_path": "it/security.md", "heading_path": "# Security > ## Keys"}],
        },
    ]
    (tmp_path / "hr.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nrageval_target = "app:ask"\n')
    run = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "inspect", "How much leave?", "--eval-set", "hr.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "  1  handbook.md  heading: Handbook > Leave" in run.stdout
    assert "without folders" not in run.stdout and "can never match" not in run.stdout
