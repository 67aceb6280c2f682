"""sanitize: terminal-safe text, size caps with notes, readable exception messages; and the record pieces built on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_rageval.engine.evaluate import bound_response
from pytest_rageval.evaluation.schema import Chunk, RagResponse
from pytest_rageval.runs.artifacts import writable_record
from pytest_rageval.safejson import dumps
from pytest_rageval.sanitize import Limits, cap, error_message, keep_notes, terminal_safe


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[2J", r"\x1b[2J"),  # screen clear: ESC shown as four characters
        ("\x1b]0;title\x07", r"\x1b]0;title\x07"),  # window title (OSC ... BEL)
        ("\x1b]52;c;ZXZpbA==\x1b\\", "\\x1b]52;c;ZXZpbA==\\x1b\\"),  # clipboard (OSC 52 ... ST)
        ("\x9b31m", r"\x9b31m"),  # C1 CSI
        ("ok\rALL TESTS PASSED", r"ok\rALL TESTS PASSED"),  # carriage return over the line
        ("a\x00b\x08c\x7fd", r"a\x00b\x08c\x7fd"),  # NUL, backspace, DEL
        ("\u202eevil", r"\u202eevil"),  # right-to-left override
        ("x\ud800y", "x\ufffdy"),  # a lone surrogate cannot be printed as UTF-8
        ("tab\tand é ü 中文 🙂", "tab\tand é ü 中文 🙂"),  # printable text and tab unchanged
    ],
)
def test_terminal_safe_shows_control_characters_escaped(text: str, shown: str) -> None:
    assert terminal_safe(text) == shown
    assert terminal_safe(shown) == shown  # idempotent: the escaped form is printable
    terminal_safe(text).encode("utf-8")


def test_newline_kept_in_messages_escaped_in_one_line_text() -> None:
    assert terminal_safe("line 1\nline 2") == "line 1\nline 2"
    assert terminal_safe("id\nFAKE", multiline=False) == r"id\nFAKE"
    assert terminal_safe(123) == "123"


def test_cap_cuts_with_a_note_and_keeps_short_text() -> None:
    assert cap("short", 10, "answer") == ("short", None)
    text, note = cap("x" * 52_428_800, 20_000, "answer")
    assert len(text) == 20_000 and note == "answer cut from 52,428,800 to 20,000 characters"


def test_keep_notes_dedupes_and_bounds() -> None:
    assert keep_notes(["a", "b", "a"]) == ["a", "b"]
    many = keep_notes(f"n{i}" for i in range(100))
    assert len(many) == 20 and many[-1] == "... and 81 more notes"


def test_error_message_is_type_and_message_never_a_location() -> None:
    assert (
        error_message(RecursionError("maximum recursion depth exceeded"))
        == "RecursionError: maximum recursion depth exceeded"
    )
    assert error_message(KeyError()) == "KeyError"
    assert error_message(ValueError("a\n  b" + "c" * 1000), limit=20) == "ValueError: a bccccccccccccccccc"

    class Hostile(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert error_message(Hostile()) == "Hostile"


def test_bound_response_cuts_answer_and_every_chunk_text_with_notes() -> None:
    chunk = Chunk.model_validate({"chunk_id": "c" * 300, "text": "t" * 300, "source": "s" * 300})  # an extra field too
    response = RagResponse(answer="a" * 300, retrieved_chunks=[chunk], references=[Chunk(text="ok")])
    bounded, notes = bound_response(response, Limits(answer=100, chunk_text=200))
    assert len(bounded.answer) == 100 and bounded.references[0].text == "ok"
    cut = bounded.retrieved_chunks[0]
    assert cut.chunk_id is not None and cut.text is not None and cut.model_extra is not None
    assert len(cut.chunk_id) == len(cut.text) == len(cut.model_extra["source"]) == 200
    assert notes == [
        "answer cut from 300 to 100 characters",
        "retrieved_chunks[0].chunk_id cut from 300 to 200 characters",
        "retrieved_chunks[0].text cut from 300 to 200 characters",
        "retrieved_chunks[0].source cut from 300 to 200 characters",
    ]
    same, none = bound_response(RagResponse(answer="fine"), Limits())
    assert none == [] and same.answer == "fine"


def test_unwritable_field_makes_the_record_an_error_naming_it() -> None:
    deep: list[Any] = []
    for _ in range(100_000):  # past the json encoder's recursion limit
        deep = [deep]
    record = {
        "key": "s.jsonl::a",
        "outcome": "passed",
        "error": None,
        "answer": "ok",
        "retrieved_chunks": [{"x": deep}],
    }
    written = writable_record(record)
    assert written["outcome"] == "error" and "retrieved_chunks" not in written and written["answer"] == "ok"
    assert written["error"]["kind"] == "unwritable"
    assert "'retrieved_chunks' (JsonLimitError: nested deeper than 64 levels" in written["error"]["message"]
    json.loads(dumps(written))
    fine = {"key": "k", "score": float("nan"), "text": "\ud800"}
    assert writable_record(fine) is fine
    assert json.loads(dumps(fine)) == {"key": "k", "score": None, "text": "\ufffd"}


def test_summary_lines_are_terminal_safe(tmp_path: Path) -> None:
    from pytest_rageval.config.settings import Settings
    from pytest_rageval.report.terminal import summary_lines

    lines = summary_lines(
        {"aggregate_metrics": {}}, Settings(rootdir=tmp_path), None, ["flipped: s.jsonl::\x1b[2Jid\nFAKE"], None
    )
    assert lines[-1] == r"flipped: s.jsonl::\x1b[2Jid\nFAKE"
