"""Id-only systems are first class (issue 7): seed 001's `{answer, citations: [{proposal_id, ...}]}` over HTTP."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from ask_server import AskServer, seed_001_ini

#: Per question: the proposal ids the system cites, best first.
CITED = {
    "Which grants did STIP and its bridge pay?": ["stip", "stip-bridge"],
    "Which grants did STIP and STEP pay?": ["stip", "other"],
    "What is the current reporting rule?": ["reporting-2024", "reporting-2023"],
    "What was the reporting rule?": ["reporting-2023"],
    "Who proposed STIP?": ["stip"],
}

CASES: list[dict[str, Any]] = [
    {
        "id": "multi-ok",
        "query": "Which grants did STIP and its bridge pay?",
        "category": "multi_hop",
        "expectedProposalIds": ["stip", "stip-bridge", "step"],
        "required_support_groups": [[0, 1], [2]],
        "thresholds": {"recall_all_at_k": 1},
    },
    {
        "id": "multi-half",
        "query": "Which grants did STIP and STEP pay?",
        "category": "multi_hop",
        "expectedProposalIds": ["stip", "stip-bridge", "step"],
        "required_support_groups": [[0, 1], [0, 2]],
        "thresholds": {"recall_all_at_k": 1},
    },
    {
        "id": "conflict-ok",
        "query": "What is the current reporting rule?",
        "category": "recency/conflict",
        "gold_doc_ids": ["reporting-2024", "reporting-2023"],
        "recency_conflict_rule": "cite_newer",
    },
    {
        "id": "conflict-old",
        "query": "What was the reporting rule?",
        "category": "recency/conflict",
        "gold_doc_ids": ["reporting-2024", "reporting-2023"],
        "recency_conflict_rule": "cite_both",
    },
]


def seed001(body: dict[str, Any]) -> Any:
    cited = CITED[body["query"]][: body["topK"]]
    return {
        "answer": "From the proposals.",
        "citations": [
            {"proposal_id": pid, "stage": "tally", "url": f"https://example.org/{pid}", "snippet": f"About {pid}."}
            for pid in cited
        ],
    }


def write(pytester: pytest.Pytester, cases: list[dict[str, Any]]) -> None:
    pytester.makefile(".jsonl", **{"eval_sets/ids": "\n".join(json.dumps(c) for c in cases) + "\n"})


def metrics_of(pytester: pytest.Pytester) -> dict[str, Any]:
    run = (pytester.path / "results" / "latest").read_text().strip()
    return cast("dict[str, Any]", json.loads((pytester.path / "results" / run / "metrics.json").read_text())["cases"])


def test_multi_hop_and_conflict_cases_over_proposal_ids(pytester: pytest.Pytester) -> None:
    pytester.makeini(seed_001_ini())
    write(pytester, CASES)
    with AskServer(seed001) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines_random(["*recall_all_at_k = 0 (needs >= 1)*", "*conflict_rule = 0 (needs >= 1)*"])
    cases = {key.split("::")[1]: case["metrics"] for key, case in metrics_of(pytester).items()}
    assert (cases["multi-ok"]["recall_all_at_k"], cases["multi-half"]["recall_all_at_k"]) == (1, 0)
    assert (cases["conflict-ok"]["conflict_rule"], cases["conflict-old"]["conflict_rule"]) == (1, 0)
    assert "RagevalWarning" not in result.stdout.str()


def test_gold_supports_against_an_api_without_rel_path_is_one_warning(pytester: pytest.Pytester) -> None:
    pytester.makeini(seed_001_ini())
    write(
        pytester,
        [
            {"id": f"by-path-{i}", "query": "Who proposed STIP?", "gold_supports": [{"rel_path": "proposals/stip.md"}]}
            for i in range(4)
        ],
    )
    with AskServer(seed001) as server:
        result = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}")
    result.assert_outcomes(failed=4)
    out = result.stdout.str()
    assert out.count("pytest-rageval:0: RagevalWarning: gold_supports can never match") == 1, out
    result.stdout.fnmatch_lines(
        [
            "*Map the field that holds the source path in rageval_response_map, "
            "e.g. 'retrieved_chunks.rel_path = <your field>' and 'references.rel_path = <your field>'*"
        ]
    )

    # Mapped (the citation's url stands in for a path here), the same cases match and nothing is said.
    pytester.makeini(seed_001_ini("retrieved_chunks.rel_path = url", "references.rel_path = url"))
    write(
        pytester,
        [{"id": "by-url", "query": "Who proposed STIP?", "gold_supports": [{"rel_path": "https://example.org/stip"}]}],
    )
    with AskServer(seed001) as server:
        mapped = pytester.runpytest("--rageval", "--rageval-judge=none", f"--rageval-target={server.url}")
    mapped.assert_outcomes(passed=1)
    assert "gold_supports can never match" not in mapped.stdout.str()
