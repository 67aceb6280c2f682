"""The chat apps of ``examples/`` run as a user runs them: ``pytest --rageval`` in a copy of the example's folder, over
its conversation eval set (lines with ``turns``).

``llamaindex_chat`` is a LlamaIndex CondenseQuestionChatEngine (the target gets each turn's history as its
``chat_history``), ``langgraph_chat`` a LangGraph graph (the history as its ``messages`` state). Each passes every turn
of every conversation, serially and with ``-n 2``, each turn's record holding the history that was sent; with its follow-up rewriting switched off (``CONDENSE = False``,
each question asked as it stands) the conversations whose second turn needs the first fail, each failure naming turn 2
and its question."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from needs import need_installed
from test_examples import EXAMPLES, _run, _shown

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # each test runs pytest in processes of its own

#: example folder -> (the packages it imports, the conversations whose turn 2 fails when the app ignores history)
CHAT_APPS: dict[str, tuple[tuple[str, ...], set[str]]] = {
    "llamaindex_chat": (
        ("llama_index.core", "llama_index.retrievers.bm25"),
        {"conv-gcp", "conv-step", "conv-council", "conv-sequencer", "conv-stip-bridge", "conv-gcp-votes"},
    ),
    "langgraph_chat": (
        ("langgraph", "langchain_core", "langchain_community", "langchain_text_splitters", "rank_bm25"),
        {"conv-step", "conv-sequencer", "conv-gcp-votes"},
    ),
}


def _pytest(folder: Path, *args: str) -> tuple[int, str, str]:
    """``pytest --rageval`` in ``folder`` (without the plugins no example uses): its status, output and a summary."""
    done = _run([sys.executable, "-m", "pytest", "--rageval", "-p", "no:cacheprovider", *args], folder)
    return done.returncode, done.stdout, _shown(done)


def _conversations(folder: Path) -> list[dict[str, Any]]:
    text = (folder / "eval_sets" / "conversations.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(params=sorted(CHAT_APPS))
def chat_example(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The example copied as a user would check it out (its docs/ link followed)."""
    name: str = request.param
    for module in CHAT_APPS[name][0]:
        need_installed(module)
    folder = tmp_path / name
    shutil.copytree(EXAMPLES / name, folder, ignore=shutil.ignore_patterns("results", "__pycache__", ".rageval_cache"))
    return folder


def test_a_chat_example_passes_every_turn_serially_and_under_xdist(chat_example: Path) -> None:
    """Two runs: serial, then the LlamaIndex one under ``-n 2`` (the other serial again: xdist's workers import its
    framework once more each, and the conversation engine's own tests run both ways)."""
    conversations = _conversations(chat_example)
    assert len(conversations) == 6 and all(len(line["turns"]) >= 2 for line in conversations)
    for args in (("-n", "0"), ("-n", "2") if chat_example.name == "llamaindex_chat" else ("-n", "0")):
        status, out, shown = _pytest(chat_example, *args)
        assert status == 0, shown
        assert f"{len(conversations)} passed" in out, shown
    runs = sorted((chat_example / "results").glob("*/results.jsonl"))
    assert len(runs) == 2
    records = {json.loads(line)["test_case_id"]: json.loads(line) for line in runs[0].read_text().splitlines()}
    for line in conversations:  # each conversation's turns under its record, each with the history that was sent
        turns = records[line["id"]]["turns"]
        assert [turn["outcome"] for turn in turns] == ["passed"] * len(line["turns"]), line["id"]
        sent = turns[1]["history"]
        assert [message["role"] for message in sent] == ["user", "assistant"]
        assert sent[0]["content"] == line["turns"][0]["question"]
        earlier = line["turns"][0]["reference_answer"] if line.get("history") == "reference" else turns[0]["answer"]
        assert sent[1]["content"] == earlier, line["id"]
    by_turn = json.loads((runs[0].parent / "metrics.json").read_text())["by_turn"]
    assert {turn: values["n"] for turn, values in by_turn.items()} == {"1": 6, "2": 6, "3+": 4}


def test_a_chat_example_that_ignores_the_conversation_fails_on_turn_2(chat_example: Path) -> None:
    app = chat_example / "app.py"
    source = app.read_text(encoding="utf-8")
    assert source.count("CONDENSE = True") == 1
    app.write_text(source.replace("CONDENSE = True", "CONDENSE = False"), encoding="utf-8")
    status, out, shown = _pytest(chat_example, "-n", "0", "-p", "no:randomly")
    assert status == 1, shown
    failed = {line.split("::")[1].split()[0] for line in out.splitlines() if line.startswith("FAILED ")}
    assert failed == CHAT_APPS[chat_example.name][1], shown
    questions = {line["id"]: line["turns"][1]["question"] for line in _conversations(chat_example)}
    sections = out.split("\n_")  # one section per failed case, under its "____ id ____" rule
    for case in failed:
        (section,) = [part for part in sections if part.split("\n")[0].strip(" _") == case]
        assert "turn 2" in section and questions[case] in section, section
