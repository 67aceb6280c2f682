"""Tests of evalset.py: loading eval-set files into cases and bad lines, and the line JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from needs import need_module

from pytest_rageval.evaluation.evalset import (
    SCHEMA_PATH,
    BadLine,
    EvalFile,
    LoadedCase,
    _schema_text,
    line_json_schema,
    load_eval_file,
)

DISPLAY = "eval_sets/demo.jsonl"


def write(tmp_path: Path, *lines: str, name: str = "demo.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def line(**fields: object) -> str:
    return json.dumps(fields)


def load(tmp_path: Path, *lines: str) -> EvalFile:
    return load_eval_file(write(tmp_path, *lines), DISPLAY)


def only_bad(result: EvalFile) -> BadLine:
    assert result.cases == []
    assert len(result.bad) == 1, result.bad
    return result.bad[0]


def test_four_bad_lines_among_good_ones(tmp_path: Path) -> None:
    result = load(
        tmp_path,
        line(id="fact-001", question="What is the embedding model?"),
        '{"id": "broken" "question": "x"}',
        line(id="no-question"),
        line(id="typo", question="q", gold_suports=[{"rel_path": "a.md"}]),
        line(id="fact-001", question="Asked again"),
        line(id="fact-002", question="Where is the index stored?"),
    )

    assert [(c.line, c.case.id) for c in result.cases] == [(1, "fact-001"), (6, "fact-002")]
    assert all(isinstance(c, LoadedCase) for c in result.cases)
    assert [b.line for b in result.bad] == [2, 3, 4, 5]
    invalid, missing, unknown, duplicate = (b.message for b in result.bad)
    assert invalid == f"{DISPLAY}:2: invalid JSON: Expecting ',' delimiter (column 17)"
    assert missing == f"{DISPLAY}:3: field 'question': required field is missing"
    assert unknown == f"{DISPLAY}:4: unknown key 'gold_suports' (did you mean 'gold_supports'?)"
    assert duplicate == f"{DISPLAY}:5: field 'id': duplicate id 'fact-001' (first used on line 1)"
    assert [b.case_id for b in result.bad] == [None, "no-question", "typo", None]
    assert result.display == DISPLAY


def test_messages_are_single_lines_with_the_location_prefix(tmp_path: Path) -> None:
    result = load(
        tmp_path,
        line(id="a", question=5, flaky="often", repeat=0, tags="x", gold_supports=[{"snippets": [1]}]),
    )
    bad = only_bad(result)
    assert bad.message.startswith(f"{DISPLAY}:1: ")
    assert "\n" not in bad.message
    assert "Traceback" not in bad.message and "errors.pydantic.dev" not in bad.message
    for field in (
        "'question'",
        "'flaky'",
        "'repeat'",
        "'tags'",
        "'gold_supports[0].rel_path'",
        "'gold_supports[0].snippets[0]'",
    ):
        assert f"field {field}: " in bad.message
    assert bad.message.count("; ") == 5  # six problems


def test_comments_and_blank_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    result = load(
        tmp_path,
        "// demo eval set",
        "",
        line(id="a", question="q1"),
        "   ",
        "   // indented comment",
        "\t",
        line(id="b", question="q2"),
        "{not json",
    )
    assert [(c.line, c.case.id) for c in result.cases] == [(3, "a"), (7, "b")]
    assert [b.line for b in result.bad] == [8]
    assert result.bad[0].message.startswith(f"{DISPLAY}:8: invalid JSON: ")


def test_default_display_is_the_path(tmp_path: Path) -> None:
    path = write(tmp_path, "[]")
    assert only_bad(load_eval_file(path)).message == f"{path}:1: expected a JSON object, got a list"


def test_crlf_and_utf8_bom_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    body = "\r\n".join([line(id="a", question="Grüße?"), "// c", line(id="b", question="q")]) + "\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    result = load_eval_file(path, DISPLAY)
    assert result.bad == []
    assert [(c.line, c.case.id, c.case.question) for c in result.cases] == [
        (1, "a", "Grüße?"),
        (3, "b", "q"),
    ]


def test_aliases_load_into_canonical_fields(tmp_path: Path) -> None:
    result = load(
        tmp_path,
        line(id="a", query="Q?", expectedProposalIds=["d1", "d2"], referenceAnswer="R."),
        line(id="b", question="Q2?", expected_doc_ids=["d3"]),
    )
    assert result.bad == []
    first, second = (c.case for c in result.cases)
    assert (first.question, first.gold_doc_ids, first.reference_answer) == ("Q?", ["d1", "d2"], "R.")
    assert second.gold_doc_ids == ["d3"]


def test_alias_errors_name_the_key_as_written(tmp_path: Path) -> None:
    bad = only_bad(load(tmp_path, line(id="a", query=5)))
    assert bad.message == f"{DISPLAY}:1: field 'query': Input should be a valid string"


def test_alias_and_canonical_name_together(tmp_path: Path) -> None:
    bad = only_bad(load(tmp_path, line(id="a", question="q", query="q again")))
    assert "'query' is another name for 'question'" in bad.message
    assert "unknown key" not in bad.message


def test_heading_path_as_string_or_list(tmp_path: Path) -> None:
    result = load(
        tmp_path,
        line(id="s", question="q", gold_supports=[{"rel_path": "a.md", "heading_path": "# Setup > ## Embeddings"}]),
        line(id="l", question="q", gold_supports=[{"rel_path": "a.md", "heading_path": ["Setup", "Embeddings"]}]),
        line(id="n", question="q", gold_supports=[{"rel_path": "a.md"}]),
    )
    assert result.bad == []
    assert [c.case.gold_supports[0].heading_path for c in result.cases] == [
        "# Setup > ## Embeddings",
        ["Setup", "Embeddings"],
        None,
    ]


def test_heading_path_of_wrong_type(tmp_path: Path) -> None:
    result = load(
        tmp_path,
        line(id="n", question="q", gold_supports=[{"rel_path": "a.md", "heading_path": 3}]),
        line(id="i", question="q", gold_supports=[{"rel_path": "a.md", "heading_path": ["Setup", 2]}]),
    )
    assert [b.message for b in result.bad] == [
        f"{DISPLAY}:1: field 'gold_supports[0].heading_path': Input should be a valid string or a valid list",
        f"{DISPLAY}:2: field 'gold_supports[0].heading_path[1]': Input should be a valid string",
    ]


def test_nested_unknown_key_suggests_from_gold_support_keys(tmp_path: Path) -> None:
    bad = only_bad(
        load(
            tmp_path,
            line(id="a", question="q", gold_supports=[{"rel_path": "a.md"}, {"rel_path": "b.md", "heading_pth": "X"}]),
        )
    )
    assert bad.message == (
        f"{DISPLAY}:1: unknown key 'heading_pth' in 'gold_supports[1]' (did you mean 'heading_path'?)"
    )
    assert bad.case_id == "a"


def test_unknown_keys_without_a_close_match_or_at_the_wrong_level(tmp_path: Path) -> None:
    bad = only_bad(load(tmp_path, line(id="a", question="q", zzzz=1, rel_path="a.md", Question="x")))
    assert bad.message == (
        f"{DISPLAY}:1: unknown key 'zzzz'; "
        "unknown key 'rel_path' (it belongs inside a 'gold_supports' entry); "
        "unknown key 'Question' (did you mean 'question'?)"
    )


def test_alias_typo_suggests_the_alias(tmp_path: Path) -> None:
    bad = only_bad(load(tmp_path, line(id="a", question="q", expectedProposalIDs=["x"])))
    assert "did you mean 'expectedProposalIds'?" in bad.message


def test_required_support_groups_index_out_of_range(tmp_path: Path) -> None:
    bad = only_bad(
        load(
            tmp_path,
            line(id="a", question="q", gold_supports=[{"rel_path": "a.md"}], required_support_groups=[[0], [1]]),
        )
    )
    assert bad.message.startswith(f"{DISPLAY}:1: field 'required_support_groups': index 1 ")
    assert "Value error" not in bad.message
    assert bad.case_id == "a"


def test_recency_rule_without_gold_supports(tmp_path: Path) -> None:
    bad = only_bad(load(tmp_path, line(id="a", question="q", recency_conflict_rule="cite_newer")))
    assert bad.message.startswith(f"{DISPLAY}:1: field 'recency_conflict_rule': needs gold_supports or gold_doc_ids")


def test_groups_and_rules_over_gold_doc_ids(tmp_path: Path) -> None:
    """A case without gold_supports indexes its gold_doc_ids (id-only systems, seed 001)."""
    result = load(
        tmp_path,
        line(id="a", question="q", expectedProposalIds=["p1", "p2"], required_support_groups=[[0, 1]]),
        line(id="b", question="q", gold_doc_ids=["new", "old"], recency_conflict_rule="cite_newer"),
        line(id="c", question="q", gold_doc_ids=["p1", "p2"], required_support_groups=[[2]]),
        line(
            id="d",
            question="q",
            gold_supports=[{"rel_path": "a.md"}],
            gold_doc_ids=["p1"],
            required_support_groups=[[1]],
        ),
    )
    assert [c.case.id for c in result.cases] == ["a", "b"]
    assert [b.message for b in result.bad] == [
        f"{DISPLAY}:3: field 'required_support_groups': index 2 is not an index into gold_doc_ids (which has 2 entries)",
        f"{DISPLAY}:4: field 'required_support_groups': index 1 is not an index into gold_supports (which has 1 entries)",
    ]


def test_blank_question_and_bad_literal(tmp_path: Path) -> None:
    result = load(
        tmp_path,
        line(id="a", question="   "),
        line(id="b", question="q", gold_supports=[{"rel_path": "a.md"}], recency_conflict_rule="newest"),
    )
    assert [b.message for b in result.bad] == [
        f"{DISPLAY}:1: field 'question': must not be blank",
        f"{DISPLAY}:2: field 'recency_conflict_rule': Input should be 'cite_newer', 'acknowledge_both' or 'cite_both'",
    ]


def test_wrong_types_are_not_coerced_and_ids_fit_node_ids(tmp_path: Path) -> None:
    """ "no" is not false and "2" is not 2: a line means what it says or it is an invalid field."""
    result = load(
        tmp_path,
        line(id="a", question="q", answerable="no"),
        line(id="b", question="q", answerable=0),
        line(id="c", question="q", flaky="yes", repeat="2"),
        line(id="d", question="q", thresholds={"mrr": 1}, repeat=2),
        line(id="e::f", question="q"),
    )
    assert [b.message for b in result.bad] == [
        f"{DISPLAY}:1: field 'answerable': Input should be a valid boolean",
        f"{DISPLAY}:2: field 'answerable': Input should be a valid boolean",
        f"{DISPLAY}:3: field 'flaky': Input should be a valid boolean; field 'repeat': Input should be a valid integer",
        f"{DISPLAY}:5: field 'id': must not contain '::' (it would split the test's node id)",
    ]
    (loaded,) = result.cases
    assert loaded.case.thresholds == {"mrr": 1.0} and loaded.case.runs == 2


def test_threshold_values_and_nested_non_objects(tmp_path: Path) -> None:
    bad = only_bad(load(tmp_path, line(id="a", question="q", thresholds={"mrr": "high"}, gold_supports=["a.md"])))
    assert bad.message == (
        f"{DISPLAY}:1: field 'gold_supports[0]': Input should be a JSON object; "
        "field 'thresholds.mrr': Input should be a valid boolean or a valid number"
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [("[1, 2]", "a list"), ('"just text"', "a string"), ("42", "a number"), ("true", "a boolean"), ("null", "null")],
)
def test_non_object_lines(tmp_path: Path, text: str, kind: str) -> None:
    result = load(tmp_path, line(id="a", question="q"), text)
    assert [c.line for c in result.cases] == [1]
    assert result.bad == [BadLine(2, f"{DISPLAY}:2: expected a JSON object, got {kind}", None)]


def test_nan_is_not_json(tmp_path: Path) -> None:
    bad = only_bad(load(tmp_path, '{"id": "a", "question": "q", "thresholds": {"mrr": NaN}}'))
    assert bad.message == f"{DISPLAY}:1: field 'thresholds.mrr': NaN is not valid JSON"


def test_duplicate_ids_claim_the_first_line_even_when_it_is_bad(tmp_path: Path) -> None:
    result = load(
        tmp_path,
        line(id="x", question="q", colour="red"),
        line(id="x", question="q"),
        line(id="x", question="q", colour="red"),
    )
    assert result.cases == []
    assert [(b.line, b.case_id) for b in result.bad] == [(1, "x"), (2, None), (3, None)]
    assert result.bad[1].message == f"{DISPLAY}:2: field 'id': duplicate id 'x' (first used on line 1)"
    assert result.bad[2].message.startswith(f"{DISPLAY}:3: field 'id': duplicate id 'x' (first used on line 1); ")
    assert "unknown key 'colour'" in result.bad[2].message


def test_unusable_id_gives_no_case_id(tmp_path: Path) -> None:
    result = load(tmp_path, line(id=7, question="q"), line(id="", question="q"))
    assert [b.case_id for b in result.bad] == [None, None]
    assert result.bad[0].message == f"{DISPLAY}:1: field 'id': Input should be a valid string"
    assert result.bad[1].message.startswith(f"{DISPLAY}:2: field 'id': ")


def test_undecodable_bytes(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    latin1 = '{"id": "b", "question": "Gr\xfc\xdfe"}'.encode("latin-1")
    path.write_bytes(b"\n".join([line(id="a", question="q").encode(), latin1, line(id="c", question="q").encode()]))
    result = load_eval_file(path, DISPLAY)
    assert [c.line for c in result.cases] == [1, 3]
    assert len(result.bad) == 1
    bad = result.bad[0]
    assert bad.line == 2 and bad.case_id is None
    assert bad.message.startswith(f"{DISPLAY}:2: not valid UTF-8: byte 0xfc ")


def test_missing_file(tmp_path: Path) -> None:
    result = load_eval_file(tmp_path / "nope.jsonl", "eval_sets/nope.jsonl")
    assert result.cases == []
    assert result.bad == [BadLine(0, "eval_sets/nope.jsonl:0: cannot read eval set: No such file or directory", None)]


def test_directory_instead_of_file(tmp_path: Path) -> None:
    bad = only_bad(load_eval_file(tmp_path, "eval_sets"))
    assert bad.line == 0
    assert bad.message.startswith("eval_sets:0: cannot read eval set: ")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    assert load_eval_file(path) == EvalFile(str(path), [], [])


def test_fifty_thousand_lines_load(tmp_path: Path) -> None:
    lines = [
        line(
            id=f"case-{i:05d}",
            question=f"Question number {i}?",
            tags=["bulk"],
            gold_supports=[{"rel_path": f"docs/{i % 97}.md", "heading_path": ["Setup", "Embeddings"]}],
            required_support_groups=[[0]],
        )
        for i in range(50_000)
    ]
    result = load(tmp_path, *lines)
    assert result.bad == []
    assert len(result.cases) == 50_000
    assert result.cases[-1].line == 50_000 and result.cases[-1].case.id == "case-49999"


# --- JSON Schema ----------------------------------------------------------------------------------


def test_committed_schema_file_is_current() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == _schema_text(), (
        "eval_case.schema.json is stale; regenerate it with: python -m pytest_rageval.evaluation.evalset"
    )
    assert json.loads(SCHEMA_PATH.read_text(encoding="utf-8")) == line_json_schema()


def test_schema_header() -> None:
    schema = line_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] and schema["description"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"id"}
    assert schema["oneOf"] == [{"required": ["question"]}, {"required": ["turns"]}]  # a question, or a conversation
    assert "query" not in schema["properties"]


def test_schema_validates_lines() -> None:
    jsonschema = need_module("jsonschema")
    validator = jsonschema.Draft202012Validator(line_json_schema())
    validator.check_schema(line_json_schema())
    good = {
        "id": "fact-001",
        "question": "Which embedding model?",
        "gold_supports": [{"rel_path": "setup.md", "heading_path": "# Setup > ## Embeddings"}],
        "thresholds": {"recall_at_k": 0.8},
    }
    assert list(validator.iter_errors(good)) == []
    assert list(validator.iter_errors({**good, "gold_suports": []})) != []
    nested = {**good, "gold_supports": [{"rel_path": "setup.md", "heading_pth": "Setup"}]}
    assert list(validator.iter_errors(nested)) != []
