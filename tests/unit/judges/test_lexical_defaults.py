"""A stranger's RAG under the default offline judge, nothing configured (issue 7, SPEC section 5).

Another domain than the demo, another answer style: paraphrases and ``[DOC-12]``-style
citations. Correct answers pass, answers that contradict the retrieved text fail, and an
answerable question the system declines fails on ``false_abstention``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ask_server import AskServer

DOCS: dict[str, tuple[str, str, str]] = {  # doc id -> rel_path, heading, text
    "DOC-12": (
        "guides/grants.md",
        "# Community Grants > ## Amounts",
        "Community grants pay up to 5,000 EUR per project. Applications close on 2025-03-31.",
    ),
    "DOC-13": (
        "guides/grants.md",
        "# Community Grants > ## Eligibility",
        "Only registered non-profit associations based in Porto may apply. Individuals are not eligible.",
    ),
    "DOC-20": (
        "guides/setup.md",
        "# Setup > ## Accounts",
        "New volunteers get a portal account within two working days. Accounts are created by the IT desk.",
    ),
    "DOC-31": (
        "events/festival.md",
        "# Summer Festival",
        "The Summer Festival takes place in Lisbon in July. Entry is free for members.",
    ),
}
REFUSAL = "I could not find this in the documents."

#: id -> (question, gold doc, reference, key facts, answer, abstained field or None for none sent)
CASES: dict[str, tuple[str, str, str, list[str], str, Any]] = {
    "amount-id": (
        "How much can a community grant pay?",
        "DOC-12",
        "Up to 5,000 EUR per project.",
        ["5,000 EUR"],
        "A community grant covers at most 5000 EUR for each project [DOC-12].",
        False,
    ),
    "close-doc": (
        "When do grant applications close?",
        "DOC-12",
        "On 2025-03-31.",
        ["2025-03-31"],
        "Applications are open until March 31, 2025 (doc: DOC-12).",
        False,
    ),
    "eligibility-id": (
        "Who may apply for a community grant?",
        "DOC-13",
        "Registered non-profit associations based in Porto; individuals are not eligible.",
        ["non-profit associations", "Porto"],
        "Registered non-profit associations from Porto can apply, but individuals cannot [DOC-13].",
        False,
    ),
    "account-path": (
        "How fast do new volunteers get a portal account?",
        "DOC-20",
        "Within two working days.",
        ["two working days"],
        "Within 2 working days; the IT desk sets it up [guides/setup.md].",
        False,
    ),
    "festival-n": (
        "Where does the Summer Festival take place?",
        "DOC-31",
        "In Lisbon, in July.",
        ["Lisbon", "July"],
        "The Summer Festival is held in Lisbon in July [1].",
        False,
    ),
    "amount-wrong-number": (
        "How much can a community grant pay?",
        "DOC-12",
        "Up to 5,000 EUR per project.",
        ["5,000 EUR"],
        "A community grant pays up to 50,000 EUR per project [DOC-12].",
        False,
    ),
    "festival-wrong-place": (
        "Where does the Summer Festival take place?",
        "DOC-31",
        "In Lisbon, in July.",
        ["Lisbon", "July"],
        "The Summer Festival is held in Porto in July [DOC-31].",
        False,
    ),
    "eligibility-negation": (
        "Who may apply for a community grant?",
        "DOC-13",
        "Registered non-profit associations based in Porto; individuals are not eligible.",
        ["non-profit associations", "Porto"],
        "Individuals are eligible, as are non-profit associations from Porto [DOC-13].",
        False,
    ),
    "declined-flagged": (
        "When do grant applications close?",
        "DOC-12",
        "On 2025-03-31.",
        ["2025-03-31"],
        REFUSAL,
        True,
    ),
    "declined-unflagged": (
        "How much can a community grant pay?",
        "DOC-12",
        "Up to 5,000 EUR per project.",
        ["5,000 EUR"],
        "The documents do not say how much a grant pays.",
        None,
    ),
}
CORRECT = ("amount-id", "close-doc", "eligibility-id", "account-path", "festival-n")
WRONG = ("amount-wrong-number", "festival-wrong-place", "eligibility-negation")
DECLINED = ("declined-flagged", "declined-unflagged")


def _chunk(doc_id: str, rank: int) -> dict[str, Any]:
    rel_path, heading, text = DOCS[doc_id]
    return {
        "chunk_id": f"{doc_id}-c1",
        "doc_id": doc_id,
        "rel_path": rel_path,
        "heading_path": heading,
        "text": text,
        "rank": rank,
    }


def respond(body: dict[str, Any]) -> dict[str, Any]:
    """The stranger's RAG: the case id travels in the request params (``params.case``)."""
    if body.get("case") == "parking":
        return {"answer": REFUSAL, "references": [], "abstained": True, "debug": {"retrieved_chunks": []}}
    _, gold, _, _, text, abstained = CASES[body["case"]]
    others = [doc for doc in sorted(DOCS) if doc != gold][:2]
    chunks = [_chunk(gold, 1)] + [_chunk(doc, rank) for rank, doc in enumerate(others, start=2)]
    reply: dict[str, Any] = {
        "answer": text,
        "references": [] if abstained else chunks[:1],
        "debug": {"retrieved_chunks": chunks},
    }
    if abstained is not None:
        reply["abstained"] = abstained
    return reply


def _write_eval_set(pytester: pytest.Pytester) -> None:
    lines: list[dict[str, Any]] = [
        {
            "id": case_id,
            "question": question,
            "gold_doc_ids": [gold],
            "reference_answer": reference,
            "expected_key_facts": facts,
            "params": {"case": case_id},
        }
        for case_id, (question, gold, reference, facts, _, _) in CASES.items()
    ]
    lines.append(
        {
            "id": "parking",
            "question": "What is the parking fee at the library?",
            "answerable": False,
            "params": {"case": "parking"},
        }
    )
    pytester.makefile(".jsonl", **{"eval_sets/stranger": "\n".join(json.dumps(line) for line in lines) + "\n"})


def _outcomes(pytester: pytest.Pytester, *args: str) -> tuple[dict[str, str], dict[str, str]]:
    """Each case's outcome and failure text, from the reports of an in-process run."""
    reports = pytester.inline_run("--rageval", "-p", "no:cacheprovider", *args).getreports("pytest_runtest_logreport")
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for report in reports:
        case_id = report.nodeid.rpartition("::")[2]
        if report.when == "call" or report.outcome != "passed":
            outcomes[case_id] = report.outcome
            messages[case_id] = str(report.longrepr or "")
    return outcomes, messages


def test_default_offline_judge_passes_correct_answers_and_fails_wrong_ones(pytester: pytest.Pytester) -> None:
    _write_eval_set(pytester)
    with AskServer(respond) as server:
        outcomes, messages = _outcomes(pytester, f"--rageval-target={server.url}")
    assert {case: outcomes[case] for case in (*CORRECT, "parking")} == dict.fromkeys((*CORRECT, "parking"), "passed")
    assert {case: outcomes[case] for case in WRONG + DECLINED} == dict.fromkeys(WRONG + DECLINED, "failed")
    assert "groundedness = 0 (needs >= 3)" in messages["amount-wrong-number"]
    assert "contradicted: '5,000 EUR' (the answer has 50000 where the fact has 5000)" in messages["amount-wrong-number"]
    assert "never occur together in one retrieved chunk" in messages["festival-wrong-place"]  # Porto: another chunk
    assert "negation differs on eligibl" in messages["eligibility-negation"]
    for case in DECLINED:  # with the abstained field and without it (the judge classifies the refusal)
        assert "false_abstention = 1 (needs <= 0)" in messages[case]


def test_a_declined_answerable_case_fails_on_abstention_without_a_judge(pytester: pytest.Pytester) -> None:
    _write_eval_set(pytester)
    with AskServer(respond) as server:
        outcomes, messages = _outcomes(pytester, f"--rageval-target={server.url}", "--rageval-judge=none")
    assert outcomes["declined-flagged"] == "failed"
    assert "false_abstention = 1 (needs <= 0)" in messages["declined-flagged"]
    # without a judge only retrieval is checked: wrong facts pass, and abstention unknown to the response is unknown
    assert {case: outcomes[case] for case in (*WRONG, "declined-unflagged")} == dict.fromkeys(
        (*WRONG, "declined-unflagged"), "passed"
    )


def test_citation_patterns_ini(pytester: pytest.Pytester) -> None:
    def custom(body: dict[str, Any]) -> dict[str, Any]:
        reply = respond({"case": "festival-n"})
        reply["answer"] = "The Summer Festival is held in Lisbon in July <<ref:77>>."
        return reply

    pytester.makefile(
        ".jsonl",
        **{
            "eval_sets/one": json.dumps(
                {
                    "id": "festival",
                    "question": "Where does the Summer Festival take place?",
                    "gold_doc_ids": ["DOC-31"],
                    "expected_key_facts": ["Lisbon", "July"],
                }
            )
            + "\n"
        },
    )
    with AskServer(custom) as server:
        target = f"--rageval-target={server.url}"
        plain = pytester.runpytest("--rageval", "-p", "no:cacheprovider", target)
        plain.assert_outcomes(failed=1)  # "77" of the unknown marker is a number the text does not hold
        pytester.makeini("[pytest]\nrageval_citation_patterns =\n    <<ref:\\d+>>\n")
        pytester.runpytest("--rageval", "-p", "no:cacheprovider", target).assert_outcomes(passed=1)
        pytester.makeini("[pytest]\nrageval_citation_patterns =\n    <<ref:\\d+>>\n    [unclosed\n")
        bad = pytester.runpytest("--rageval", "-p", "no:cacheprovider", target)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*rageval_citation_patterns: line 2: invalid regular expression '[unclosed'*"])
