"""The acceptance scenario: a hand-checked eval set against a loopback ask API.

Every expected number below is computed by hand from the chunks the server
returns (SPEC section 4), and checked serially and under ``-n 2``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk

L2 = 1 / math.log2(3)  # discount of rank 2
L3 = 1 / math.log2(4)  # discount of rank 3

CASES = [
    {
        "id": "prefix",
        "question": "q-prefix",
        "gold_supports": [{"rel_path": "docs/deploy.md", "heading_path": "# Deploy"}],
    },
    {"id": "beyond_k", "question": "q-beyond", "gold_supports": [{"rel_path": "docs/a.md", "heading_path": "# A"}]},
    {
        "id": "groups",
        "question": "q-groups",
        "category": "multi_hop",
        "gold_supports": [
            {"rel_path": "x.md", "heading_path": "# X"},
            {"rel_path": "y.md", "heading_path": "# Y"},
            {"rel_path": "z.md", "heading_path": "# Z"},
        ],
        "required_support_groups": [[0, 1], [2]],
    },
    {
        "id": "groups_partial",
        "question": "q-groups-partial",
        "category": "multi_hop",
        "tags": ["hop"],
        "gold_supports": [
            {"rel_path": "x.md", "heading_path": "# X"},
            {"rel_path": "y.md", "heading_path": "# Y"},
            {"rel_path": "z.md", "heading_path": "# Z"},
        ],
        "required_support_groups": [[0, 1], [2]],
    },
    {
        "id": "empty_heading",
        "question": "q-empty",
        "gold_supports": [{"rel_path": "notes/n.md"}, {"rel_path": "notes/m.md", "heading_path": ""}],
    },
    {
        "id": "list_heading",
        "question": "q-list",
        "gold_supports": [{"rel_path": "docs/setup.md", "heading_path": ["Setup", "Embeddings"]}],
    },
    {
        "id": "whitespace",
        "question": "q-space",
        "gold_supports": [{"rel_path": "docs/setup.md", "heading_path": "#  Setup >   ##   Embeddings "}],
    },
    {"id": "ids", "query": "q-ids", "expectedProposalIds": ["abc-123"], "referenceAnswer": "The Foundation."},
    {"id": "unans_abstained", "question": "q-unans-ok", "answerable": False, "category": "general"},
    {"id": "unans_answered", "question": "q-unans-bad", "answerable": False, "category": "general"},
    {
        "id": "false_abst",
        "question": "q-false-abst",
        "gold_supports": [{"rel_path": "docs/a.md", "heading_path": "# A"}],
        "thresholds": {"false_abstention": 0},
    },
    {"id": "scope", "question": "q-scope", "gold_supports": [{"rel_path": "docs/a.md", "heading_path": "# A"}]},
    {"id": "scope_ok", "question": "q-scope-ok", "gold_supports": [{"rel_path": "docs/a.md", "heading_path": "# A"}]},
    {"id": "boom", "question": "q-boom", "gold_supports": [{"rel_path": "docs/a.md"}]},
    {"id": "later", "question": "q-skip", "skip": "not labelled yet", "gold_supports": [{"rel_path": "docs/a.md"}]},
    {
        "id": "conflict",
        "question": "q-conflict",
        "category": "recency/conflict",
        "recency_conflict_rule": "cite_newer",
        "gold_supports": [
            {"rel_path": "new.md", "heading_path": "# New"},
            {"rel_path": "old.md", "heading_path": "# Old"},
        ],
    },
]

OTHER = [chunk("other.md", "# Other", None)]


def respond(body: dict[str, Any]) -> Any:
    q = body["question"]
    if q == "q-prefix":
        chunks = [
            chunk("docs/deploy.md", "# Deploy2", 1),
            chunk("docs/deploy.md", "# Deploy > ## Steps", 2),
            chunk("other.md", "# O", 3),
        ]
        return answer("Deploy with make.", chunks, references=[chunks[1]])
    if q == "q-beyond":  # ranks out of order in the response; the match is rank 6
        chunks = [chunk("docs/a.md", "# A", 6)] + [chunk(f"o{i}.md", "# O", i) for i in (3, 1, 5, 2, 4)]
        return answer("Something.", chunks, references=[])
    if q == "q-groups":
        chunks = [chunk("x.md", "# X", 1), chunk("q.md", "# Q", 2), chunk("z.md", "# Z > ## Sub", 3)]
        return answer("X and Z.", chunks, references=[chunks[0]])
    if q == "q-groups-partial":
        chunks = [chunk("q.md", "# Q", 1), chunk("x.md", "# X", 2)]
        return answer("Only X.", chunks, references=[chunks[1]])
    if q == "q-empty":
        chunks = [chunk("notes/n.md", "# Anything > ## Deeper", 1), chunk("notes/m.md", None, 2)]
        return answer("Notes.", chunks)
    if q == "q-list":
        chunks = [
            chunk("docs/setup.md", "# Setup", 1),
            chunk("docs/setup.md", "# Setup > ## Embedding", 2),
            chunk("docs/setup.md", "# Setup > ## Embeddings > ### Model", 3),
        ]
        return answer("Set the model.", chunks, references=[chunks[2]])
    if q == "q-space":
        chunks = [chunk("docs/setup.md", ["Setup", "Embeddings"], 1)]
        return answer("Set the model.", chunks)
    if q == "q-ids":
        chunks = [chunk("p/def.md", "# D", 1, doc_id="def-456"), chunk("p/abc.md", "# S", 2, doc_id="abc-123")]
        return answer("The Foundation.", chunks, references=[{"doc_id": "abc-123"}])
    if q == "q-unans-ok":
        return answer("I could not find this.", OTHER, references=[], abstained=True)
    if q == "q-unans-bad":
        return answer("The capital of Mars is Olympus.", OTHER, references=[], abstained=False)
    if q == "q-false-abst":
        chunks = [chunk("docs/a.md", "# A", 1)]
        return answer("I could not find this.", chunks, references=[], abstained=True)
    if q == "q-scope":
        chunks = [chunk("docs/a.md", "# A", 1)]
        return answer("A.", chunks, folders=["notes"])
    if q == "q-scope-ok":
        chunks = [chunk("docs/a.md", "# A", 1)]
        return answer("A.", chunks, folders=["docs/"])
    if q == "q-boom":
        return (500, {"error": "boom"})
    if q == "q-conflict":
        chunks = [chunk("new.md", "# New", 1), chunk("old.md", "# Old", 2)]
        return answer("Old says so.", chunks, references=[chunks[1]])
    return (404, {"error": f"unexpected question {q}"})


N = None
# Hand-computed per-case metrics: recall, recall_all, mrr, precision, ndcg, scope_miss, attribution, conflict, abstained, false_abst
EXPECTED: dict[str, tuple[Any, ...]] = {
    "prefix": (1, 1, 0.5, 0.2, L2, N, 1, N, False, 0),
    "beyond_k": (0, 0, 0.0, 0.0, 0.0, N, 0, N, False, 0),
    "groups": (1, 1, 1.0, 0.4, (1 + L3) / (1 + L2 + L3), N, 1, N, False, 0),
    "groups_partial": (1, 0, 0.5, 0.2, L2 / (1 + L2 + L3), N, 1, N, False, 0),
    "empty_heading": (1, 1, 1.0, 0.4, 1.0, N, 1, N, False, 0),
    "list_heading": (1, 1, 1 / 3, 0.2, L3, N, 1, N, False, 0),
    "whitespace": (1, 1, 1.0, 0.2, 1.0, N, 1, N, False, 0),
    "ids": (1, N, 0.5, 0.2, L2, N, 1, N, False, 0),
    "unans_abstained": (N, N, N, N, N, N, N, N, True, N),
    "unans_answered": (N, N, N, N, N, N, N, N, False, N),
    "false_abst": (1, 1, 1.0, 0.2, 1.0, N, 0, N, True, 1),
    "scope": (1, 1, 1.0, 0.2, 1.0, 1, 1, N, False, 0),
    "scope_ok": (1, 1, 1.0, 0.2, 1.0, 0, 1, N, False, 0),
    "conflict": (1, 1, 1.0, 0.4, 1.0, N, 1, 0, False, 0),
}
NAMES = (
    "recall_at_k",
    "recall_all_at_k",
    "mrr",
    "precision_at_k",
    "ndcg_at_k",
    "scope_miss",
    "attribution_hit",
    "conflict_rule",
    "abstained",
    "false_abstention",
)
OUTCOMES = {
    "prefix": "passed",
    "beyond_k": "failed",
    "groups": "passed",
    "groups_partial": "failed",
    "empty_heading": "passed",
    "list_heading": "passed",
    "whitespace": "passed",
    "ids": "passed",
    "unans_abstained": "passed",
    "unans_answered": "failed",
    "false_abst": "failed",
    "scope": "failed",
    "scope_ok": "passed",
    "boom": "error",
    "later": "skipped",
    "conflict": "failed",
}


def _mean(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    lines = "\n".join(json.dumps(c) for c in CASES) + "\n"
    pytester.makefile(".jsonl", **{"eval_sets/hand": lines})
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        rageval_eval_sets = ["eval_sets/*.jsonl"]

        [tool.rageval.thresholds]
        scope_miss = 0

        [tool.rageval.thresholds.multi_hop]
        recall_all_at_k = 1
        """
    )
    return pytester


def test_hand_checked_metrics_outcomes_and_aggregates(project: pytest.Pytester) -> None:
    with AskServer(respond) as server:
        result = project.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-p", "no:cacheprovider"
        )
    result.assert_outcomes(passed=8, failed=6, errors=1, skipped=1)
    assert "q-skip" not in server.questions()  # nothing is sent for a skipped case
    assert server.questions().count("q-boom") == 3  # the 500 is retried twice
    assert all(r["path"].endswith("?debug=true") and r["body"]["k"] == 5 for r in server.requests)

    run = project.path / "results" / (project.path / "results" / "latest").read_text().strip()
    metrics = json.loads((run / "metrics.json").read_text())
    cases = {key.split("::")[1]: value for key, value in metrics["cases"].items()}
    assert {cid: c["outcome"] for cid, c in cases.items()} == OUTCOMES
    for cid, expected in EXPECTED.items():
        got = cases[cid]["metrics"]
        for name, value in zip(NAMES, expected):
            if value is None:
                assert got[name] is None, (cid, name)
            else:
                assert got[name] == pytest.approx(value), (cid, name, got[name])

    agg = metrics["aggregate_metrics"]
    column = {name: [EXPECTED[c][i] for c in EXPECTED] for i, name in enumerate(NAMES)}
    assert agg["recall_at_k_avg"] == pytest.approx(_mean(column["recall_at_k"]))
    assert agg["recall_at_k_avg"] == pytest.approx(11 / 12)
    assert agg["mrr_avg"] == pytest.approx(_mean(column["mrr"]))
    assert agg["ndcg_at_k_avg"] == pytest.approx(_mean(column["ndcg_at_k"]))
    assert agg["precision_at_k_avg"] == pytest.approx(_mean(column["precision_at_k"]))
    assert agg["recall_all_at_k_avg"] == pytest.approx(9 / 11)
    assert agg["scope_miss_rate"] == pytest.approx(0.5)
    assert agg["attribution_hit_rate"] == pytest.approx(10 / 12)
    assert agg["conflict_rule_rate"] == 0
    assert agg["abstention_accuracy"] == pytest.approx(0.5)
    assert agg["hallucination_rate_unanswerable"] == pytest.approx(0.5)
    assert agg["false_abstention_rate"] == pytest.approx(1 / 12)
    assert agg["groundedness_avg"] is None and agg["correctness_avg"] is None
    assert agg["operational_metrics"]["error_rate"] == pytest.approx(1 / 15)
    assert (metrics["total_tests"], metrics["passed"], metrics["failed"], metrics["errors"], metrics["skipped"]) == (
        15,
        8,
        6,
        1,
        1,
    )
    assert (metrics["answerable_tests"], metrics["unanswerable_tests"]) == (13, 2)
    assert metrics["by_category"]["multi_hop"]["recall_all_at_k_avg"] == pytest.approx(0.5)
    assert metrics["by_tag"]["hop"]["n"] == 1
    assert metrics["complete"] is True

    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert sorted(r["test_case_id"] for r in records) == sorted(OUTCOMES)
    boom = next(r for r in records if r["test_case_id"] == "boom")
    assert boom["error"]["kind"] == "http" and "500" in boom["error"]["message"]
    result.stdout.fnmatch_lines(["*ERROR*hand.jsonl::boom*"])


def test_serial_and_xdist_give_identical_metrics(project: pytest.Pytester) -> None:
    def run(server: AskServer, *extra: str) -> dict[str, Any]:
        project.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-p", "no:cacheprovider", *extra
        )
        latest = (project.path / "results" / "latest").read_text().strip()
        data: dict[str, Any] = json.loads((project.path / "results" / latest / "metrics.json").read_text())
        for volatile in ("run_id", "timestamp"):
            data.pop(volatile)
        data["aggregate_metrics"].pop("latency")
        for case in data["cases"].values():
            case["metrics"].pop("latency_ms", None)
        return data

    with AskServer(respond) as server:
        serial, distributed = run(server), run(server, "-n", "2")
    assert serial == distributed
    assert serial["eval_set_hash"] and serial["config_hash"]


def test_failure_message_names_every_miss_and_marks_gold(project: pytest.Pytester) -> None:
    with AskServer(respond) as server:
        result = project.runpytest(
            "--rageval", "--rageval-judge=none", f"--rageval-target={server.url}", "-k", "groups_partial or scope"
        )
    result.stdout.fnmatch_lines(
        [
            "*[[]groups_partial[]] q-groups-partial*",
            "*recall_all_at_k = 0 (needs >= 1)*",
            "*answer: Only X.*",
            "* 1   q.md  Q*",
            "* 2 [*] x.md  X*",
        ]
    )
    result.stdout.fnmatch_lines(["*scope_miss = 1 (needs <= 0)*"])
    assert "Traceback" not in result.stdout.str()
