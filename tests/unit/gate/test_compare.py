"""gate/: baseline comparison (compare.py), tolerances, paired bootstrap (statistics.py), invariants, flipped cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_rageval import safejson
from pytest_rageval.gate.aggregate import aggregate
from pytest_rageval.gate.baseline_file import load_baseline
from pytest_rageval.gate.compare import Comparison, MetricDelta, compare, gate_runs
from pytest_rageval.gate.comparison_text import format_comparison, format_delta
from pytest_rageval.gate.gated_values import default_tolerances, lower_is_better
from pytest_rageval.gate.invariants import check_invariants
from pytest_rageval.gate.statistics import bootstrap_interval

JUDGE = {"name": "openai", "model": "gpt-4o-mini", "prompt_version": "g1", "temperature": 0}


def run(cases: dict[str, tuple[str, dict[str, Any]]], *, answerable: bool = True, **top: Any) -> dict[str, Any]:
    """A metrics.json built from {case id: (outcome, metrics)}."""
    records = [
        {
            "key": f"set.jsonl::{cid}",
            "test_case_id": cid,
            "category": "factual",
            "tags": [],
            "answerable": answerable,
            "outcome": outcome,
            "metrics": metrics,
        }
        for cid, (outcome, metrics) in cases.items()
    ]
    data = {"run_id": "r", "eval_set_hash": "a" * 64, "judge": dict(JUDGE), "complete": True}
    data.update(aggregate(records))
    data.update(top)
    return data


def uniform(n: int, outcome: str = "passed", **metrics: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    return {f"c{i:03d}": (outcome, dict(metrics)) for i in range(n)}


def delta(comparison: Comparison, name: str) -> MetricDelta:
    (found,) = [d for d in comparison.deltas if d.name == name]
    return found


def test_mrr_drop_regresses_and_is_named() -> None:
    base = run(uniform(4, recall_at_k=1, mrr=1.0))
    new = run(uniform(4, recall_at_k=1, mrr=0.5))
    comparison = compare(base, new)
    assert comparison.regressed
    assert comparison.regressed_metrics == ["mrr_avg"]
    mrr = delta(comparison, "mrr_avg")
    assert (mrr.old, mrr.new, mrr.delta, mrr.tolerance, mrr.regressed) == (1.0, 0.5, -0.5, 0.05, True)
    assert (mrr.ci_low, mrr.ci_high, mrr.n_shared) == (-0.5, -0.5, 4)
    assert comparison.flipped_to_fail == [] and comparison.invariant_differences == []
    lines = format_comparison(comparison)
    assert "mrr_avg: 1.000 → 0.500 (-0.500; 95% CI -0.500..-0.500; tolerance 0.050) REGRESSED" in lines
    assert "recall_at_k_avg: 1.000 → 1.000 (+0.000; 95% CI 0.000..0.000; tolerance 0.050)" in lines


def test_identical_runs_do_not_regress() -> None:
    cases = {
        "a": ("passed", {"recall_at_k": 1, "mrr": 1.0, "groundedness": 4}),
        "b": ("failed", {"recall_at_k": 0, "mrr": 0.0, "groundedness": 2}),
    }
    comparison = compare(run(cases), run(cases))
    assert not comparison.regressed
    assert all(d.delta == 0 for d in comparison.deltas if d.delta is not None)
    assert comparison.flipped_to_fail == comparison.flipped_to_pass == []
    assert not any("REGRESSED" in line for line in format_comparison(comparison))


def test_configured_tolerance_overrides_default_and_keeps_others() -> None:
    base = run(uniform(10, recall_at_k=1, mrr=1.0))
    new = run({**uniform(9, recall_at_k=1, mrr=0.5), "c009": ("passed", {"recall_at_k": 0, "mrr": 0.5})})
    comparison = compare(base, new, tolerances={"mrr_avg": 0.6, "min_judge_coverage": 0.5})
    mrr = delta(comparison, "mrr_avg")
    assert mrr.tolerance == 0.6 and not mrr.regressed
    recall = delta(comparison, "recall_at_k_avg")  # default 0.05 still applies: drop 0.1
    assert recall.tolerance == 0.05 and recall.regressed
    assert compare(base, new, tolerances={"mrr_avg": 0.6, "recall_at_k_avg": 0.2}).regressed is False
    # a drop of exactly the tolerance does not regress
    assert not compare(base, new, tolerances={"mrr_avg": 0.5, "recall_at_k_avg": 0.1}).regressed
    # short names resolve to the aggregate key
    assert delta(compare(base, new, tolerances={"mrr": 0.6}), "mrr_avg").tolerance == 0.6


def test_metric_without_tolerance_never_regresses() -> None:
    base = run(uniform(4, ndcg_at_k=1.0))
    new = run(uniform(4, ndcg_at_k=0.0))
    ndcg = delta(compare(base, new), "ndcg_at_k_avg")
    assert ndcg.delta == -1.0 and ndcg.tolerance is None and not ndcg.regressed
    assert compare(base, new, tolerances={"ndcg_at_k_avg": 0.1}).regressed


def test_scope_miss_rate_rise_regresses() -> None:
    assert "scope_miss_rate" in lower_is_better()
    low = run(uniform(4, recall_at_k=1, scope_miss=0))
    high = run(
        {
            **uniform(2, recall_at_k=1, scope_miss=0),
            "c002": ("passed", {"recall_at_k": 1, "scope_miss": 1}),
            "c003": ("passed", {"recall_at_k": 1, "scope_miss": 1}),
        }
    )
    rise = compare(low, high)
    scope = delta(rise, "scope_miss_rate")
    assert scope.delta == 0.5 and scope.regressed and rise.regressed
    assert (scope.ci_low, scope.ci_high) != (None, None) and scope.n_shared == 4
    assert not compare(high, low).regressed  # a fall is an improvement


def test_null_metric_in_one_run_never_regresses() -> None:
    base = run(uniform(3, groundedness=4))
    new = run(uniform(3, groundedness=None))
    comparison = compare(base, new)
    grounded = delta(comparison, "groundedness_avg")
    assert (grounded.old, grounded.new, grounded.delta, grounded.regressed) == (4.0, None, None, False)
    assert grounded.n_shared == 0 and grounded.ci_low is None
    assert "groundedness_avg: 4.000 → n/a (not comparable; tolerance 0.500)" in format_comparison(comparison)
    assert not comparison.regressed
    # a metric null in both runs is not listed
    assert all(d.name != "faithfulness_avg" for d in comparison.deltas)


def test_significance_noise_on_three_cases_does_not_regress() -> None:
    base = run(uniform(3, recall_at_k=1))
    new = run(
        {
            "c000": ("passed", {"recall_at_k": 1}),
            "c001": ("passed", {"recall_at_k": 1}),
            "c002": ("failed", {"recall_at_k": 0}),
        }
    )
    plain = delta(compare(base, new), "recall_at_k_avg")
    assert plain.regressed  # 1.0 -> 0.667 is beyond 0.05
    significant = compare(base, new, significance=True)
    recall = delta(significant, "recall_at_k_avg")
    assert recall.ci_low is not None and recall.ci_high is not None
    assert recall.ci_low < 0 <= recall.ci_high  # the interval includes zero
    assert not recall.regressed and not significant.regressed


def test_significance_consistent_drop_on_thirty_cases_regresses() -> None:
    base = run(uniform(30, mrr=1.0))
    new = run({f"c{i:03d}": ("passed", {"mrr": (0.5, 1 / 3, 1.0)[i % 3]}) for i in range(30)})
    comparison = compare(base, new, significance=True)
    mrr = delta(comparison, "mrr_avg")
    assert mrr.n_shared == 30
    assert mrr.ci_high is not None and mrr.ci_high < 0
    assert mrr.regressed and comparison.regressed


def test_significance_without_interval_falls_back_to_tolerance() -> None:
    base = run(uniform(1, mrr=1.0))
    new = run(uniform(1, mrr=0.0))
    mrr = delta(compare(base, new, significance=True), "mrr_avg")
    assert mrr.ci_low is None and mrr.n_shared == 1 and mrr.regressed
    # no shared cases at all (baseline without per-case data)
    base_no_cases = dict(base, cases={})
    assert delta(compare(base_no_cases, new, significance=True), "mrr_avg").regressed


def test_bootstrap_is_deterministic() -> None:
    diffs = [0.0, -1.0, 0.5, -0.25, 0.0, -0.5, 1.0, -1.0]
    first = bootstrap_interval(diffs, samples=500, seed=3)
    assert first == bootstrap_interval(diffs, samples=500, seed=3)
    assert first is not None and first[0] < first[1]
    assert bootstrap_interval([0.5], samples=500) is None
    assert bootstrap_interval([], samples=500) is None
    assert bootstrap_interval([0.2, 0.2, 0.2]) == (0.2, 0.2)
    base = run({f"c{i}": ("passed", {"mrr": 1.0, "groundedness": 4}) for i in range(12)})
    new = run({f"c{i}": ("passed", {"mrr": (1.0, 0.5, 0.25)[i % 3], "groundedness": i % 5}) for i in range(12)})
    one = compare(base, new, seed=11)
    two = compare(base, new, seed=11)
    assert [(d.ci_low, d.ci_high) for d in one.deltas] == [(d.ci_low, d.ci_high) for d in two.deltas]


def test_bootstrap_over_twenty_thousand_cases_brackets_the_mean_delta() -> None:
    diffs = [(-1.0, 0.0, 0.0, 1.0, 0.5)[i % 5] for i in range(20_000)]  # mean 0.1
    interval = bootstrap_interval(diffs, samples=1000, seed=0)
    assert interval is not None and interval[0] < 0.1 < interval[1]
    assert interval == bootstrap_interval(diffs, samples=1000, seed=0)


def test_paired_cases_skip_errors_and_unshared() -> None:
    base = run(
        {
            "a": ("passed", {"mrr": 1.0}),
            "b": ("passed", {"mrr": 1.0}),
            "c": ("passed", {"mrr": 1.0}),
            "gone": ("passed", {"mrr": 1.0}),
        }
    )
    new = run(
        {
            "a": ("passed", {"mrr": 0.5}),
            "b": ("passed", {"mrr": 0.5}),
            "c": ("error", {"mrr": 0.0}),
            "added": ("passed", {"mrr": 0.0}),
        }
    )
    mrr = delta(compare(base, new), "mrr_avg")
    assert mrr.n_shared == 2 and (mrr.ci_low, mrr.ci_high) == (-0.5, -0.5)


def test_abstention_pairs_use_unanswerable_cases() -> None:
    base = run(uniform(4, abstained=True), answerable=False)
    new = run(
        {
            **uniform(2, abstained=True),
            "c002": ("failed", {"abstained": False}),
            "c003": ("failed", {"abstained": False}),
        },
        answerable=False,
    )
    comparison = compare(base, new)
    accuracy = delta(comparison, "abstention_accuracy")
    assert (accuracy.old, accuracy.new, accuracy.regressed, accuracy.n_shared) == (1.0, 0.5, True, 4)
    hallucination = delta(comparison, "hallucination_rate_unanswerable")
    assert hallucination.delta == 0.5 and hallucination.tolerance is None and not hallucination.regressed
    assert hallucination.ci_low is not None and hallucination.ci_low >= 0
    assert comparison.flipped_to_fail == ["set.jsonl::c002", "set.jsonl::c003"]


def test_invariant_differences() -> None:
    base = run(uniform(2, mrr=1.0))
    assert check_invariants(base, run(uniform(2, mrr=1.0))) == []
    other = run(
        uniform(2, mrr=1.0),
        eval_set_hash="5e6f" + "0" * 60,
        judge={"name": "openai", "model": "gpt-4o", "prompt_version": "g1"},
    )
    messages = check_invariants(base, other)
    assert messages == [
        "eval_set_hash differs: baseline aaaaaaaaaaaa… vs this run 5e6f00000000…",
        "judge model differs: baseline gpt-4o-mini vs this run gpt-4o",
        "judge temperature differs: baseline 0 vs this run (missing)",
    ]
    assert compare(base, other).invariant_differences == messages
    assert all(m in format_comparison(compare(base, other)) for m in messages)
    # missing on both sides is no difference; 0 and 0.0 are the same temperature
    bare: dict[str, Any] = {"aggregate_metrics": {}}
    assert check_invariants(bare, dict(bare)) == []
    assert check_invariants(base, run(uniform(1), judge=dict(JUDGE, temperature=0.0))) == []
    lexical = run(uniform(1), judge={"name": "lexical", "model": None, "prompt_version": "lex1", "temperature": 0})
    assert check_invariants(base, lexical) == [
        "judge model differs: baseline gpt-4o-mini vs this run (missing)",
        "judge prompt_version differs: baseline g1 vs this run lex1",
    ]


def test_invariants_do_not_count_as_regression() -> None:
    base = run(uniform(2, mrr=1.0))
    assert not compare(base, run(uniform(2, mrr=1.0), eval_set_hash="b" * 64)).regressed


def test_flipped_cases() -> None:
    base = run(
        {
            "a": ("passed", {}),
            "b": ("passed", {}),
            "c": ("failed", {}),
            "d": ("error", {}),
            "e": ("xpassed", {}),
            "f": ("passed", {}),
            "g": ("skipped", {}),
            "h": ("passed", {}),
        }
    )
    new = run(
        {
            "a": ("failed", {}),
            "b": ("passed", {}),
            "c": ("passed", {}),
            "d": ("xpassed", {}),
            "e": ("error", {}),
            "f": ("skipped", {}),
            "g": ("failed", {}),
        }
    )
    comparison = compare(base, new)
    assert comparison.flipped_to_fail == ["set.jsonl::a", "set.jsonl::e"]
    assert comparison.flipped_to_pass == ["set.jsonl::c", "set.jsonl::d"]
    lines = format_comparison(comparison, max_cases=1)
    start = lines.index("cases that flipped from pass to fail:")
    assert lines[start + 1 : start + 3] == ["  set.jsonl::a", "  (+1 more)"]
    assert "cases that flipped from fail to pass:" in lines


def test_format_comparison_many_flips() -> None:
    base = run(uniform(25, recall_at_k=1))
    new = run(uniform(25, "failed", recall_at_k=0))
    lines = format_comparison(compare(base, new))
    start = lines.index("cases that flipped from pass to fail:")
    assert lines[start + 1] == "  set.jsonl::c000"
    assert lines[start + 20] == "  set.jsonl::c019"
    assert lines[start + 21] == "  (+5 more)"
    assert any(
        line.startswith("recall_at_k_avg: 1.000 → 0.000 (-1.000; ") and line.endswith("REGRESSED") for line in lines
    )


def test_min_judge_coverage() -> None:
    base = run(uniform(2, mrr=1.0))
    new = run(uniform(2, mrr=1.0))
    new["aggregate_metrics"]["judge_coverage"] = {
        "groundedness": {"scored": 90, "attempted": 100, "coverage": 0.9},
        "correctness": {"scored": 95, "attempted": 100, "coverage": 0.95},
        "relevancy": {"scored": 0, "attempted": 0, "coverage": None},
    }
    comparison = compare(base, new, min_judge_coverage=0.95)
    assert comparison.coverage_failures == ["judge coverage of groundedness 0.90 < 0.95"]
    assert comparison.regressed
    assert "judge coverage of groundedness 0.90 < 0.95" in format_comparison(comparison)
    assert not compare(base, new).regressed  # no minimum given
    assert not compare(base, new, min_judge_coverage=0.9).regressed


def test_lower_is_better_operational_rates_compared_when_configured() -> None:
    base = run(uniform(4, mrr=1.0))
    new = run({**uniform(3, mrr=1.0), "c003": ("error", {})})
    comparison = compare(base, new)
    error_rate = delta(comparison, "error_rate")
    assert (error_rate.old, error_rate.new, error_rate.tolerance, error_rate.regressed) == (0.0, 0.25, None, False)
    assert compare(base, new, tolerances={"error_rate": 0.1}).regressed


def test_default_tolerances_contract() -> None:
    assert default_tolerances() == {
        "recall_at_k_avg": 0.05,
        "mrr_avg": 0.05,
        "groundedness_avg": 0.5,
        "correctness_avg": 0.5,
        "abstention_accuracy": 0.10,
        "scope_miss_rate": 0.10,
        "false_abstention_rate": 0.05,
    }
    assert {"false_abstention_rate", "hallucination_rate_unanswerable"} <= lower_is_better()


def write(path: Path, data: dict[str, Any] | None = None, text: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        text if text is not None else safejson.dumps(data), encoding="utf-8"
    )  # as the plugin writes metrics
    return path


def test_load_baseline_file_dir_and_latest(tmp_path: Path) -> None:
    data = run(uniform(2, mrr=1.0))
    file = write(tmp_path / "results" / "20240101-000000" / "metrics.json", data)
    assert load_baseline(file) == data
    assert load_baseline(str(file)) == data
    assert load_baseline(file.parent) == data
    write(tmp_path / "results" / "latest", text="20240101-000000\n")
    assert load_baseline(tmp_path / "results") == data


def test_load_baseline_missing(tmp_path: Path) -> None:
    assert load_baseline(tmp_path / "nope.json") is None
    assert load_baseline(tmp_path) is None  # a folder without metrics.json


def test_load_baseline_broken(tmp_path: Path) -> None:
    broken = write(tmp_path / "metrics.json", text="{not json")
    with pytest.raises(ValueError, match=r"metrics.json"):
        load_baseline(broken)
    with pytest.raises(ValueError) as info:
        load_baseline(tmp_path)
    assert str(tmp_path) in str(info.value)
    other = write(tmp_path / "other.json", data={"hello": 1})
    with pytest.raises(ValueError, match=r"not a metrics.json"):
        load_baseline(other)
    with pytest.raises(ValueError, match=r"not a metrics.json"):
        load_baseline(write(tmp_path / "list.json", text="[1, 2]"))


# --------------------------------------------------------------------------- comparable runs only


def test_delta_and_interval_come_from_the_same_paired_cases() -> None:
    # The issue's case: a delta over all cases (+0.109) printed beside an interval over the shared ones.
    base = run({"a": ("passed", {"mrr": 1.0}), "b": ("passed", {"mrr": 1.0}), "c": ("error", {})})
    new = run(
        {
            "a": ("passed", {"mrr": 0.5}),
            "b": ("passed", {"mrr": 1.0}),
            "c": ("passed", {"mrr": 0.0}),
            "d": ("passed", {"mrr": 0.0}),
        }
    )
    mrr = delta(compare(base, new), "mrr_avg")
    assert (mrr.old, mrr.new, mrr.delta, mrr.n_shared) == (1.0, 0.75, -0.25, 2)  # a and b: c errored in the baseline
    assert (mrr.whole_old, mrr.whole_new) == (1.0, 0.375)
    assert (
        mrr.ci_low is not None
        and mrr.ci_high is not None
        and mrr.delta is not None
        and mrr.ci_low <= mrr.delta <= mrr.ci_high
    )
    line = format_delta(mrr)
    assert line.startswith("mrr_avg: 1.000 → 0.750 (-0.250; 95% CI ")
    assert "on 2 paired cases; whole runs 1.000 → 0.375" in line and line.endswith("REGRESSED")


def test_a_subset_run_is_compared_on_the_cases_it_shares() -> None:
    base = run(uniform(25, recall_at_k=1, mrr=1.0))
    subset = run({f"c{i:03d}": ("passed", {"recall_at_k": 1, "mrr": 1.0}) for i in range(5)})
    comparison = compare(base, subset)
    assert (comparison.shared_cases, comparison.baseline_cases, comparison.current_cases) == (5, 25, 5)
    assert comparison.scope() == "compared on 5 shared cases of 25 in the baseline and 5 in this run"
    assert format_comparison(comparison)[0] == comparison.scope()
    assert comparison.passed and comparison.exit_code == 0 and comparison.status == "no regression"
    block = comparison.as_dict()
    assert (block["status"], block["shared_cases"], block["baseline_cases"], block["current_cases"]) == (
        "no regression",
        5,
        25,
        5,
    )
    assert json.loads(json.dumps(block)) == block  # metrics.json material
    # a subset that is worse on what it shares is a regression all the same
    worse = run({f"c{i:03d}": ("passed", {"recall_at_k": 1, "mrr": 0.5}) for i in range(5)})
    assert compare(base, worse).regressed_metrics == ["mrr_avg"]


@pytest.mark.parametrize(
    ("new_cases", "reason"),
    [
        (
            {"other": ("passed", {"mrr": 1.0})},
            "no case of this run is in the baseline (2 cases in the baseline, 1 in this run)",
        ),
        (
            {"c000": ("error", {}), "c001": ("error", {})},
            "every case of this run errored (2 of 2); no metric to compare",
        ),
        (
            {"c000": ("skipped", {}), "c001": ("skipped", {}), "x": ("passed", {"mrr": 1.0})},
            "none of the 2 shared cases was scored in both runs",
        ),
    ],
    ids=["no-shared-case", "all-error", "nothing-scored-in-both"],
)
def test_runs_without_a_shared_scored_case_are_not_compared(new_cases: dict[str, Any], reason: str) -> None:
    base = run(uniform(2, mrr=1.0))
    comparison = compare(base, run(new_cases), min_judge_coverage=0.95)
    assert comparison.not_compared == reason
    assert comparison.status == "not compared" and not comparison.regressed and not comparison.passed
    assert (
        comparison.exit_code == 2
        and comparison.deltas == []
        and comparison.reason() == f"not compared with the baseline: {reason}"
    )
    assert format_comparison(comparison)[-1] == f"not compared: {reason}"


def test_an_all_error_baseline_is_not_compared_either() -> None:
    comparison = compare(run(uniform(2, "error")), run(uniform(2, mrr=1.0)))
    assert comparison.not_compared == "every case of the baseline errored (2 of 2); no metric to compare"
    # whole-run data only (no cases): the counts say it
    no_cases = dict(run(uniform(3, "error")), cases={})
    assert (
        compare(run(uniform(2, mrr=1.0)), no_cases).not_compared
        == "every case of this run errored (3 of 3); no metric to compare"
    )


def test_operational_rates_and_latency_are_paired_too() -> None:
    base = run(
        {
            "a": ("passed", {"latency_ms": 100.0}),
            "b": ("passed", {"latency_ms": 300.0}),
            "gone": ("passed", {"latency_ms": 9000.0}),
        }
    )
    new = run({"a": ("passed", {"latency_ms": 200.0}), "b": ("error", {}), "added": ("error", {})})
    new["cases"] = dict(new["cases"])  # plain dicts, as metrics.json reads back
    new["cases"]["set.jsonl::b"]["error_kind"] = "timeout"
    comparison = compare(base, new, tolerances={"timeout_rate": 0.1})
    error_rate = delta(comparison, "error_rate")
    assert (error_rate.old, error_rate.new, error_rate.n_shared) == (0.0, 0.5, 2)  # a and b; not "added"
    assert (error_rate.whole_old, error_rate.whole_new) == (0.0, 2 / 3)
    timeouts = delta(comparison, "timeout_rate")
    assert (timeouts.old, timeouts.new, timeouts.regressed) == (0.0, 0.5, True)
    p50 = delta(comparison, "latency_p50_ms")
    assert (p50.old, p50.new, p50.delta, p50.n_shared, p50.ci_low) == (100.0, 200.0, 100.0, 1, None)


def test_false_abstention_rate_rise_regresses_by_default() -> None:
    base = run(uniform(10, abstained=False))
    new = run({**uniform(9, abstained=False), "c009": ("failed", {"abstained": True})})
    rise = delta(compare(base, new), "false_abstention_rate")
    assert (rise.old, rise.new, rise.tolerance, rise.regressed) == (0.0, 0.1, 0.05, True)


def test_interval_always_contains_the_delta() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    value = st.one_of(st.none(), st.sampled_from([0.0, 1.0]), st.floats(0, 5, allow_nan=False))
    outcome = st.sampled_from(["passed", "failed", "error", "skipped"])
    case = st.tuples(outcome, value, outcome, value)

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(st.lists(case, min_size=1, max_size=40), st.integers(0, 5), st.integers(1, 200))
    def check(cases: list[Any], seed: int, samples: int) -> None:
        base = run({f"c{i}": (o1, {"groundedness": v1}) for i, (o1, v1, _, _) in enumerate(cases)})
        new = run({f"c{i}": (o2, {"groundedness": v2}) for i, (_, _, o2, v2) in enumerate(cases)})
        comparison = compare(base, new, seed=seed, bootstrap_samples=samples)
        for d in comparison.deltas:
            if d.ci_low is not None:
                assert d.delta is not None and d.ci_high is not None and d.ci_low <= d.delta <= d.ci_high, d
            if d.delta is not None and d.n_shared:
                assert d.old is not None and d.new is not None
                assert abs((d.new - d.old) - d.delta) < 1e-9, d

    check()


def test_per_file_digests_compare_the_files_both_runs_ran() -> None:
    files = {"eval/a.jsonl": "1" * 64, "eval/b.jsonl": "2" * 64}
    base = run(uniform(2, mrr=1.0), eval_set_files=files)
    only_a = run(uniform(1, mrr=1.0), eval_set_hash="f" * 64, eval_set_files={"eval/a.jsonl": "1" * 64})
    assert check_invariants(base, only_a) == []  # fewer files: compared on the shared cases
    changed = run(uniform(1, mrr=1.0), eval_set_files={"eval/a.jsonl": "3" * 64, "eval/b.jsonl": "2" * 64})
    assert check_invariants(base, changed) == [
        "eval_set_hash differs: baseline eval/a.jsonl 111111111111… vs this run eval/a.jsonl 333333333333…"
    ]


def test_gate_runs_is_one_policy() -> None:
    base = run(uniform(4, mrr=1.0))
    same = gate_runs(base, run(uniform(4, mrr=1.0)))
    assert (same.status, same.exit_code, same.reason()) == ("no regression", 0, "")
    worse = gate_runs(base, run(uniform(4, mrr=0.5)), gate={"mrr": 0.1})
    assert (worse.status, worse.exit_code) == ("regression", 1)
    assert worse.reason() == "regression: mrr_avg 1.000 → 0.500 (-0.500, tolerance 0.100)"
    other = run(uniform(4, mrr=1.0), eval_set_hash="b" * 64)
    refused = gate_runs(base, other)
    assert (refused.status, refused.exit_code, refused.deltas) == ("refused", 2, [])
    assert (
        refused.reason() == "baseline refused: eval_set_hash differs: baseline aaaaaaaaaaaa… vs this run bbbbbbbbbbbb…"
    )
    assert gate_runs(base, other, ignore_invariants=True).passed
    low = run(uniform(4, mrr=1.0))
    low["aggregate_metrics"]["judge_coverage"] = {"abstained": {"scored": 3, "attempted": 4, "coverage": 0.75}}
    assert gate_runs(base, low).coverage_failures == ["judge coverage of abstained 0.75 < 0.95"]  # default minimum
    assert gate_runs(base, low, gate={"min_judge_coverage": 0.5}).passed


@pytest.mark.e2e
def test_bootstrap_is_the_same_in_every_process_with_or_without_numpy() -> None:
    """One random source: 3,000 cases x 1,000 samples (past the 2,000,000 draws where numpy once took over)
    give the same interval in a fresh process, with numpy importable or made unimportable, under any hash seed."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "if sys.argv[1] == 'no-numpy':\n"
        "    sys.modules['numpy'] = None  # import numpy raises ImportError\n"
        "from pytest_rageval.gate.statistics import bootstrap_interval\n"
        "diffs = [(-1.0, 0.0, 0.0, 1.0, 0.5, 0.25)[i % 6] + (i % 7) / 100 for i in range(3000)]\n"
        "print(repr(bootstrap_interval(diffs, samples=1000, seed=5)))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code, mode],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for mode, seed in (("numpy", "0"), ("no-numpy", "1"), ("numpy", "2"))
    }
    assert len(outputs) == 1 and next(iter(outputs)).startswith("("), outputs


def test_xfail_and_xpass_flips_are_shown_with_the_others() -> None:
    """An xfailed case that now passes (xpassed or passed) flipped to pass; a passing one now xfailed flipped to
    fail; failed -> xfailed (a known failure) and xfailed -> failed are no flips."""
    base = run(
        {
            "a": ("xfailed", {}),
            "b": ("xpassed", {}),
            "c": ("xfailed", {}),
            "d": ("failed", {}),
            "e": ("passed", {}),
            "f": ("xfailed", {}),
        }
    )
    new = run(
        {
            "a": ("xpassed", {}),
            "b": ("xfailed", {}),
            "c": ("passed", {}),
            "d": ("xfailed", {}),
            "e": ("xfailed", {}),
            "f": ("failed", {}),
        }
    )
    comparison = compare(base, new)
    assert comparison.flipped_to_pass == ["set.jsonl::a", "set.jsonl::c"]
    assert comparison.flipped_to_fail == ["set.jsonl::b", "set.jsonl::e"]
