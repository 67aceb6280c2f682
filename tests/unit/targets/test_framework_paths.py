"""How a framework's chunk metadata becomes rel_path and heading_path, how k reaches retrievers inside an object,
and which gold can never match: the pure parts, no framework needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_rageval.evaluation.docpaths import heading_path, own_heading, relative_path
from pytest_rageval.evaluation.reach import markdown_heading_paths, shape_problems, unreachable_gold
from pytest_rageval.evaluation.schema import Chunk, EvalCase
from pytest_rageval.targets.frameworks.detect import has_base
from pytest_rageval.targets.frameworks.topk import TopKVariants
from pytest_rageval.targets.maps import ResponseMap, map_response, parse_response_map


@pytest.mark.parametrize(
    "metadata, text, expected",
    [
        ({"header_path": "/1973 oil crisis/"}, "## Causes\n\nThe embargo...", ["1973 oil crisis", "Causes"]),
        ({"header_path": "/"}, "# Handbook\n\nWelcome", ["Handbook"]),
        ({"header_path": "/Guide/Setup/"}, "Plain text without a heading", ["Guide", "Setup"]),
        ({"Header 2": "Embeddings", "Header 1": "Setup", "source": "a.md"}, "text", ["Setup", "Embeddings"]),
        ({"parent_headers": ["Handbook", "Leave"], "header": "Sick days"}, "text", ["Handbook", "Leave", "Sick days"]),
        ({"parent_headers": [], "header": ""}, "front matter", []),
        ({"heading_path": "A > B"}, "## C", "A > B"),
        ({}, "### Own heading ###\ntext", ["Own heading"]),
        ({}, "no heading", None),
    ],
)
def test_heading_paths_follow_each_frameworks_markdown_splitter(
    metadata: dict[str, Any], text: str, expected: Any
) -> None:
    assert heading_path(metadata, text) == expected


def test_own_heading_is_only_a_heading_line() -> None:
    assert own_heading("\n## Setup\nbody") == "Setup"
    assert own_heading("#hashtag is not a heading") is None
    assert own_heading(None) is None


def test_paths_become_relative_to_docs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    (docs / "hr").mkdir(parents=True)
    (docs / "hr" / "leave.md").write_text("# Leave\n")
    assert relative_path(str(docs / "hr" / "leave.md"), docs) == "hr/leave.md"
    assert relative_path(f"file://{docs}/hr/leave.md", docs) == "hr/leave.md"
    assert relative_path("/elsewhere/hr/leave.md", docs) == "/elsewhere/hr/leave.md"  # kept: shows where it came from
    assert relative_path("./hr\\leave.md", docs) == "hr/leave.md"
    monkeypatch.chdir(tmp_path)  # a loader run from the project folder wrote docs/hr/leave.md
    assert relative_path("docs/hr/leave.md", docs) == "hr/leave.md"
    assert relative_path("hr/other.md", docs) == "hr/other.md"
    link = tmp_path / "link"
    link.symlink_to(docs)
    assert relative_path(str(link / "hr" / "leave.md"), docs) == "hr/leave.md"
    assert relative_path("", docs) is None


def test_an_absolute_path_of_any_target_is_made_relative_after_the_response_map(tmp_path: Path) -> None:
    data = {"answer": "a", "hits": [{"meta": {"file_path": str(tmp_path / "x" / "a.md")}, "rel_path": "/other/b.md"}]}
    mapped = map_response(
        data, parse_response_map("retrieved_chunks = hits\nretrieved_chunks.rel_path = meta.file_path"), tmp_path
    )
    assert mapped.retrieved_chunks[0].rel_path == "x/a.md"
    assert (
        map_response(data, parse_response_map("retrieved_chunks = hits"), tmp_path).retrieved_chunks[0].rel_path
        == "/other/b.md"
    )
    assert (
        map_response({"answer": "a", "retrieved_chunks": [{"rel_path": "./a.md"}]}, ResponseMap(), tmp_path)
        .retrieved_chunks[0]
        .rel_path
        == "./a.md"
    )  # relative paths of other targets: as sent


class Retriever:  # stands for a framework's retriever (has_base reads the class name and its module's first part)
    def __init__(self, k: int) -> None:
        self.similarity_top_k = k
        self.index = list(range(1000))  # data: not searched, shared by the copies


class Engine:
    def __init__(self, retriever: Retriever) -> None:
        self.steps: list[Any] = [object(), {"retriever": retriever}]
        self.other = "text"


def _set_k(value: Any, k: int) -> Any | None:
    if not isinstance(value, Retriever):
        return None
    import copy

    clone = copy.copy(value)
    clone.similarity_top_k = k
    return clone


def test_top_k_variants_copy_the_way_to_each_retriever_and_leave_the_object_alone() -> None:
    retriever = Retriever(2)
    engine = Engine(retriever)
    variants = TopKVariants(engine, _set_k)
    variant, count = variants.get(7)
    assert count == 1
    assert variant is not engine and variant.steps[1]["retriever"].similarity_top_k == 7
    assert variant.steps[1]["retriever"].index is retriever.index  # no index rebuilt
    assert retriever.similarity_top_k == 2 and engine.steps[1]["retriever"] is retriever
    assert variants.get(7)[0] is variant  # made once
    assert TopKVariants(object(), _set_k).get(3)[1] == 0


def test_objects_are_recognised_by_their_class_names_without_imports() -> None:
    fake = type("BaseQueryEngine", (), {"__module__": "llama_index.core.base.base_query_engine"})
    sub = type("MyEngine", (fake,), {"__module__": "myapp"})
    assert has_base(sub(), ("llama_index",), "BaseQueryEngine")
    assert not has_base(sub(), ("langchain_core",), "BaseQueryEngine")
    assert not has_base(object(), ("llama_index",), "BaseQueryEngine")


def test_markdown_heading_paths_skip_fenced_code() -> None:
    text = "# A\n## B\n```\n# not a heading\n```\n### C\n# D\n"
    assert markdown_heading_paths(text) == [("A",), ("A", "B"), ("A", "B", "C"), ("D",)]


def _case(**fields: Any) -> EvalCase:
    return EvalCase.model_validate({"id": "c", "question": "q", **fields})


def test_gold_that_can_never_match(tmp_path: Path) -> None:
    (tmp_path / "hr").mkdir()
    (tmp_path / "hr" / "leave.md").write_text("# Handbook\n## Leave\n### Sick days\n")
    supports = [
        {"rel_path": "hr/leave.md", "heading_path": "Handbook > Leave"},  # fine
        {"rel_path": "hr/leave.md", "heading_path": "Leave"},  # not from the top
        {"rel_path": "hr/missing.md"},
        {"rel_path": "/abs/hr/leave.md"},
        {"rel_path": "../leave.md"},
        {"rel_path": "hr/leave.md"},
    ]
    found = unreachable_gold([("s.jsonl", 3, _case(gold_supports=supports))], tmp_path)
    assert [(u.index, u.reason.split(" (")[0].split(";")[0]) for u in found] == [
        (1, "no heading path of that file starts with it"),
        (2, f"no such file under docs_root {tmp_path}"),
        (3, "its rel_path is absolute"),
        (4, f"its rel_path leaves docs_root {tmp_path}"),
    ]
    assert found[0].describe().startswith("s.jsonl:3 [c] gold_supports[1] hr/leave.md > Leave can never match: ")


def test_chunk_shapes_that_can_never_match(tmp_path: Path) -> None:
    cases = [_case(gold_supports=[{"rel_path": "hr/leave.md", "heading_path": "Handbook"}])]
    names_only = [Chunk(rel_path="leave.md", heading_path=["Handbook"])]
    assert "file names without folders" in shape_problems(cases, names_only, tmp_path)[0]
    absolute = [Chunk(rel_path="/srv/hr/leave.md")]
    problems = shape_problems(cases, absolute, tmp_path)
    assert "absolute and outside docs_root" in problems[0] and "carries a heading path" in problems[1]
    assert shape_problems(cases, [Chunk(rel_path="hr/leave.md", heading_path="Handbook")], tmp_path) == []
    assert "carries a rel_path" in shape_problems(cases, [Chunk(doc_id="x")], tmp_path)[0]


@pytest.mark.e2e
def test_inspect_names_the_gold_that_can_never_match(tmp_path: Path) -> None:
    (tmp_path / "hr").mkdir()
    (tmp_path / "hr" / "leave.md").write_text("# Handbook\n## Leave\n")
    (tmp_path / "rag.py").write_text(
        "import os\n"
        "def ask(question, params):\n"
        "    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'hr', 'leave.md')\n"
        "    return {'answer': 'Ten days.', 'retrieved_chunks': [{'rel_path': path, 'heading_path': ['Handbook', 'Leave'],"
        " 'doc_id': 'POL-1', 'score_final': 0.5}]}\n"
    )
    lines = [
        {
            "id": "ok",
            "question": "q",
            "gold_supports": [{"rel_path": "hr/leave.md", "heading_path": "Handbook > Leave"}],
        },
        {"id": "bad", "question": "q", "gold_supports": [{"rel_path": "hr/leave.md", "heading_path": "Leave"}]},
    ]
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nrageval_target = "rag:ask"\n')
    run = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "inspect", "How long is leave?", "--eval-set", "s.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1, run.stderr
    assert "  1  hr/leave.md  heading: Handbook > Leave  doc_id: POL-1  score: 0.5" in run.stdout
    assert (
        "s.jsonl:2 [bad] gold_supports[0] hr/leave.md > Leave can never match: no heading path of that file starts"
        in run.stdout
    )
    assert "[ok]" not in run.stdout
