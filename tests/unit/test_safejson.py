"""safejson: bounded, strict JSON from outside, and a writer that cannot fail on what it read."""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_rageval.safejson import MAX_DEPTH, JsonLimitError, clean, dump, dumps, loads


def test_plain_json_passes_unchanged() -> None:
    value, notes = loads('{"a": [1, 2.5, "x", null, true], "b": {"c": "\\ud83d\\ude00"}}')
    assert value == {"a": [1, 2.5, "x", None, True], "b": {"c": "\U0001f600"}}
    assert notes == []


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": -Infinity}', '{"a": 1e999}'])
def test_nonfinite_refused_or_nulled(text: str) -> None:
    with pytest.raises(JsonLimitError, match="not valid JSON"):
        loads(text)
    value, notes = loads(text, nonfinite="repair")
    assert value == {"a": None}
    assert notes and "null" in notes[0]


def test_lone_surrogate_repaired_with_its_path_or_refused() -> None:
    value, notes = loads('{"m": {"k": ["ok", "\\ud800x"]}, "\\udfff": 1}')
    assert value == {"m": {"k": ["ok", "\ufffdx"]}, "\ufffd": 1}
    assert any(note.startswith("m.k[1]:") for note in notes)
    with pytest.raises(JsonLimitError, match=r"m\.k\[1\]: a lone surrogate \(\\ud800\)"):
        loads('{"m": {"k": ["ok", "\\ud800x"]}}', surrogates="refuse")


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    with pytest.raises(JsonLimitError, match="nested deeper"):
        loads("[" * 100_000 + "]" * 100_000)
    with pytest.raises(JsonLimitError, match="nested deeper than 64"):
        loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)[1] == []


@pytest.mark.parametrize("literal", ["1" * 5000, "-" + "9" * 200, "1." + "0" * 200])
def test_huge_numbers_are_refused(literal: str) -> None:
    with pytest.raises(JsonLimitError, match="characters"):
        loads(f'{{"n": {literal}}}')


def test_duplicate_keys_by_policy() -> None:
    assert loads('{"a": 1, "a": 2}')[0] == {"a": 2}
    with pytest.raises(JsonLimitError, match="'a' is given twice"):
        loads('{"a": 1, "b": {"a": 0}, "a": 2}', duplicate_keys="refuse")


def test_clean_python_values_from_a_callable() -> None:
    value, notes = clean({"answer": "x\ud800", "s": [float("nan"), (1, float("inf"))]})
    assert value == {"answer": "x\ufffd", "s": [None, [1, None]]}
    assert len(notes) == 3
    with pytest.raises(JsonLimitError, match="integer"):
        clean({"n": 10**400})


def test_dumps_always_writes_strict_utf8_json() -> None:
    text = dumps({"a": float("nan"), "b": "\udc80", "c": ValueError("\ud800")})
    text.encode("utf-8")  # no lone surrogate left
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} written"))
    assert data["a"] is None and data["b"] == "\ufffd"


def test_repaired_nonfinite_notes_name_their_path() -> None:
    value, notes = loads(
        '{"debug": {"retrieved_chunks": [{}, {}, {"score_final": NaN}]}, "t": [-Infinity, 1e999]}', nonfinite="repair"
    )
    assert value == {"debug": {"retrieved_chunks": [{}, {}, {"score_final": None}]}, "t": [None, None]}
    assert sorted(notes) == [
        "debug.retrieved_chunks[2].score_final: NaN replaced by null",
        "t[0]: -Infinity replaced by null",
        "t[1]: Infinity replaced by null",
    ]


def test_bytes_decoded_as_json_says_and_invalid_utf8_is_replaced_with_a_note() -> None:
    assert loads('{"a": "\u00e9"}'.encode("utf-16")) == ({"a": "\u00e9"}, [])
    value, notes = loads(b'{"a": "x\xffy"}')
    assert value == {"a": "x\ufffdy"}
    assert notes == ["invalid UTF-8 bytes (first at byte 8) replaced by U+FFFD"]


def test_a_deep_path_is_shown_shortened() -> None:
    deep: list[Any] = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(JsonLimitError) as info:
        clean({"debug": {"meta": deep}})
    assert str(info.value) == "nested deeper than 64 levels (at debug.meta[0][0][0][0][0][0]...(54 more)...[0][0])"


# -- dump: the bytes of dumps, written piece by piece ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, 2.5, "x", None, True], "b": {"c": "\U0001f600 ü"}, "t": (1, 2)},
        {"lone": "a\ud800b", "\udfffkey": ["\udc00"]},  # lone surrogates: U+FFFD, as dumps writes them
        {"nan": float("nan"), "deep": {"inf": [float("-inf")]}, "ok": 1.5},  # the strict pass fails: cleaned, rewritten
        {"big": ["x" * 5000] * 40},  # longer than one block
        "top-level text",
    ],
    ids=["plain", "surrogates", "non-finite", "blocks", "string"],
)
def test_dump_writes_the_bytes_of_dumps(tmp_path: Path, value: Any) -> None:
    path = tmp_path / "out.json"
    with path.open("wb") as fh:
        fh.write(b"kept:")  # dump starts where the file is (and cuts back only to there)
        dump(value, fh, indent=2)
    assert path.read_bytes() == b"kept:" + dumps(value, indent=2).encode("utf-8")


class _Table(Mapping[str, dict[str, Any]]):
    """A mapping that is no dict and makes each entry when it is read (as the aggregates' case table does)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, key: str) -> dict[str, Any]:
        return {"key": key, "text": "t" * 200, "values": [1.0, 2.0, 3.0]}

    def __iter__(self) -> Iterator[str]:
        return (f"case-{i}" for i in range(self.n))

    def __len__(self) -> int:
        return self.n


def test_a_mapping_that_is_no_dict_is_written_as_an_object() -> None:
    value = {"cases": _Table(3), "empty": _Table(0)}
    expected = {"cases": {f"case-{i}": _Table(3)[f"case-{i}"] for i in range(3)}, "empty": {}}
    assert dumps(value, indent=2) == json.dumps(expected, indent=2)
    fh = io.BytesIO()
    dump(value, fh, indent=2)
    assert fh.getvalue().decode("utf-8") == json.dumps(expected, indent=2)


def test_dump_never_holds_the_whole_text_nor_the_whole_mapping(tmp_path: Path) -> None:
    table = _Table(20_000)  # ~6.7 MB of JSON, ~10 MB of entries if they were all made at once
    tracemalloc.start()
    try:
        with (tmp_path / "big.json").open("wb") as fh:
            dump({"cases": table}, fh, indent=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (tmp_path / "big.json").stat().st_size > 6_000_000
    assert peak < 2_000_000, f"peak {peak:,} bytes"
