"""`rageval label` (issue 10 item 4, seed 003 section 4): gold labelled through stdin against a loopback ask server.

The end-to-end tests run the `rageval` console script in a subprocess with stdin piped, against tests/helpers/ask_server.py,
on real files; the labelled set is then run with `pytest --rageval` (pytester) against the same server.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk

from pytest_rageval.cli import build_parser
from pytest_rageval.engine.label import (
    LabelError,
    LabelResult,
    LineChooser,
    Question,
    format_question,
    label_set,
    select_cases,
)
from pytest_rageval.evaluation.anchors import support_matches
from pytest_rageval.evaluation.evalset import load_eval_file
from pytest_rageval.evaluation.label_edit import (
    Choice,
    ChoiceError,
    EvalSetText,
    LabelEditError,
    anchor_of,
    labelled_line,
    parse_choice,
)
from pytest_rageval.evaluation.schema import Chunk, EvalCase, GoldSupport
from pytest_rageval.targets.callable_client import CallableClient

HOSTILE = "\x1b[2J\x1b[H\x1b]52;c;cHduZWQ=\x07fake prompt\rOVERWRITTEN " + "long " * 20000

#: What the scripted system retrieves per question (rank order).
RETRIEVED: dict[str, list[dict[str, Any]]] = {
    "Who proposed STIP?": [
        chunk("notes/other.md", "# Other", 1, text="Unrelated text about the weather."),
        chunk(
            "proposals/stip.md",
            "# STIP > ## Summary",
            2,
            text="# Summary\nSTIP was proposed by the Arbitrum Foundation in 2023.",
        ),
        chunk("proposals/stip.md", "# STIP > ## Vote", 3, text="The vote passed with 71% For."),
    ],
    "Which grants did STIP and its bridge pay?": [
        chunk("proposals/stip.md", "# STIP > ## Budget", 1, text="STIP paid 50,000,000 ARB to protocols."),
        chunk("notes/noise.md", ["Noise"], 2, text="Nothing to see."),
        chunk("proposals/bridge.md", ["STIP Bridge", "Budget"], 3, text="The bridge paid 21,400,000 ARB."),
    ],
    "What is the capital of Mars?": [chunk("notes/space.md", "# Space", 1, text="Mars is a planet.")],
    "Hostile?": [
        chunk("evil/\x1b[31mred.md", "# \x1b]0;title\x07Evil", 1, text=HOSTILE),
        chunk("evil/ok.md", "# OK", 2, text="A calm chunk."),
    ],
}


def responder(body: dict[str, Any]) -> Any:
    chunks = RETRIEVED.get(body["question"], [])[: body["k"]]
    return answer("An answer.", chunks)


SET_LINES = [
    "// hand-written comment, kept as is",
    '{"id": "stip", "question": "Who proposed STIP?", "tags": ["stip"]}',
    "",
    '{"id":"known","question":"Who proposed STIP?","gold_supports":[{"rel_path":"proposals/stip.md"}]}',
    '{"id": "broken", "question": "Q?", "answerable": "no"}',
    '{"id": "grants", "query": "Which grants did STIP and its bridge pay?", "category": "multi_hop"}\r',
    '  // indented comment with "json": {"looking": 1}',
    '{"id": "mars", "question": "What is the capital of Mars?", "reference_answer": "none"}',
]


def rageval_command() -> list[str]:
    """The `rageval` console script of this Python (the package's own entry point)."""
    script = Path(sys.executable).with_name("rageval")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pytest_rageval.cli"]


def rageval(*args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`rageval ARGS` with ``stdin`` piped, in ``cwd`` (default /: no pyproject.toml above it)."""
    return subprocess.run(
        [*rageval_command(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd or Path("/"),
        encoding="utf-8",
        errors="replace",
    )


def write_set(path: Path, lines: list[str] = SET_LINES) -> bytes:
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.write_bytes(data)
    return data


def lines_of(data: bytes) -> list[bytes]:
    return data.split(b"\n")


# --------------------------------------------------------------------------- end to end, through the console script


def test_labels_piped_through_stdin_score_recall_1_on_the_same_system(
    tmp_path: Path, pytester: pytest.Pytester
) -> None:
    path = tmp_path / "set.jsonl"
    before = write_set(path)
    with AskServer(responder) as server:
        result = rageval("label", str(path), "--target", server.url, "--k", "3", stdin="2\n1 3 | 1\nu\n")
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        # only the questions without gold were asked, with debug on and k=3
        assert server.questions() == [
            "Who proposed STIP?",
            "Which grants did STIP and its bridge pay?",
            "What is the capital of Mars?",
        ]
        assert all("debug=true" in r["path"] and r["body"]["k"] == 3 for r in server.requests)
        out = result.stdout
        assert "note: line 5 is invalid and is left untouched" in out
        assert "  2. proposals/stip.md  STIP > Summary" in out  # the heading as matching reads it
        assert "labelled: 2 given gold, 1 marked unanswerable, 0 skipped; wrote" in out

        after = path.read_bytes()
        old, new = lines_of(before), lines_of(after)
        assert len(old) == len(new)
        changed = [i + 1 for i, (a, b) in enumerate(zip(old, new)) if a != b]
        assert changed == [
            2,
            6,
            8,
        ]  # every other line (comments, blanks, the invalid one, the labelled-before one) as it was
        assert new[5].endswith(b"\r")  # the CRLF line keeps its \r
        stip, grants, mars = (json.loads(new[i - 1]) for i in changed)
        assert list(stip) == [
            "id",
            "question",
            "gold_supports",
            "tags",
        ]  # placed in field order, the rest kept in order
        assert stip["gold_supports"] == [
            {
                "rel_path": "proposals/stip.md",
                "heading_path": "# STIP > ## Summary",
                "snippets": ["STIP was proposed by the Arbitrum Foundation in 2023."],
            }
        ]
        assert grants["query"] == "Which grants did STIP and its bridge pay?"
        assert [s["rel_path"] for s in grants["gold_supports"]] == ["proposals/stip.md", "proposals/bridge.md"]
        assert grants["gold_supports"][1]["heading_path"] == ["STIP Bridge", "Budget"]
        assert grants["required_support_groups"] == [[0, 1], [0]]
        assert mars == {
            "id": "mars",
            "question": "What is the capital of Mars?",
            "answerable": False,
            "reference_answer": "none",
        }
        loaded = load_eval_file(path)
        assert [b.line for b in loaded.bad] == [5] and len(loaded.cases) == 4

        # the labelled set, run by the plugin against the same system: recall 1 (snippets required too)
        shutil.copy(path, pytester.path / "labelled.jsonl")
        pytester.makeini("[pytest]\nrageval_require_snippets = true\n")
        run = pytester.runpytest(
            "--rageval", "--rageval-retrieval-only", f"--rageval-target={server.url}", "labelled.jsonl"
        )
    records = {
        r.get("test_case_id"): r
        for r in map(json.loads, next(pytester.path.glob("results/*/results.jsonl")).read_text().splitlines())
    }
    assert records["stip"]["metrics"]["recall_at_k"] == 1
    assert records["grants"]["metrics"]["recall_at_k"] == 1
    assert records["grants"]["metrics"]["recall_all_at_k"] == 1
    assert records["mars"]["answerable"] is False
    assert records["stip"]["outcome"] == records["grants"]["outcome"] == "passed"
    run.assert_outcomes(
        passed=3, failed=1, errors=1
    )  # mars did not abstain (the scripted system never does); line 5 is bad


def test_quit_and_end_of_input_keep_earlier_labels(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    before = write_set(path)
    with AskServer(responder) as server:
        quit_ = rageval("label", str(path), "--target", server.url, stdin="2\nq\n2\n")
        assert quit_.returncode == 0, quit_.stderr
        assert len(server.requests) == 2  # nothing asked after q
    assert "labelled: 1 given gold, 0 marked unanswerable, 0 skipped, 2 not asked (quit); wrote" in quit_.stdout
    after = path.read_bytes()
    assert [i for i, (a, b) in enumerate(zip(lines_of(before), lines_of(after))) if a != b] == [1]

    path2 = tmp_path / "set2.jsonl"
    write_set(path2)
    with AskServer(responder) as server:
        eof = rageval("label", str(path2), "--target", server.url, stdin="s\n1\n")
    assert eof.returncode == 0
    assert "(end of input: quit)" in eof.stdout
    assert "0 skipped" not in eof.stdout and "1 skipped" in eof.stdout
    assert json.loads(lines_of(path2.read_bytes())[5])["gold_supports"][0]["rel_path"] == "proposals/stip.md"


def test_a_wrong_piped_answer_stops_naming_its_input_line(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    write_set(path)
    with AskServer(responder) as server:
        result = rageval("label", str(path), "--target", server.url, "--k", "3", stdin="2\n9\n1\n")
    assert result.returncode == 2
    assert (
        result.stderr == "rageval: label: stdin line 2 ('9'): there is no chunk 9 (this question has chunks 1 to 3)\n"
    )
    assert "Traceback" not in result.stdout
    data = path.read_bytes()
    assert b"Summary" in lines_of(data)[1] and b"gold_supports" not in lines_of(data)[5]  # the first label stayed


def test_hostile_chunk_text_is_shown_escaped_and_labelled_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    write_set(path, ['{"id": "evil", "question": "Hostile?"}'])
    with AskServer(responder) as server:
        result = rageval("label", str(path), "--target", server.url, stdin="1 2\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b[H\\x1b]52;c;cHduZWQ=\\x07fake prompt OVERWRITTEN long long" in out
    assert "evil/\\x1b[31mred.md  \\x1b]0;title\\x07Evil" in out
    assert (
        max(len(line) for line in out.splitlines()) < 400
    )  # 100,000 characters of chunk text shown as a short excerpt
    gold = json.loads(path.read_text())["gold_supports"]
    assert gold[0]["rel_path"] == "evil/\x1b[31mred.md"  # the anchor is what the system sends, to match it
    assert gold[0]["snippets"] == ["fake prompt"]  # copied from the text, without a control character
    assert gold[1] == {"rel_path": "evil/ok.md", "heading_path": "# OK", "snippets": ["A calm chunk."]}


def test_errors_are_one_line_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_rageval.cli import main

    path = tmp_path / "set.jsonl"
    write_set(path)
    # the console script: a file that is not there, a system that does not answer
    missing = rageval("label", str(tmp_path / "nope.jsonl"), "--target", "http://127.0.0.1:9/ask")
    unreachable = rageval("label", str(path), "--target", "http://127.0.0.1:9/api/v1/ask", stdin="1\n")
    for result, line in (
        (missing, f"rageval: label: {tmp_path / 'nope.jsonl'}: no such file\n"),
        (
            unreachable,
            "rageval: label: stip (line 2): asking the system failed: connection to "
            "http://127.0.0.1:9/api/v1/ask failed (retried 2 times): ConnectError",
        ),
    ):
        assert result.returncode == 2 and result.stdout.count("Traceback") == 0
        assert result.stderr.startswith(line) and result.stderr.count("\n") == 1, result.stderr

    # the same entry point in this process, for the rest (in a folder without a pyproject.toml above it)
    monkeypatch.delenv("RAGEVAL_TARGET", raising=False)
    monkeypatch.chdir("/")
    with AskServer(responder) as server:
        expected = {
            (
                "--target",
                server.url,
                "--ids",
                "stip,stpi2,mars",
            ): f"rageval: label: --ids stpi2: no question with that id in {path} (did you mean 'stip'?)",
            (
                "--target",
                server.url,
                "--ids",
                "broken",
            ): "rageval: label: --ids broken: its line is invalid and is left "
            f"untouched: {path}:5: field 'answerable': Input should be a valid boolean",
            ("--target", server.url, "--ids", ","): "rageval: label: --ids names no id",
            ("--target", server.url, "--k", "0"): "rageval: label: --k must be at least 1, got 0",
            (): "rageval: label: --target URL or module:function is needed (or rageval_target in [tool.pytest.ini_options], or env RAGEVAL_TARGET)",
            (
                "--pyproject",
                str(tmp_path / "none.toml"),
            ): f"rageval: label: --pyproject {tmp_path / 'none.toml'}: no such file",
            (
                "--target",
                "no_such_module_xyz:ask",
            ): "rageval: label: rageval_target 'no_such_module_xyz:ask': cannot import "
            "module 'no_such_module_xyz' (No module named 'no_such_module_xyz')",
            (
                "--target",
                "http://127.0.0.1:9/ask",
                "--header",
                "no colon",
            ): "rageval: label: --header number 1: expected 'Name: value'",
        }
        for args, line in expected.items():
            with pytest.raises(SystemExit) as exit_:
                main(["label", str(path), *args])
            assert exit_.value.code == 2
            assert capsys.readouterr().err == line + "\n"
        with pytest.raises(SystemExit):
            main(["label", str(tmp_path), "--target", server.url])
        assert capsys.readouterr().err == f"rageval: label: {tmp_path}: is a folder, not an eval-set file\n"
        assert server.requests == []
    assert path.read_bytes() == ("\n".join(SET_LINES) + "\n").encode()


def test_every_argument_has_help_and_the_protocol_is_in_help() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert isinstance(sub, argparse._SubParsersAction)
    parser = sub.choices["label"]
    assert [a.option_strings or [a.dest] for a in parser._actions if a.dest != "help" and not a.help] == []
    text = parser.format_help()
    for line in ("1 3 | 2   support groups", "u         unanswerable", "q         quit"):
        assert line in text


# --------------------------------------------------------------------------- the function a notebook calls


def test_label_set_from_python_with_a_callable_system_and_an_interrupt(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    write_set(path)
    asked: list[Question] = []

    def system(question: str, params: dict[str, Any]) -> dict[str, Any]:
        return answer("An answer.", RETRIEVED[question][: params["k"]])

    def choose(question: Question) -> str:
        asked.append(question)
        if len(asked) == 3:
            raise KeyboardInterrupt
        return "?" if len(asked) == 1 else "2"  # help first: the same question is asked again

    shown: list[str] = []
    result = label_set(path, CallableClient(system), choose, k=2, show=shown.append)
    assert isinstance(result, LabelResult) and result.interrupted
    assert result.supported == ["stip"] and result.not_asked == ["grants", "mars"]
    assert [q.case.id for q in asked] == ["stip", "stip", "grants"] and len(asked[0].chunks) == 2
    assert json.loads(lines_of(path.read_bytes())[1])["gold_supports"][0]["heading_path"] == "# STIP > ## Summary"
    assert "  -> stip: 1 gold support" in shown

    again = label_set(path, CallableClient(system), lambda q: Choice("skip"), ids=["known"])
    assert again.skipped == ["known"]


def test_interactive_answers_are_explained_and_asked_again() -> None:
    chunks = tuple(Chunk(**c) for c in RETRIEVED["Who proposed STIP?"])
    question = Question(EvalCase(id="q", question="Q?"), 1, 1, 1, "A.", False, chunks)
    out: list[str] = []
    typed = iter(["7", "", "?", " 2 , 3 "])
    chooser = LineChooser([], out.append, interactive=True, read=lambda prompt: next(typed))
    choice = chooser(question)
    assert choice.groups == ((2, 3),) and not choice.grouped
    assert out[0] == "  there is no chunk 7 (this question has chunks 1 to 3)"
    assert out[1].startswith("  empty answer; answer with chunk numbers")
    assert out[2].startswith("  answer with chunk numbers: '1 3'")

    def eof(prompt: str) -> str:
        raise EOFError

    assert LineChooser([], out.append, interactive=True, read=eof)(question).kind == "quit"
    shown = format_question(question)
    assert shown[0] == "[1/1] q (line 1): Q?"
    assert shown[2] == "  1. notes/other.md  Other"


# --------------------------------------------------------------------------- the protocol, anchors and one line


CHUNKS = (
    Chunk(rel_path="a.md", heading_path="# A > ## One", text="First chunk of A, long enough."),
    Chunk(rel_path="a.md", heading_path="# A > ## One", text="Second chunk, same section."),
    Chunk(rel_path="b.md", heading_path=None, text=""),
    Chunk(doc_id="doc-1", text="id only"),
    Chunk(doc_id="doc-2"),
    Chunk(text="nothing"),
)


@pytest.mark.parametrize(
    ("text", "kind", "groups", "grouped"),
    [
        ("1 3", "supports", ((1, 3),), False),
        ("1,3", "supports", ((1, 3),), False),
        ("3, 1 1", "supports", ((3, 1),), False),
        ("1 3 | 2", "supports", ((1, 3), (2,)), True),
        ("U", "unanswerable", (), False),
        (" s ", "skip", (), False),
        ("quit", "quit", (), False),
        ("?", "help", (), False),
    ],
)
def test_the_answer_protocol(text: str, kind: str, groups: tuple[Any, ...], grouped: bool) -> None:
    choice = parse_choice(text, CHUNKS)
    assert (choice.kind, choice.groups, choice.grouped) == (kind, groups, grouped)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty answer"),
        ("7", "there is no chunk 7 (this question has chunks 1 to 6)"),
        ("0", "there is no chunk 0"),
        ("one", "'one' is not a chunk number"),
        ("1 |", "an empty group"),
        ("²", "'²' is not a chunk number"),
        ("1 4", "chunk 4 has no rel_path while chunk 1 has one"),
        ("6", "chunk 6 has neither a rel_path nor a doc_id"),
    ],
)
def test_wrong_answers_say_why(text: str, message: str) -> None:
    with pytest.raises(ChoiceError, match=None) as info:
        parse_choice(text, CHUNKS)
    assert message in str(info.value)
    with pytest.raises(ChoiceError, match="no chunks were retrieved"):
        parse_choice("1", ())


def test_chunks_of_one_anchor_make_one_support_and_groups_follow() -> None:
    choice = parse_choice("3 1 | 2", CHUNKS)
    assert choice.supports == (
        {"rel_path": "b.md"},
        {
            "rel_path": "a.md",
            "heading_path": "# A > ## One",
            "snippets": ["First chunk of A, long enough.", "Second chunk, same section."],
        },
    )
    assert choice.support_groups == ((0, 1), (1,))
    ids = parse_choice("5 4 | 4", CHUNKS)
    assert ids.supports == () and ids.doc_ids == ("doc-2", "doc-1") and ids.support_groups == ((0, 1), (1,))


@pytest.mark.parametrize(
    "text",
    [
        "# Heading only",
        "\x1b[1mBold\x1b[0m and \ttabbed and a long line of prose that goes on and on beyond sixty characters for sure",
        "x" * 500,
        "ÄÖÜ straße İstanbul ǅ words here",
        "- [link](http://x) **bold** `code`",
    ],
)
def test_anchors_match_their_chunk_with_snippets_required(text: str) -> None:
    chunk_ = Chunk(rel_path="n.md", heading_path=["N", "M"], text=text)
    anchor = anchor_of(chunk_)
    assert support_matches(chunk_, GoldSupport(**anchor), True)
    for snippet in anchor.get("snippets", []):
        assert snippet in text and snippet.isprintable() and len(snippet) <= 60


def test_a_labelled_line_keeps_its_keys_in_order() -> None:
    obj = {
        "id": "x",
        "query": "Q?",
        "answerable": False,
        "expectedProposalIds": ["a"],
        "required_support_groups": [[0]],
        "recency_conflict_rule": "cite_newer",
        "tags": [],
    }
    supports = parse_choice("1", CHUNKS)
    new, notes = labelled_line(obj, supports)
    assert list(new) == ["id", "query", "answerable", "gold_supports", "recency_conflict_rule", "tags"]
    assert new["answerable"] is True and notes == [
        "removed expectedProposalIds",
        "removed required_support_groups",
        "answerable set to true",
    ]
    unanswerable, notes = labelled_line(obj, Choice("unanswerable"))
    assert unanswerable == {"id": "x", "query": "Q?", "answerable": False, "tags": []}
    assert notes == ["removed expectedProposalIds, required_support_groups, recency_conflict_rule"]
    ids, _ = labelled_line({"id": "y", "expectedProposalIds": ["z"], "question": "Q"}, parse_choice("4 | 5", CHUNKS))
    assert ids == {
        "id": "y",
        "expectedProposalIds": ["doc-1", "doc-2"],
        "question": "Q",
        "required_support_groups": [[0], [1]],
    }


def test_the_file_is_rewritten_byte_for_byte_but_the_line(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    data = b'\xef\xbb\xbf{"id":"a","question":"Q?"}\r\n\xff not utf-8\n{"id": "b", "question": "R?"}'
    path.write_bytes(data)
    path.chmod(0o640)
    text = EvalSetText.read(path)
    assert [c.case.id for c in text.load("set").cases] == ["a", "b"]
    text.replace(1, {"id": "a", "question": "Q?", "answerable": False})
    text.write()
    assert (
        path.read_bytes()
        == b'\xef\xbb\xbf{"id":"a","question":"Q?","answerable":false}\r\n\xff not utf-8\n{"id": "b", "question": "R?"}'
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["set.jsonl"]  # no temp file left
    path.write_bytes(data)  # changed by someone else meanwhile: nothing is written
    text.replace(3, {"id": "b", "question": "R?", "answerable": False})
    with pytest.raises(LabelEditError, match="was changed by something else while labelling"):
        text.write()
    assert path.read_bytes() == data


def test_ctrl_c_keeps_the_labels_written_before(tmp_path: Path) -> None:
    import signal

    path = tmp_path / "set.jsonl"
    before = write_set(path)
    with AskServer(responder) as server:
        command = rageval_command()
        proc = subprocess.Popen(
            [*command, "label", str(path), "--target", server.url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("2\n")
        proc.stdin.flush()
        seen = []
        for line in proc.stdout:  # the second question is shown: its answer is being waited for (stdin stays open)
            seen.append(line)
            if line.startswith("[2/3]"):
                break
        waiting_for_a_line(proc.pid)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "labelled: 1 given gold, 0 marked unanswerable, 0 skipped, 2 not asked (interrupted); wrote" in out
    after = path.read_bytes()
    assert [i for i, (a, b) in enumerate(zip(lines_of(before), lines_of(after))) if a != b] == [1]
    assert [c.case.id for c in load_eval_file(path).cases] == ["stip", "known", "grants", "mars"]


def test_an_id_only_system_through_maps_and_a_header_gets_gold_doc_ids(
    tmp_path: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ask_server import SEED_001_RESPONSE_MAP, seed_001_ini

    def seed001(body: dict[str, Any]) -> Any:
        cited = ["stip", "noise", "stip-bridge"][: body["topK"]]
        return {
            "answer": "From the proposals.",
            "citations": [{"proposal_id": p, "snippet": f"About {p}."} for p in cited],
        }

    path = pytester.path / "ids.jsonl"
    write_set(path, ['{"id": "bridge", "query": "Which grants did STIP and its bridge pay?", "category": "multi_hop"}'])
    monkeypatch.setenv("RAG_TOKEN", "s3cret-token")
    with AskServer(seed001) as server:
        maps = [a for line in SEED_001_RESPONSE_MAP for a in ("--response-map", line)]
        result = rageval(
            "label",
            str(path),
            "--target",
            server.url,
            "--k",
            "3",
            "--header",
            "Authorization: Bearer ${RAG_TOKEN}",
            "--request-map",
            "question = query",
            "--request-map",
            "k = topK",
            *maps,
            stdin="1 3 | 1\n",
        )
        assert result.returncode == 0, result.stderr
        assert server.requests[0]["body"] == {"query": "Which grants did STIP and its bridge pay?", "topK": 3}
        assert server.requests[0]["headers"]["Authorization"] == "Bearer s3cret-token"
        assert "(no rel_path) doc_id stip-bridge" in result.stdout
        assert path.read_text() == (
            '{"id": "bridge", "query": "Which grants did STIP and its bridge pay?", "gold_doc_ids": '
            '["stip", "stip-bridge"], "required_support_groups": [[0, 1], [0]], "category": "multi_hop"}\n'
        )
        pytester.makeini(seed_001_ini())
        run = pytester.runpytest("--rageval", "--rageval-retrieval-only", f"--rageval-target={server.url}", "ids.jsonl")
    run.assert_outcomes(passed=1)
    record = json.loads(next(pytester.path.glob("results/*/results.jsonl")).read_text())
    assert record["metrics"]["recall_at_k"] == 1 and record["metrics"]["recall_all_at_k"] == 1


def test_the_projects_pytest_settings_reach_the_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from pytest_rageval.cli import main

    path = tmp_path / "set.jsonl"
    write_set(path, ['{"id": "stip", "question": "Who proposed STIP?"}'])
    monkeypatch.setenv("RAG_TOKEN", "tok-from-env")
    monkeypatch.setenv(
        "RAGEVAL_TARGET", "http://127.0.0.1:9/not-this-one"
    )  # the project's ini key wins, as in the plugin
    with AskServer(lambda body: responder({"question": body["q"], "k": body["k"]})) as server:
        (tmp_path / "pyproject.toml").write_text(
            "[tool.pytest.ini_options]\n"
            f'rageval_target = "{server.url}"\n'
            'rageval_headers = ["Authorization: Bearer ${RAG_TOKEN}"]\n'
            'rageval_request_map = ["question = q"]\n'
            'rageval_timeout = "5"\n'
        )
        sub = tmp_path / "sub"
        sub.mkdir()
        monkeypatch.chdir(sub)
        monkeypatch.setattr("sys.stdin", io.StringIO("2\n"))
        assert main(["label", str(path), "--header", "X-Extra: 1"]) == 0
        assert server.requests[0]["headers"]["Authorization"] == "Bearer tok-from-env"
        assert server.requests[0]["headers"]["X-Extra"] == "1"
    out = capsys.readouterr().out
    assert out.startswith(f"target: {server.url}?debug=true (from {tmp_path / 'pyproject.toml'}), k=20\n")
    assert json.loads(path.read_text())["gold_supports"][0]["heading_path"] == "# STIP > ## Summary"


#: The number of the read system call, where /proc/PID/syscall names it.
READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}


def waiting_for_a_line(pid: int) -> None:
    """Wait until process ``pid`` is blocked reading its standard input (Linux; elsewhere half a second)."""
    import platform
    import time

    number = READ_SYSCALL.get(platform.machine())
    if number is None or not Path(f"/proc/{pid}/syscall").exists():
        time.sleep(0.5)
        return
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/syscall").read_text().split()[:2] != [number, "0x0"]:
        assert time.monotonic() < deadline, "the command never waited for a line"
        time.sleep(0.01)


def test_on_a_terminal_a_wrong_answer_is_asked_again(tmp_path: Path) -> None:
    import pty
    import select
    import signal
    import time

    path = tmp_path / "set.jsonl"
    write_set(path, ['{"id": "stip", "question": "Who proposed STIP?"}', '{"id": "evil", "question": "Hostile?"}'])
    master, slave = pty.openpty()
    with AskServer(responder) as server:
        command = rageval_command()
        proc = subprocess.Popen(
            [*command, "label", str(path), "--target", server.url],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
            cwd="/",
        )
        os.close(slave)
        seen = b""

        def until(marker: bytes, count: int = 1) -> None:
            nonlocal seen
            deadline = time.monotonic() + 30
            while seen.count(marker) < count and time.monotonic() < deadline:
                if select.select([master], [], [], 0.5)[0]:
                    try:
                        seen += os.read(master, 65536)
                    except OSError:  # the terminal closed: the command ended
                        break
            assert seen.count(marker) >= count, seen.decode(errors="replace")

        until(b"label [1-3, u, s, q, ?]> ")
        os.write(master, b"9\n")
        until(b"there is no chunk 9 (this question has chunks 1 to 3)")
        until(b"label [1-3, u, s, q, ?]> ", 2)
        os.write(master, b"2\n")
        until(b"label [1-2, u, s, q, ?]> ")
        # input() prints its prompt before it blocks in read(); a signal that lands in between only sets Python's
        # flag until the next line is typed (so in any Python program). Under load that was one run in three.
        waiting_for_a_line(proc.pid)
        proc.send_signal(
            signal.SIGINT
        )  # Ctrl-C (the pty is not the command's controlling terminal, so ^C is sent as a signal)
        until(b"(interrupted)")
        assert proc.wait(timeout=30) == 130
    os.close(master)
    text = seen.decode(errors="replace")
    assert "\x1b[2J" not in text and "\x1b]52" not in text  # the hostile chunk of the second question is shown escaped
    assert "labelled: 1 given gold, 0 marked unanswerable, 0 skipped, 1 not asked (interrupted); wrote" in text
    assert json.loads(path.read_text().splitlines()[0])["gold_supports"][0]["heading_path"] == "# STIP > ## Summary"


def _files_up_to(size: int) -> Callable[[], None]:
    """For the child: writes past ``size`` bytes fail with EFBIG, as on a full disk (root ignores read-only modes)."""
    import resource
    import signal

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def test_a_label_that_cannot_be_written_is_shown_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    before = write_set(path)
    with AskServer(responder) as server:  # the labelled file is longer than it was: its rewrite is refused
        result = subprocess.run(
            [*rageval_command(), "label", str(path), "--target", server.url, "--k", "3"],
            input="2\n",
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",
            preexec_fn=_files_up_to(len(before)),
        )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(
        f"rageval: label: {path}: cannot write it: File too large; this label is not written: line 2 would read {{"
    ), result.stderr
    shown = json.loads(result.stderr.split(" would read ", 1)[1])
    assert shown["gold_supports"] and path.read_bytes() == before  # the file is as it was


def test_a_conversation_is_never_labelled_as_one_question(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    lines = [{"id": "one", "question": "What is STEP?"}, {"id": "chat", "turns": [{"question": "What is STEP?"}]}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    loaded = load_eval_file(path)
    assert [c.case.id for c in select_cases(loaded)] == ["one"]
    assert [c.case.id for c in select_cases(loaded, every=True)] == ["one"]
    with pytest.raises(LabelError, match=r"--ids chat: a conversation: its gold is per turn"):
        select_cases(loaded, ids=["chat"])
