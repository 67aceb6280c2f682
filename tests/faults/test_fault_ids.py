"""Config ids cannot collide, and ``question`` / ``k`` params cannot change what the RAG is asked behind the record.

Pure tests of the id builder (matrix.py) and real ``pytest --rageval`` runs (``pytester``) against a loopback
ask server that records every request body: what was sent is compared with what results.jsonl says.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from ask_server import AskServer, answer, chunk

from pytest_rageval.evaluation.matrix import (
    MatrixConfig,
    MatrixError,
    matrix_from_table,
    parse_matrix_option,
    value_text,
)

#: The collision a user met: two of the four configs were both named ``a=p-b=q-b=r``.
COLLIDING = "a=p-b=q,p;b=r,q-b=r"

#: Values that stress the id: separators of the id, of node ids and of the escaping itself, whitespace,
#: control and bidi characters, and ordinary values that must stay readable.
TRICKY: list[Any] = [
    "p",
    "p-b=q",
    "q-b=r",
    "-",
    "=",
    "-b=",
    "a=",
    "=b",
    "b=r",
    "x-",
    "-x",
    "%",
    "%25",
    "%3D",
    "%3A",
    "%%",
    "[",
    "]",
    "[x]",
    "x]-b=[y",
    ":",
    "::",
    ":::",
    "a::b",
    "a:b",
    "http://h:8080/x",
    "http://h::1/",
    " ",
    "x y",
    " x",
    "x ",
    "\t",
    "\n",
    "\r\n",
    "\x00",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\u2028",
    "\u00a0",
    "\u202e",
    "x\u202ey",
    "\u200b",
    "\ufeff",
    "\u00e9",
    "gpt-4o-mini",
    "x%20y",
    "x%2Dy",
    0,
    1,
    -1,
    0.5,
    1e-07,
    True,
    False,
    None,
]


def _parse_id(config_id: str) -> list[tuple[str, str]]:
    """Read an id back into (name, value text) pairs the way the docstring of ``MatrixConfig.id`` says it can be:
    split at ``=``; in each middle piece the last ``-`` ends the value (names hold no ``-``); percent-decode."""
    pieces = config_id.split("=")
    names, values = [pieces[0]], []
    for middle in pieces[1:-1]:
        value, _, name = middle.rpartition("-")
        values.append(value)
        names.append(name)
    values.append(pieces[-1])
    return [(name, unquote(value, errors="surrogatepass")) for name, value in zip(names, values)]


def _config(**params: Any) -> MatrixConfig:
    return MatrixConfig(tuple(sorted(params.items())))


# --------------------------------------------------------------------------- pure: the id builder


def test_the_reported_collision_gets_four_distinct_ids() -> None:
    ids = [c.id for c in parse_matrix_option(COLLIDING).configs()]
    assert len(ids) == len(set(ids)) == 4, ids
    assert ids == ["a=p-b%3Dq-b=r", "a=p-b%3Dq-b=q-b%3Dr", "a=p-b=r", "a=p-b=q-b%3Dr"]


def test_ids_are_injective_and_read_back_over_tricky_values() -> None:
    """Every config of matrices over one, two and three axes of tricky values: no two share an id, and each id
    reads back into exactly its params."""
    values = TRICKY
    seen: dict[str, tuple[tuple[str, Any], ...]] = {}
    for names in (("a",), ("a", "b"), ("a", "b", "c")):
        axes: dict[str, list[Any]] = {name: values if name != "c" else values[:12] for name in names}
        matrix = matrix_from_table(axes)
        assert matrix is not None
        for config in matrix.configs():
            assert seen.setdefault(config.id, config.params) == config.params, (config.id, config.params)
            assert _parse_id(config.id) == [(name, value_text(value)) for name, value in config.params], config.id
    assert len(seen) == len(values) + len(values) ** 2 + len(values) ** 2 * 12


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("http://host:8080/x", "http://host:8080/x"),
        (0.5, "0.5"),
        ("x-y", "x-y"),
        ("50%", "50%25"),
        ("a=b", "a%3Db"),
        ("[x]", "%5Bx%5D"),
        ("a::b", "a%3A%3Ab"),
        ("a:::b", "a%3A%3A%3Ab"),
        ("x y", "x%20y"),
        ("x\ty", "x%09y"),
        ("\x00", "%00"),
        ("x\u202ey", "x%E2%80%AEy"),
        ("\u00e9t\u00e9", "\u00e9t\u00e9"),
    ],
)
def test_values_keep_their_readable_form_and_escape_what_is_unsafe(value: Any, shown: str) -> None:
    assert _config(model=value).id == f"model={shown}"


def test_no_id_holds_a_node_id_separator_or_an_unprintable_character() -> None:
    matrix = matrix_from_table({"a": TRICKY})
    assert matrix is not None
    for config in matrix.configs():
        assert "::" not in config.id and "[" not in config.id and "]" not in config.id, config.id
        assert all(ch.isprintable() and not ch.isspace() for ch in config.id), config.id
        assert not any(unicodedata.category(ch) in ("Cc", "Cf") for ch in config.id), config.id


@pytest.mark.parametrize(
    "name",
    [
        "a-b",
        "a=b",
        "a[b",
        "a]",
        "a,b",
        "a;b",
        "a:b",
        "a b",
        "a\tb",
        "a\nb",
        "a\x00b",
        "a\u202eb",
        "a\u200bb",
        "-a",
    ],
)
def test_an_axis_name_that_could_blur_an_id_is_refused_naming_it(name: str) -> None:
    with pytest.raises(MatrixError) as info:
        matrix_from_table({name: [1]})
    assert repr(name) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["top_k", "k", "model", "alpha", "prompt_style", "_x", "A1"])
def test_ordinary_axis_names_stay_valid(name: str) -> None:
    matrix = matrix_from_table({name: [1, 2]})
    assert matrix is not None and [c.id for c in matrix.configs()] == [f"{name}=1", f"{name}=2"]


@pytest.mark.parametrize(
    "make", [lambda: parse_matrix_option("question=a,b"), lambda: matrix_from_table({"question": ["a"], "top_k": [5]})]
)
def test_a_question_axis_is_refused(make: Any) -> None:
    with pytest.raises(MatrixError) as info:
        make()
    assert "axis 'question' is reserved" in str(info.value)


# --------------------------------------------------------------------------- real runs


def _eval_set(pytester: pytest.Pytester, *cases: dict[str, Any]) -> None:
    lines = [{"question": f"question of {c['id']}", "gold_supports": [{"rel_path": "docs/a.md"}], **c} for c in cases]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in lines) + "\n"})


def _system(body: dict[str, Any]) -> dict[str, Any]:
    """k chunks, the gold one first."""
    k = int(body.get("k", 5))
    return answer(
        "an answer", [chunk("docs/a.md" if rank == 1 else f"docs/x{rank}.md", "# A", rank) for rank in range(1, k + 1)]
    )


def _args(url: str, *extra: str) -> list[str]:
    return ["--rageval", "--rageval-judge=none", f"--rageval-target={url}", "-p", "no:cacheprovider", *extra]


def _run_dir(pytester: pytest.Pytester) -> Path:
    return pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()


def _records(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (_run_dir(pytester) / "results.jsonl").read_text().splitlines()]


def test_the_colliding_matrix_runs_four_configs_under_four_ids(pytester: pytest.Pytester) -> None:
    _eval_set(pytester, {"id": "c0"}, {"id": "c1"})
    with AskServer(_system) as server:
        result = pytester.runpytest(*_args(server.url, "--rageval-matrix", COLLIDING))
    assert result.ret == 0, result.stdout.str()
    records = _records(pytester)
    keys = {r["key"] for r in records}
    assert len(records) == len(keys) == 8, sorted(keys)
    assert "eval_sets/s.jsonl::c0[a=p-b%3Dq-b=r]" in keys and "eval_sets/s.jsonl::c0[a=p-b=q-b%3Dr]" in keys
    by_config = json.loads((_run_dir(pytester) / "metrics.json").read_text())["by_config"]
    assert len(by_config) == 4 and all(entry["total_tests"] == 2 for entry in by_config.values())
    assert by_config["a=p-b%3Dq-b=r"]["params"] == {"a": "p-b=q", "b": "r"}  # the params themselves are as given


def test_node_id_lines_hold_no_separator_or_bidi_control_and_select_one_item(pytester: pytest.Pytester) -> None:
    _eval_set(pytester, {"id": "c0"})
    pytester.makepyprojecttoml('[tool.rageval.matrix]\nv = ["a::b", "x\\u202ey", "plain"]\n')
    with AskServer(_system) as server:
        result = pytester.runpytest(*_args(server.url, "-v"))
        sent = sorted(r["body"]["v"] for r in server.requests)
        assert result.ret == 0, result.stdout.str()
        node_lines = [line for line in result.stdout.lines if "s.jsonl::" in line]
        assert len(node_lines) >= 3, result.stdout.str()
        for line in node_lines:
            assert line.count("::") == 1 and "\u202e" not in line, line
        assert "\u202e" not in result.stdout.str()
        assert {"eval_sets/s.jsonl::c0[v=a%3A%3Ab]", "eval_sets/s.jsonl::c0[v=x%E2%80%AEy]"} <= {
            line.split()[0] for line in node_lines
        }, result.stdout.str()
        chosen = pytester.runpytest(*_args(server.url, "-v", "eval_sets/s.jsonl::c0[v=a%3A%3Ab]"))
    assert sent == ["a::b", "plain", "x\u202ey"]  # the values themselves reach the system unchanged
    passed = [line.partition(" PASSED")[0] for line in chosen.stdout.lines if " PASSED" in line]
    assert chosen.ret == 0 and passed == ["eval_sets/s.jsonl::c0[v=a%3A%3Ab]"], chosen.stdout.str()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (("--rageval-matrix", "question=a,b"), "ERROR: pytest-rageval: --rageval-matrix: axis 'question' is reserved"),
        (("--rageval-matrix", "a:b=1"), "ERROR: pytest-rageval: --rageval-matrix: axis 'a:b': a name is"),
        (("--rageval-matrix", "a-b=1"), "ERROR: pytest-rageval: --rageval-matrix: axis 'a-b': a name is"),
    ],
)
def test_a_reserved_or_blurring_axis_name_is_a_usage_error(
    pytester: pytest.Pytester, setting: tuple[str, str], message: str
) -> None:
    _eval_set(pytester, {"id": "c0"})
    with AskServer(_system) as server:
        result = pytester.runpytest(*_args(server.url, *setting))
        asked = len(server.requests)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and asked == 0
    assert "Traceback" not in result.stderr.str() and "INTERNALERROR" not in result.stdout.str()
    assert [line for line in result.stderr.lines if line.startswith("ERROR:")] == [
        next(line for line in result.stderr.lines if line.startswith(message))
    ], result.stderr.str()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("question", "something else", "eval_sets/s.jsonl:2: field 'params.question': reserved"),
        ("k", 2, "eval_sets/s.jsonl:2: field 'params.k': reserved"),
    ],
)
def test_a_line_whose_params_would_replace_the_question_or_k_is_invalid(
    pytester: pytest.Pytester, field: str, value: Any, message: str
) -> None:
    """What the RAG was asked agrees with the record: the question and the k of every request are the
    question and the k results.jsonl holds for its item; the line that would make them differ is invalid."""
    _eval_set(pytester, {"id": "c0"}, {"id": "c1", "params": {field: value, "tenant": "t"}}, {"id": "c2"})
    with AskServer(_system) as server:
        result = pytester.runpytest(*_args(server.url, "--rageval-store-full-text", "-v"))
        sent = {r["body"]["question"]: r["body"] for r in server.requests}
    records = {r["test_case_id"]: r for r in _records(pytester) if "test_case_id" in r}
    for record in records.values():
        body = sent.get(record["question"])
        assert body is not None, (record["question"], sorted(sent))
        assert body["k"] == record["config"]["k"] == record["trace"]["k"] == 5, (body, record["config"])
    assert len(sent) == len(server.requests) == 2 and sorted(records) == ["c0", "c2"], sorted(sent)
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"*{message}*"])
    assert "Traceback" not in result.stdout.str()


def test_each_k_of_a_k_axis_is_the_k_sent_and_recorded(pytester: pytest.Pytester) -> None:
    _eval_set(pytester, {"id": "c0", "params": {"tenant": "t"}})
    with AskServer(_system) as server:
        result = pytester.runpytest(
            *_args(server.url, "--rageval-store-full-text", "--rageval-matrix", "k=2,4", "-o", "rageval_slice_k=false")
        )
        sent = sorted(r["body"]["k"] for r in server.requests)
    assert result.ret == 0, result.stdout.str()
    recorded = sorted((r["config"]["k"], r["trace"]["k"], r["matrix"]["k"]) for r in _records(pytester))
    assert sent == [2, 4] and recorded == [(2, 2, 2), (4, 4, 4)]
