"""The metric registry: one list every other module derives from, and a metric added through it alone."""

from __future__ import annotations

import argparse
import ast
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk

from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.registry import Metric, register

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}


# --------------------------------------------------------------------------- the registry itself


def test_registry_imports_only_the_schema() -> None:
    """Layer 0: the registry imports nothing of the package but schema (judges import it, never the reverse)."""
    tree = ast.parse(Path(registry.__file__).read_text(encoding="utf-8"))
    inner = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level > 0]
    assert [(node.module, node.level) for node in inner] == [("schema", 1)]
    outer = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert not [name for name in outer if name.startswith("pytest_rageval")]


def in_order(names: tuple[str, ...], among: tuple[str, ...]) -> tuple[str, ...]:
    """The entries of ``among`` that are in ``names``, in their order (a metric added later may sit between)."""
    return tuple(name for name in among if name in names)


TODAYS_DETERMINISTIC = (
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


def test_names_kinds_and_order_are_todays() -> None:
    deterministic = registry.metric_names("deterministic")
    assert in_order(TODAYS_DETERMINISTIC, deterministic) == TODAYS_DETERMINISTIC
    assert registry.metric_names()[len(deterministic) :] == (
        "latency_ms",
        "ttft_ms",
        "groundedness",
        "correctness",
        "faithfulness",
        "relevancy",
        "completeness",
        "reasoning_quality",
    )
    assert registry.scales() == {
        "groundedness": (0.0, 5.0),
        "correctness": (0.0, 5.0),
        "faithfulness": (0.0, 1.0),
        "relevancy": (0.0, 1.0),
        "completeness": (0.0, 1.0),
        "reasoning_quality": (0.0, 1.0),
    }
    ops = {m.name: m.op for m in registry.metrics() if m.op != ">=" and m.name in (*TODAYS_DETERMINISTIC, "latency_ms")}
    assert ops == {"scope_miss": "<=", "abstained": "==", "false_abstention": "<=", "latency_ms": "<="}


def test_every_verdict_feeds_a_metric_and_coverage_counts_it_there() -> None:
    from pytest_rageval.judges.base import ALL_METRICS, CLASSIFIERS

    assert CLASSIFIERS == ("abstention", "conflict_ack")  # prompt-version order: part of the config hash
    for verdict in ALL_METRICS:
        assert registry.verdict_metrics(verdict), verdict
    assert registry.verdict_metrics("abstention") == ("abstained", "false_abstention")
    assert registry.coverage_metric("abstention") == "abstained"
    assert registry.coverage_metric("conflict_ack") == "conflict_rule"
    assert registry.coverage_metric("groundedness") == "groundedness"


def test_aggregate_keys_and_lists_derived_from_it() -> None:
    rates = registry.aggregates("rate")
    assert {key: rates[key] for key in ("scope_miss_rate", "attribution_hit_rate", "conflict_rule_rate")} == {
        "scope_miss_rate": "scope_miss",
        "attribution_hit_rate": "attribution_hit",
        "conflict_rule_rate": "conflict_rule",
    }
    summary = registry.summary_aggregates()
    todays = (
        "recall_at_k_avg",
        "recall_all_at_k_avg",
        "mrr_avg",
        "precision_at_k_avg",
        "ndcg_at_k_avg",
        "scope_miss_rate",
        "attribution_hit_rate",
        "conflict_rule_rate",
        "groundedness_avg",
        "correctness_avg",
        "abstention_accuracy",
        "hallucination_rate_unanswerable",
        "false_abstention_rate",
    )
    assert in_order(todays, summary) == todays
    judged = {f"{name}_avg" for name in registry.scales()}
    kinds = [
        "judge" if key in judged else "abstention" if key in registry.abstention_aggregates() else "deterministic"
        for key in summary
    ]
    assert kinds == sorted(kinds, key=["deterministic", "judge", "abstention"].index)  # rows grouped in that order
    assert registry.abstention_aggregates() == (
        "abstention_accuracy",
        "hallucination_rate_unanswerable",
        "false_abstention_rate",
    )
    assert registry.headline_aggregates() == (
        "recall_at_k_avg",
        "mrr_avg",
        "groundedness_avg",
        "correctness_avg",
        "abstention_accuracy",
    )


def test_register_refuses_a_taken_name_and_judge_metrics() -> None:
    before = list(registry.METRICS)
    assert register(registry.METRICS[0]) is registry.METRICS[0]  # the same entry again: a no-op
    with pytest.raises(ValueError, match="'mrr' already exists"):
        register(
            Metric(
                name="mrr",
                kind="deterministic",
                scale=(0.0, 1.0),
                direction="higher",
                applies_to="gold",
                aggregate_kind="avg",
                score=lambda c, r, x: 1,
            )
        )
    with pytest.raises(ValueError, match="only deterministic"):
        register(
            Metric(
                name="tone",
                kind="judge",
                scale=(0.0, 1.0),
                direction="higher",
                applies_to="answered",
                aggregate_kind="avg",
            )
        )
    with pytest.raises(ValueError, match="needs a score function"):
        Metric(name="nothing", kind="deterministic", scale=(0.0, 1.0), direction="higher", applies_to="all")
    assert registry.METRICS == before
    with pytest.raises(ValueError, match="only a judge metric has a judge spec"):
        Metric(
            name="spec",
            kind="deterministic",
            scale=(0.0, 1.0),
            direction="higher",
            applies_to="all",
            judge=registry.JudgeSpec("v1", "PassingAnswer", None),
            score=lambda c, r, x: 1,
        )


# --------------------------------------------------------------------------- judge verdicts: facts here, code in judges/


def test_every_verdict_has_its_facts_here_and_its_code_in_judges() -> None:
    """Each judge metric (and classifier) carries its prompt version, answer model, lexical scorer and default;
    judges/ finds the prompt text, answer model and scorer the spec names, and derives its tables from it."""
    from pytest_rageval.judges import answers, base, lexical, prompts

    specs = registry.judge_specs()
    assert tuple(specs) == (*registry.metric_names("judge"), "abstention", "conflict_ack") == base.ALL_METRICS
    assert all(isinstance(m.judge, registry.JudgeSpec) for m in registry.metrics("judge"))
    assert prompts.PROMPT_VERSIONS == {
        verdict: f"{verdict}/v2" for verdict in specs
    }  # a changed version empties every cache
    assert set(prompts._PROMPTS) == set(specs)
    assert {verdict: model.__name__ for verdict, model in answers.ANSWER_MODELS.items()} == {
        v: s.answer for v, s in specs.items()
    }
    assert lexical.LEXICAL_METRICS == tuple(v for v, s in specs.items() if s.lexical is not None)
    judge = lexical.LexicalJudge()
    assert [v for v in specs if judge.supports(v)] == list(lexical.LEXICAL_METRICS) and not judge.supports(
        "reasoning_quality"
    )
    assert registry.default_judge_metrics() == ("groundedness", "correctness")


def test_default_judge_metrics_are_the_registrys_everywhere() -> None:
    from pytest_rageval.cli import build_parser
    from pytest_rageval.config.settings import Settings

    assert Settings(rootdir=Path(".")).judge_metrics == registry.default_judge_metrics()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert isinstance(sub, argparse._SubParsersAction)
    judge_help = sub.choices["judge"].format_help()
    assert "else groundedness,correctness" in " ".join(judge_help.split())


@pytest.mark.parametrize(
    ("fields", "abstained", "asked"),
    [
        ({}, None, {"abstention", "groundedness", "correctness"}),
        ({}, False, {"groundedness", "correctness"}),
        ({}, True, {"correctness"}),
        ({"answerable": False}, True, set()),
        (
            {"gold_supports": [GOLD, GOLD], "recency_conflict_rule": "acknowledge_both"},
            False,
            {"groundedness", "correctness", "conflict_ack"},
        ),
        ({"gold_supports": [GOLD, GOLD], "recency_conflict_rule": "cite_both"}, False, {"groundedness", "correctness"}),
    ],
)
def test_which_verdicts_a_case_asks_for(fields: dict[str, Any], abstained: bool | None, asked: set[str]) -> None:
    from pytest_rageval.evaluation.schema import EvalCase

    case = EvalCase.model_validate({"id": "a", "question": "q", **fields})
    wanted = ("abstention", "groundedness", "correctness", "conflict_ack", "recall_at_k", "abstained", "nothing")
    assert {v for v in wanted if registry.asks(v, case, abstained)} == asked


# --------------------------------------------------------------------------- aggregates: one per-case definition


def test_run_aggregates_and_gate_pairs_share_one_per_case_definition() -> None:
    """Every metric aggregate is the mean of its registry per-case value over the scored cases (aggregate.py), and
    the gate pairs the same values (compare.py); false_abstention_rate alone counts an answerable case of unknown
    abstention as not abstained in the run, where the gate leaves it out."""
    from pytest_rageval.gate.aggregate import aggregate
    from pytest_rageval.gate.statistics import per_case_getters

    metric_values: list[dict[str, Any]] = [
        {"abstained": True, "false_abstention": 1, "mrr": 0.5, "groundedness": 4.0},
        {"abstained": False, "false_abstention": 0, "mrr": 1.0, "conflict_rule": 1},
        {"abstained": None, "false_abstention": None, "mrr": 0.0, "scope_miss": 0},
        {"false_abstention": 1},
    ]
    records: list[dict[str, Any]] = [
        {"key": f"s::{i}-{a}-{outcome}", "answerable": a, "outcome": outcome, "metrics": m}
        for i, m in enumerate(metric_values)
        for a in (True, False)
        for outcome in ("passed", "error")
    ]
    result = aggregate(records)
    getters = per_case_getters()
    means = registry.case_means()
    assert tuple(means) == registry.metric_aggregates() == tuple(k for k in result["aggregate_metrics"] if k in means)
    scored = [r for r in records if r["outcome"] == "passed"]
    for key, mean in means.items():
        counted = [v for r in scored if (v := mean.run_value(r["answerable"], r["metrics"])) is not None]
        assert result["aggregate_metrics"][key] == (sum(counted) / len(counted) if counted else None), key
        paired = [getters[key](result["cases"][r["key"]]) for r in records]
        assert paired == [
            mean.paired(r["answerable"], r["metrics"]) if r["outcome"] == "passed" else None for r in records
        ], key
    agg = result["aggregate_metrics"]
    assert (agg["abstention_accuracy"], agg["hallucination_rate_unanswerable"]) == (
        0.5,
        0.5,
    )  # unanswerable, known: True, False
    assert agg["false_abstention_rate"] == 0.5  # answerable: True, False, unknown (counts 0), false_abstention 1
    unknown = {"abstained": None, "false_abstention": None}
    assert (
        means["false_abstention_rate"].run_value(True, unknown) == 0.0
        and means["false_abstention_rate"].paired(True, unknown) is None
    )
    assert registry.aggregate_direction("hallucination_rate_unanswerable") == "lower"
    assert registry.aggregate_direction("abstention_accuracy") == "higher"


# --------------------------------------------------------------------------- a metric added through the registry alone

#: What docs/internals.md tells a user to write: one scoring function and one register() call.
CONFTEST = '''
from pytest_rageval.evaluation.registry import Metric, register


def top_is_gold(case, response, ctx):
    """1 when the first retrieved chunk matches a gold item."""
    return int(bool(ctx.top) and bool(ctx.top[0]))


register(
    Metric(
        name="top_is_gold", kind="deterministic", scale=(0.0, 1.0), direction="higher",
        applies_to="gold", aggregate_kind="avg", score=top_is_gold,
    )
)
'''


def gold_at(rank: int) -> dict[str, Any]:
    gold = chunk("docs/a.md", "# A", rank)
    other = chunk("docs/b.md", "# B", 1 if rank == 2 else 2)
    return answer("An answer.", sorted([gold, other], key=lambda c: c["rank"]), references=[gold])


def test_a_registered_metric_reaches_every_output(pytester: pytest.Pytester) -> None:
    """A conftest registers a metric; it is scored, thresholded, aggregated and reported like a built-in one."""
    pytester.makeconftest(CONFTEST)
    cases = [
        {"id": "first", "question": "q-first", "gold_supports": [GOLD]},
        {"id": "second", "question": "q-second", "gold_supports": [GOLD], "thresholds": {"top_is_gold": 1}},
    ]
    pytester.makefile(".jsonl", **{"eval_sets/r": "\n".join(json.dumps(c) for c in cases) + "\n"})
    junit = pytester.path / "junit.xml"
    with AskServer(lambda body: gold_at(1 if body["question"] == "q-first" else 2)) as server:
        result = pytester.runpytest_subprocess(
            "--rageval",
            "--rageval-judge=none",
            f"--rageval-target={server.url}",
            f"--junitxml={junit}",
            "-p",
            "no:cacheprovider",
        )
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "top_is_gold = 0 (needs >= 1)" in out  # the failure message names it with its op
    assert re.search(r"^\s+top_is_gold_avg\s+0\.500$", out, re.MULTILINE), out  # the terminal summary row

    run_dir = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["aggregate_metrics"]["top_is_gold_avg"] == 0.5
    assert metrics["by_category"]["factual"]["top_is_gold_avg"] == 0.5
    per_case = {c["test_case_id"]: c["metrics"]["top_is_gold"] for c in metrics["cases"].values()}
    assert per_case == {"first": 1, "second": 0}
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["retrieval_metrics"]["top_is_gold"] for r in records) == [0, 1]

    page = (run_dir / "report.html").read_text()
    assert re.search(r'<code>top_is_gold_avg</code></td><td class="num">0\.500</td>', page)
    assert re.search(r'<code>top_is_gold</code></td><td class="num">0</td><td class="num">&gt;=</td>', page)

    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(junit).getroot().iter("testcase")
    }
    assert {name: p["rageval.top_is_gold"] for name, p in props.items()} == {"first": "1", "second": "0"}


def test_judge_coverage_keeps_verdicts_asked_before_a_later_run_failed(pytester: pytest.Pytester) -> None:
    """A repeated case whose second RAG call fails: the verdicts its first run asked for count as attempted.

    Before, the runner wrote ``judge_attempted`` only at the end and aggregate's
    fallback looked for judge metric names among the values, so these attempts
    vanished from judge_coverage (and from the gate's min_judge_coverage).
    """
    pytester.makefile(
        ".jsonl",
        **{
            "eval_sets/c": json.dumps(
                {"id": "twice", "question": "q", "gold_supports": [GOLD], "reference_answer": "An answer.", "repeat": 2}
            )
            + "\n"
        },
    )
    calls: list[int] = []

    def rag(body: dict[str, Any]) -> Any:
        calls.append(1)
        return gold_at(1) if len(calls) == 1 else (400, {"detail": "bad request"})

    with AskServer(rag) as server:
        result = pytester.runpytest_subprocess(
            "--rageval", "--rageval-judge=lexical", f"--rageval-target={server.url}", "-p", "no:cacheprovider"
        )
    result.assert_outcomes(errors=1)
    (metrics_json,) = (pytester.path / "results").glob("*/metrics.json")  # every case errored: latest not moved
    coverage = json.loads(metrics_json.read_text())["judge_coverage"]
    assert coverage == {
        "correctness": {"scored": 0, "attempted": 1, "coverage": 0.0},
        "groundedness": {"scored": 0, "attempted": 1, "coverage": 0.0},
    }
