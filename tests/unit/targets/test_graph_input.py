"""A compiled LangGraph graph gets the question under its input schema's own key, whatever kind of class the schema
is (a stdlib or typing_extensions TypedDict, a pydantic model, a dataclass; ``messages`` as a human message list),
and a graph whose input has no question-like key is refused before any case, in one line naming the keys it has.

Each graph is real: built with LangGraph's StateGraph, run by ``pytest --rageval`` in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from needs import need_installed

pytestmark = pytest.mark.e2e  # each test runs pytest in a process of its own

GRAPHS = '''
import dataclasses
import typing

import typing_extensions
from langchain_core.documents import Document
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel


def _build(schema, key):
    """One node that reads the question where the graph's input put it and answers with it."""

    def node(state):
        value = state[key] if isinstance(state, dict) else getattr(state, key)
        question = value[-1].content if key == "messages" else value  # a human message, not a dict or a string
        document = Document(page_content="Ten days a year.", metadata={"source": "handbook.md"})
        return {"answer": f"Ten days a year ({question})", "context": [document]}

    builder = StateGraph(schema)
    builder.add_node("respond", node)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder.compile()


class StdlibState(typing.TypedDict):
    question: str
    answer: str
    context: list


class ExtensionsState(typing_extensions.TypedDict):
    query: str
    answer: str
    context: list


class PydanticState(BaseModel):
    input: str = ""
    answer: str = ""
    context: list = []


@dataclasses.dataclass
class DataclassState:
    question: str = ""
    answer: str = ""
    context: list = dataclasses.field(default_factory=list)


class MessagesState(typing.TypedDict):
    messages: list
    answer: str
    context: list


class TopicState(typing.TypedDict):
    topic: str
    answer: str


stdlib = _build(StdlibState, "question")
extensions = _build(ExtensionsState, "query")
pydantic_model = _build(PydanticState, "input")
dataclass = _build(DataclassState, "question")
messages = _build(MessagesState, "messages")
topic = _build(TopicState, "topic")
'''

CASE = {
    "id": "sick-days",
    "question": "How many sick days a year?",
    "gold_supports": [{"rel_path": "handbook.md"}],
    "reference_answer": "Ten days a year.",
}


def _run(tmp_path: Path, target: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "graphs.py").write_text(GRAPHS)
    (tmp_path / "handbook.md").write_text("# Leave\n\nTen days a year.\n")
    (tmp_path / "eval_sets").mkdir()
    (tmp_path / "eval_sets" / "hr.jsonl").write_text(json.dumps(CASE) + "\n")
    (tmp_path / "pyproject.toml").write_text(f'[tool.pytest.ini_options]\nrageval_target = "graphs:{target}"\n')
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--rageval", "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("target", ["stdlib", "extensions", "pydantic_model", "dataclass", "messages"])
def test_a_graph_gets_the_question_under_its_input_schemas_key(target: str, tmp_path: Path) -> None:
    need_installed("langgraph")
    result = _run(tmp_path, target)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    (record,) = [
        json.loads(line) for line in next((tmp_path / "results").glob("*/results.jsonl")).read_text().splitlines()
    ]
    assert record["error"] is None
    assert record["answer"] == "Ten days a year (How many sick days a year?)"
    assert record["metrics"]["recall_at_k"] == 1


def test_a_graph_whose_input_key_cannot_be_told_is_refused_in_one_line(tmp_path: Path) -> None:
    need_installed("langgraph")
    result = _run(tmp_path, "topic")
    assert result.returncode == 4, result.stdout[-3000:]
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if "topic, answer" in line]
    assert lines == [
        "ERROR: pytest-rageval: rageval_target 'graphs:topic': LangGraph graph: its input has no question, input, query or messages key "
        "(it has topic, answer)"
    ], output
    assert not (tmp_path / "results").exists()
