"""Eval-set fuzzing: generated files of good and bad lines, through the loader and through a whole pytest run.

Every generated line knows what it must become: a case (good), one bad line whose message names the file,
the line and (where there is one) the field, or nothing (blank lines and ``//`` comments). Files mix
good and bad lines, start with a BOM or not, and end lines with LF or CRLF. Hypothesis runs derandomized
(a fixed seed, no example database), so CI sees the same lines every time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pytest_rageval.evaluation.evalset import load_eval_file

DISPLAY = "eval_sets/fuzz.jsonl"
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.function_scoped_fixture,
    ],
)


@dataclass(frozen=True)
class Line:
    """One generated line: its bytes (no line ending) and what the loader must make of it."""

    raw: bytes
    kind: str  # "good", "bad" or "skip"
    expect: str = ""  # a bad line's message must contain this (the field, or the problem when there is no field)
    case_id: str | None = None


# --------------------------------------------------------------------------- good lines

#: Printable text without the characters an id may not hold; any Unicode letter, digit, punctuation or symbol.
ID_TEXT = st.text(st.characters(categories=["L", "N", "P", "S"], exclude_characters="[]:"), max_size=12)
#: Any valid Unicode text (no surrogates): control characters, NUL, RTL marks and emoji included.
ANY_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=False, allow_infinity=False), ANY_TEXT
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(ANY_TEXT, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def good_line(draw: st.DrawFn, n: int) -> Line:
    case_id = f"c{n}-{draw(ID_TEXT)}"
    obj: dict[str, Any] = {"id": case_id, "question": draw(ANY_TEXT.filter(lambda s: s.strip()))}
    optional = {
        "answerable": st.booleans(),
        "reference_answer": ANY_TEXT,
        "expected_key_facts": st.lists(ANY_TEXT, max_size=3),
        "tags": st.lists(ID_TEXT.filter(bool), max_size=3),
        "category": ID_TEXT.filter(bool),
        "metadata": st.dictionaries(ANY_TEXT, JSON_VALUE, max_size=3),
        "params": st.dictionaries(ANY_TEXT, JSON_VALUE, max_size=3),
        "repeat": st.integers(1, 2),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=4)):
        obj[key] = draw(optional[key])
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    return Line(text.encode("utf-8"), "good", case_id=case_id)


# --------------------------------------------------------------------------- bad lines

#: field -> values of the wrong type (or out of range) for it
WRONG: dict[str, list[Any]] = {
    "question": [5, None, [], {"q": 1}, True, "   "],
    "answerable": ["yes", 1, None, []],
    "reference_answer": [3, ["a"], {"x": "y"}],
    "expected_key_facts": ["fact", [1, 2], {"a": "b"}],
    "gold_supports": ["a.md", [{"rel_path": 5}], [{"rel_path": ""}], [{"heading": "x"}]],
    "gold_doc_ids": ["d1", [1], {"d": 1}],
    "required_support_groups": [[[5]], [[]], "0", [["0"]]],
    "recency_conflict_rule": ["newest", 1],
    "tags": ["t", [1], {"t": 1}],
    "category": [1, None, ["c"]],
    "thresholds": [[], "mrr", {"mrr": "high"}],
    "params": [[], "p", 1],
    "metadata": [[], "m", 2.5],
    "flaky": ["no", 0],
    "repeat": [0, -1, 101, 10**9, "2", 1.5, True],
    "skip": [True, 1],
    "xfail": [False, []],
}
BAD_IDS = [
    "a\nb",
    "a\tb",
    "a\x00b",
    "\x1b[31mred",
    "a\x7f",
    "a\x85b",
    "a\u200bb",
    " a",
    "a ",
    "a::b",
    "a[0]",
    "x]",
    "line7",
    "",
]
DEEP_DEPTHS = [65, 200, 100_000]


def _bad(n: int, **fields: Any) -> dict[str, Any]:
    return {"id": f"bad{n}", "question": "q?", **fields}


@st.composite
def bad_line(draw: st.DrawFn, n: int) -> Line:
    kind = draw(
        st.sampled_from(
            [
                "wrong type",
                "bad id",
                "surrogate",
                "huge number",
                "deep",
                "nonfinite",
                "duplicate",
                "missing",
                "syntax",
                "not object",
                "utf8",
                "unknown key",
            ]
        )
    )
    if kind == "wrong type":
        field = draw(st.sampled_from(sorted(WRONG)))
        return Line(
            json.dumps(_bad(n, **{field: draw(st.sampled_from(WRONG[field]))})).encode(), "bad", f"field '{field}"
        )
    if kind == "bad id":
        return Line(json.dumps({"id": draw(st.sampled_from(BAD_IDS)), "question": "q?"}).encode(), "bad", "field 'id'")
    field = draw(st.sampled_from(["metadata", "params"]))
    if kind == "surrogate":
        field = draw(st.sampled_from(["metadata", "params", "question", "tags", "id"]))
        escape = f"\\u{draw(st.integers(0xD800, 0xDFFF)):04x}"
        value = {
            "metadata": f'{{"k": "x{escape}"}}',
            "params": f'{{"{escape}": 1}}',
            "question": f'"q{escape}"',
            "tags": f'["{escape}"]',
            "id": f'"bad{n}{escape}"',
        }[field]
        rest = ", ".join(f'"{k}": {v}' for k, v in {"id": f'"bad{n}"', "question": '"q?"', field: value}.items())
        return Line(("{" + rest + "}").encode(), "bad", f"field '{field}")
    if kind == "huge number":
        digits = draw(st.sampled_from([101, 5000, 100_000]))
        literal = draw(st.sampled_from(["1" * digits, "-" + "9" * digits, "1." + "0" * digits, "1e" + "9" * digits]))
        return Line(
            f'{{"id": "bad{n}", "question": "q?", "{field}": {{"n": [{literal}]}}}}'.encode(), "bad", f"field '{field}"
        )
    if kind == "deep":
        depth = draw(st.sampled_from(DEEP_DEPTHS))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        nested = opener * depth + "1" + closer * depth
        return Line(
            f'{{"id": "bad{n}", "question": "q?", "{field}": {{"d": {nested}}}}}'.encode(), "bad", f"field '{field}"
        )
    if kind == "nonfinite":
        field = draw(st.sampled_from(["metadata", "params", "thresholds", "repeat"]))
        constant = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"]))
        value = constant if field == "repeat" else f'{{"mrr": {constant}}}'
        return Line(f'{{"id": "bad{n}", "question": "q?", "{field}": {value}}}'.encode(), "bad", f"field '{field}")
    if kind == "duplicate":
        where = draw(st.sampled_from(["question", "id", "metadata"]))
        if where == "metadata":
            return Line(
                f'{{"id": "bad{n}", "question": "q?", "metadata": {{"k": 1, "k": 2}}}}'.encode(),
                "bad",
                "field 'metadata.k'",
            )
        text = f'{{"id": "bad{n}", "question": "q?", "{where}": "{"again" if where == "question" else f"bad{n}"}"}}'
        return Line(text.encode(), "bad", f"field '{where}': key '{where}' is given twice")
    if kind == "missing":
        return Line(json.dumps({"id": f"bad{n}"}).encode(), "bad", "field 'question': required field is missing")
    if kind == "syntax":
        text = draw(
            st.sampled_from(['{"id": "x", ', "{id: 1}", "[1, 2", '{"a": 1}}', "'single'", "nul", '{"a": "\x01"}'])
        )
        return Line(text.encode(), "bad", "invalid JSON")
    if kind == "not object":
        text = draw(st.sampled_from(["[]", "1", '"text"', "null", "true", "[{}]"]))
        return Line(text.encode(), "bad", "expected a JSON object")
    if kind == "utf8":
        raw = draw(st.sampled_from([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\x80abc"]))
        return Line(b'{"id": "bad%d", "question": "' % n + raw + b'"}', "bad", "not valid UTF-8")
    key = draw(st.sampled_from(["questoin", "gold_support", "Tags", "\u00e9xtra"]))
    return Line(json.dumps(_bad(n, **{key: 1})).encode(), "bad", f"unknown key {key!r}")


SKIP_LINES = [b"", b"   ", b"// a comment", b"  // indented comment", b"\t"]


@st.composite
def eval_file(draw: st.DrawFn, size: int) -> tuple[bytes, list[Line]]:
    """``size`` lines (good, bad, skipped), a BOM or not, LF or CRLF per line."""
    lines: list[Line] = []
    for n in range(size):
        pick = draw(st.sampled_from(["good", "good", "bad", "bad", "bad", "skip"]))
        if pick == "good":
            lines.append(draw(good_line(n)))
        elif pick == "bad":
            lines.append(draw(bad_line(n)))
        else:
            lines.append(Line(draw(st.sampled_from(SKIP_LINES)), "skip"))
    endings = [draw(st.sampled_from([b"\n", b"\r\n"])) for _ in lines]
    data = b"".join(line.raw + end for line, end in zip(lines, endings))
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    return data, lines


def check_loaded(path: Path, lines: list[Line]) -> None:
    """Good lines load (right id, right line), each bad line is exactly one BadLine naming file, line and field."""
    loaded = load_eval_file(path, display=DISPLAY)
    cases = {c.line: c.case.id for c in loaded.cases}
    bad: dict[int, list[str]] = {}
    for b in loaded.bad:
        bad.setdefault(b.line, []).append(b.message)
    for number, line in enumerate(lines, start=1):
        if line.kind == "good":
            assert cases.get(number) == line.case_id and number not in bad, (number, line, bad.get(number))
        elif line.kind == "bad":
            messages = bad.get(number, [])
            assert len(messages) == 1 and number not in cases, (number, line.raw[:200], messages)
            message = messages[0]
            assert message.startswith(f"{DISPLAY}:{number}: ") and line.expect in message, (line.raw[:200], message)
            assert "\n" not in message and len(message) < 2000, message[:300]
        else:
            assert number not in cases and number not in bad
    assert len(cases) + len(bad) == sum(line.kind != "skip" for line in lines)


def test_generated_lines_through_the_loader(tmp_path: Path) -> None:
    """120 generated files of 10 lines each through the loader: 1,000+ lines, each good, bad or skipped as drawn."""
    counts: list[int] = []

    @settings(FUZZ, max_examples=120)
    @given(eval_file(size=10))
    def check(generated: tuple[bytes, list[Line]]) -> None:
        data, lines = generated
        path = tmp_path / "fuzz.jsonl"
        path.write_bytes(data)
        check_loaded(path, lines)
        counts.append(len(lines))

    check()
    assert sum(counts) >= 1000


RAG = "def ask(question, params):\n    return {'answer': 'An answer.', 'retrieved_chunks': [{'rel_path': 'a.md', 'text': 't'}]}\n"


def generated_files(count: int) -> list[tuple[bytes, list[Line]]]:
    """``count`` files of :func:`eval_file` drawn by Hypothesis with the fixed seed (the same every run)."""
    files: list[tuple[bytes, list[Line]]] = []

    @settings(FUZZ, max_examples=count, phases=[Phase.generate])
    @given(eval_file(size=10))
    def collect(generated: tuple[bytes, list[Line]]) -> None:
        files.append(generated)

    collect()
    return files


def joined(files: list[tuple[bytes, list[Line]]]) -> tuple[bytes, list[Line]]:
    """One file of many: good ids made unique per part (``f<k>-``), a BOM only at the start, CRLF kept."""
    data, lines = b"\xef\xbb\xbf", []
    for k, (part, part_lines) in enumerate(files):
        part = part.removeprefix(b"\xef\xbb\xbf")
        chunks = part.split(b"\n")[:-1]
        for chunk, line in zip(chunks, part_lines):
            if line.kind == "good":
                obj = json.loads(chunk)
                obj["id"] = f"f{k}-{obj['id']}"
                line = Line(json.dumps(obj).encode(), "good", case_id=obj["id"])
                chunk = line.raw + (b"\r" if chunk.endswith(b"\r") else b"")
            data += chunk + b"\n"
            lines.append(line)
    return data, lines


def test_generated_set_through_a_pytest_run(pytester: pytest.Pytester) -> None:
    data, lines = joined(generated_files(30))
    sets = pytester.path / "eval_sets"
    sets.mkdir(exist_ok=True)
    (sets / "fuzz.jsonl").write_bytes(data)
    pytester.makepyfile(rag=RAG)
    check_loaded(sets / "fuzz.jsonl", lines)  # the file is what the generator meant
    result = pytester.runpytest_subprocess(
        "--rageval", "--rageval-judge=none", "--rageval-target=rag:ask", "-p", "no:cacheprovider"
    )
    good = sum(line.kind == "good" for line in lines)
    bad = sum(line.kind == "bad" for line in lines)
    # The target never abstains: an unanswerable case fails on `abstained`, every other good case passes.
    unanswerable = sum(line.kind == "good" and json.loads(line.raw).get("answerable") is False for line in lines)
    assert len(lines) == 300 and good >= 50 and bad >= 50 and unanswerable
    result.assert_outcomes(passed=good - unanswerable, failed=unanswerable, errors=bad)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    run_id = (pytester.path / "results" / "latest").read_text().strip()
    metrics = json.loads((pytester.path / "results" / run_id / "metrics.json").read_text())
    assert metrics["complete"] is True and metrics["invalid_lines"] == bad and metrics["total_tests"] == good
