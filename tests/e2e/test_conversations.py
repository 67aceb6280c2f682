"""Conversation lines end to end: turns asked with the history so far, scored per turn, in every artifact.

A scripted chat system over two notes (Alpha, Beta): a question that names no topic ("And its budget?") is about
the topic of the latest earlier message that names one, when the system reads its history; it reads the user's
messages or its own (assistant) answers. Run as a callable target and over HTTP (the loopback ask API), with
pytester in process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer

CHAT = [
    {
        "question": "What is Alpha?",
        "reference_answer": "Alpha is a program.",
        "gold_supports": [{"rel_path": "alpha.md"}],
    },
    {
        "question": "And its budget?",
        "reference_answer": "Alpha's budget is 5.",
        "gold_supports": [{"rel_path": "alpha.md"}],
    },
    {
        "question": "Who runs it?",
        "reference_answer": "Alpha is run by Ann.",
        "gold_supports": [{"rel_path": "alpha.md"}],
    },
]
#: The scripted chat system, a module of the test project (``chat:uses_history`` and the others as targets).
SYSTEM = '''
TOPICS = ("Alpha", "Beta")


def reply(question, history, *, reads, wrong_turn_2=False):
    """Its subject (named, else the latest one in the messages of role ``reads``), that note's chunk, an answer."""
    subject = next((t for t in TOPICS if t in question), None)
    if subject is None and reads is not None and isinstance(history, list):
        for message in reversed(history):
            if message.get("role") == reads:
                subject = next((t for t in TOPICS if t in str(message.get("content"))), None)
                if subject:
                    break
    if wrong_turn_2 and question == "And its budget?":
        subject = "Beta"  # a wrong answer at turn 2: the later turns see it only with live history
    path = f"{subject.lower()}.md" if subject else "noise.md"
    chunks = [{"chunk_id": path, "rel_path": path, "heading_path": "# " + (subject or "Noise"), "text": "t", "rank": 1}]
    answer = f"{subject or 'Nothing'} facts."
    return {"answer": answer, "references": chunks, "abstained": False, "debug": {"retrieved_chunks": chunks}}


def uses_history(question, params):
    return reply(question, params.get("history"), reads="user")


def ignores_history(question, params):
    return reply(question, None, reads=None)


def reads_its_answers(question, params):
    return reply(question, params.get("history"), reads="assistant", wrong_turn_2=True)
'''


def line(history: str = "live", case_id: str = "chat", **extra: Any) -> str:
    return json.dumps({"id": case_id, "turns": CHAT, "history": history, **extra})


def system() -> dict[str, Any]:
    """The scripted system's functions, for the loopback HTTP server."""
    namespace: dict[str, Any] = {}
    exec(SYSTEM, namespace)
    return namespace


ARGS = ("--rageval", "--rageval-judge=none", "-p", "no:randomly", "-p", "no:cacheprovider")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(chat=SYSTEM)
    pytester.syspathinsert()
    return pytester


def eval_set(pytester: pytest.Pytester, *lines: str) -> None:
    pytester.makefile(".jsonl", **{"eval_sets/chat": "\n".join(lines) + "\n"})


def latest(pytester: pytest.Pytester) -> Path:
    results = pytester.path / "results"
    return results / (results / "latest").read_text().strip()


def records(run: Path) -> dict[str, dict[str, Any]]:
    lines = (run / "results.jsonl").read_text().splitlines()
    return {r["test_case_id"]: r for r in map(json.loads, lines)}


def turn_outcomes(record: dict[str, Any]) -> list[str]:
    return [turn["outcome"] for turn in record["turns"]]


def test_live_history_passes_a_system_that_reads_it_and_fails_one_that_does_not_naming_turn_2(
    project: pytest.Pytester,
) -> None:
    eval_set(project, line())
    good = project.runpytest_inprocess(*ARGS, "--rageval-target=chat:uses_history")
    good.assert_outcomes(passed=1)
    record = records(latest(project))["chat"]
    assert turn_outcomes(record) == ["passed", "passed", "passed"]
    # each turn was sent the earlier turns, the target's own answers as the assistant's
    assert record["turns"][0]["history"] == []
    assert record["turns"][2]["history"] == [
        {"role": "user", "content": "What is Alpha?"},
        {"role": "assistant", "content": "Alpha facts."},
        {"role": "user", "content": "And its budget?"},
        {"role": "assistant", "content": "Alpha facts."},
    ]

    bad = project.runpytest_inprocess(*ARGS, "--rageval-target=chat:ignores_history")
    bad.assert_outcomes(failed=1)
    bad.stdout.fnmatch_lines(
        [
            "*[[]chat] conversation of 3 turns (live history): turn 2, turn 3 failed",
            "--- turn 2: And its budget?",
            "history sent:",
            "  user: What is Alpha?",
            "  assistant: Nothing facts.",
            "*recall_at_k = 0 (needs >= 1)*",
        ]
    )
    record = records(latest(project))["chat"]
    assert turn_outcomes(record) == ["passed", "failed", "failed"]
    assert [(m["turn"], m["metric"]) for m in record["misses"]] == [(2, "recall_at_k"), (3, "recall_at_k")]


@pytest.mark.parametrize("kind", ["callable", "http"])
def test_reference_history_scores_turn_3_apart_from_turn_2s_answer(project: pytest.Pytester, kind: str) -> None:
    """The system answers turn 2 wrongly and reads its own earlier answers: with live history turn 3 inherits the
    mistake; with reference history turn 3 is sent turn 2's reference answer and passes."""
    eval_set(project, line("live", "live"), line("reference", "reference"))
    reply = system()["reply"]
    server = AskServer(lambda body: reply(body["question"], body.get("messages"), reads="assistant", wrong_turn_2=True))
    with server:
        if kind == "http":
            # the request map renames the history in the body, like any other key
            project.makeini("[pytest]\nrageval_request_map =\n    history = messages\n")
            target = f"--rageval-target={server.url}"
        else:
            target = "--rageval-target=chat:reads_its_answers"
        result = project.runpytest_inprocess(*ARGS, target)
    result.assert_outcomes(failed=2)
    got = records(latest(project))
    assert turn_outcomes(got["live"]) == ["passed", "failed", "failed"]
    assert turn_outcomes(got["reference"]) == ["passed", "failed", "passed"]
    sent = got["reference"]["turns"][2]["history"]
    assert sent[3] == {"role": "assistant", "content": "Alpha's budget is 5."}
    if kind == "http":
        bodies = [r["body"] for r in server.requests]
        assert all("messages" in body and "history" not in body for body in bodies)
        assert {json.dumps(body["messages"]) for body in bodies if body["question"] == "Who runs it?"} == {
            json.dumps(got["live"]["turns"][2]["history"]),
            json.dumps(sent),
        }


# --------------------------------------------------------------------------- hand-computed metrics, -n 2, baseline

#: per turn index: the ranks of the gold chunk among 5 retrieved (None: not retrieved)
GOLD_RANK = {1: 1, 2: 2, 3: None, 4: 3}
#: per turn index, hand computed at K=5: recall_at_k, mrr, precision_at_k, ndcg_at_k (binary, one gold item)
EXPECTED = {
    1: (1, 1.0, 0.2, 1.0),
    2: (1, 0.5, 0.2, 0.6309297535714575),  # 1 / log2(3)
    3: (0, 0.0, 0.0, 0.0),
    4: (1, 1 / 3, 0.2, 0.5),  # 1 / log2(4)
}
SCRIPTED = """
import re

GOLD_RANK = {1: 1, 2: 2, 3: None, 4: 3}

def ask(question, params):
    turn = len(params.get("history") or []) // 2 + 1
    topic = re.match(r"c(\\d+)", question).group(1)
    chunks = [{"chunk_id": f"n{i}", "rel_path": f"noise{i}.md", "text": "t"} for i in range(5)]
    if GOLD_RANK[turn] is not None:
        chunks[GOLD_RANK[turn] - 1] = {"chunk_id": "g", "rel_path": f"gold{topic}.md", "text": "t"}
    return {"answer": "a", "references": [], "abstained": False, "debug": {"retrieved_chunks": chunks}}
"""


def ten_conversations() -> list[str]:
    """Conversation i has 2, 3 or 4 turns (i % 3 + 2): 10 first and second turns, 6 third, 3 fourth."""
    lines = []
    for i in range(10):
        gold = [{"rel_path": f"gold{i}.md"}]
        turns = [{"question": f"c{i} t{t}", "gold_supports": gold} for t in range(1, i % 3 + 3)]
        lines.append(json.dumps({"id": f"c{i}", "turns": turns}))
    return lines


def comparable(metrics: dict[str, Any]) -> str:
    """metrics.json without what differs from run to run (ids, times, latency)."""
    drop = {"run_id", "timestamp", "session", "git_commit", "git_dirty", "duration_s"}
    kept = {k: v for k, v in metrics.items() if k not in drop}
    return re.sub(r'"latency[^"]*": ?(\{[^}]*\}|[-0-9.e]+)', "", json.dumps(kept, sort_keys=True))


def test_per_turn_metrics_equal_hand_computed_values_serially_and_with_two_workers(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(scripted=SCRIPTED)
    pytester.syspathinsert()
    pytester.makefile(".jsonl", **{"eval_sets/ten": "\n".join(ten_conversations()) + "\n"})
    args = (*ARGS, "--rageval-target=scripted:ask")
    serial = pytester.runpytest_inprocess(*args)
    # a turn 3 retrieves no gold: the 6 conversations that have one fail, naming it
    serial.assert_outcomes(passed=4, failed=6)
    run = latest(pytester)
    got = records(run)
    for case_id, record in got.items():
        for turn in record["turns"]:
            want = EXPECTED[turn["turn"]]
            m = turn["metrics"]
            assert (m["recall_at_k"], m["mrr"], m["precision_at_k"]) == pytest.approx(want[:3]), (case_id, turn["turn"])
            assert m["ndcg_at_k"] == pytest.approx(want[3])
    metrics = json.loads((run / "metrics.json").read_text())
    by_turn = metrics["by_turn"]
    assert list(by_turn) == ["1", "2", "3+"]
    assert by_turn["1"]["mrr_avg"] == pytest.approx(1.0) and by_turn["1"]["n"] == 10
    assert by_turn["2"]["ndcg_at_k_avg"] == pytest.approx(EXPECTED[2][3]) and by_turn["2"]["n"] == 10
    # 3+: six third turns (mrr 0) and three fourth ones (mrr 1/3)
    assert (by_turn["3+"]["n"], by_turn["3+"]["passed"], by_turn["3+"]["failed"]) == (9, 3, 6)
    assert by_turn["3+"]["mrr_avg"] == pytest.approx(1 / 9)
    assert by_turn["3+"]["recall_at_k_avg"] == pytest.approx(3 / 9)
    # every turn counts in the run's averages: 29 turns, mrr summed 10 + 5 + 0 + 1
    assert metrics["aggregate_metrics"]["mrr_avg"] == pytest.approx(16 / 29)
    assert metrics["cases"]["eval_sets/ten.jsonl::c2"]["turns"][3]["metrics"]["mrr"] == pytest.approx(1 / 3)

    parallel = pytester.runpytest_inprocess(*args, "-n", "2")
    parallel.assert_outcomes(passed=4, failed=6)
    again = json.loads((latest(pytester) / "metrics.json").read_text())
    assert comparable(again) == comparable(metrics)

    # the unchanged system passes its own baseline; the gate pairs turns by case and turn index
    pytester.runpytest_inprocess(*args, "--rageval-baseline=baseline", "--rageval-update-baseline")
    gated = pytester.runpytest_inprocess(*args, "--rageval-baseline=baseline")
    gated.assert_outcomes(passed=4, xfailed=6)  # known failures: they failed in the baseline the same way
    assert gated.ret == 0, gated.stdout.str()
    comparison = json.loads((latest(pytester) / "metrics.json").read_text())["comparison"]
    assert comparison["status"] == "no regression"
    mrr = next(d for d in comparison["deltas"] if d["name"] == "mrr_avg")
    assert mrr["n_shared"] == 29 and mrr["delta"] == 0


def test_a_regression_in_one_turn_is_caught_and_named(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(scripted=SCRIPTED)
    pytester.syspathinsert()
    pytester.makefile(".jsonl", **{"eval_sets/ten": "\n".join(ten_conversations()) + "\n"})
    args = (*ARGS, "--rageval-target=scripted:ask")
    pytester.runpytest_inprocess(*args, "--rageval-baseline=baseline", "--rageval-update-baseline")
    worse = pytester.path / "scripted.py"
    worse.write_text(
        SCRIPTED.replace("GOLD_RANK = {1: 1, 2: 2, 3: None, 4: 3}", "GOLD_RANK = {1: 1, 2: 5, 3: None, 4: 3}")
    )
    gated = pytester.runpytest_inprocess(*args, "--rageval-baseline=baseline", "-p", "no:cacheprovider")
    assert gated.ret != 0
    comparison = json.loads((latest(pytester) / "metrics.json").read_text())["comparison"]
    mrr = next(d for d in comparison["deltas"] if d["name"] == "mrr_avg")
    assert mrr["regressed"] and mrr["delta"] == pytest.approx((10 * 0.2 - 10 * 0.5) / 29)
    assert {drop["case"] for drop in mrr["largest_drops"]} <= {f"eval_sets/ten.jsonl::c{i} turn 2" for i in range(10)}
    assert len(mrr["largest_drops"]) == 10


def test_matrix_and_repeats_run_conversations(project: pytest.Pytester) -> None:
    eval_set(project, line())
    result = project.runpytest_inprocess(
        *ARGS, "--rageval-target=chat:uses_history", "--rageval-matrix=top_k=3,5", "--rageval-repeat=2"
    )
    result.assert_outcomes(passed=2)
    run = latest(project)
    lines = [json.loads(text) for text in (run / "results.jsonl").read_text().splitlines()]
    assert sorted(r["config_id"] for r in lines) == ["top_k=3", "top_k=5"]
    for record in lines:
        assert [t["runs"] for t in record["turns"]] == [2, 2, 2]  # each turn repeated
        assert record["turns"][1]["history"][1] == {"role": "assistant", "content": "Alpha facts."}
    metrics = json.loads((run / "metrics.json").read_text())
    assert set(metrics["by_config"]) == {"top_k=3", "top_k=5"}
    assert metrics["by_turn"]["2"]["n"] == 2
    assert metrics["repeats"]["repeated_cases"] == 2 and metrics["repeats"]["stable_pass"] == 2


def test_rageval_judge_judges_each_turn_as_a_run_with_the_judge_does(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A conversation run without a judge, judged later by ``rageval judge``: each turn gets the verdicts and
    metrics a run with that judge gives it, and the conversation's own fields follow from its turns; a run judged
    again keeps each turn's outcome and the misses that name their turn."""
    from pytest_rageval.cli import main

    turns: list[dict[str, Any]] = [dict(turn) for turn in CHAT]
    turns[1]["thresholds"] = {"correctness": 4}  # "Alpha facts." is not "Alpha's budget is 5."
    eval_set(project, json.dumps({"id": "chat", "turns": turns}))
    target = ("--rageval-target=chat:uses_history", "--rageval-store-full-text")
    project.runpytest_inprocess(*ARGS, *target).assert_outcomes(passed=1)
    later = latest(project)
    assert all(turn["judge"] == {} for turn in records(later)["chat"]["turns"])
    judged_args = [a for a in ARGS if a != "--rageval-judge=none"] + ["--rageval-judge=lexical"]
    project.runpytest_inprocess(*judged_args, *target).assert_outcomes(failed=1)
    judged = latest(project)
    direct = records(judged)["chat"]

    def scored(record: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in record["metrics"].items() if k != "latency_ms" and v is not None}

    assert main(["judge", str(later), "--judge", "lexical"]) == 0
    assert "re-judged 1 of 1 records" in capsys.readouterr().out
    rejudged = records(later)["chat"]
    assert [scored(t) for t in rejudged["turns"]] == [scored(t) for t in direct["turns"]]
    assert [t["judge"].keys() for t in rejudged["turns"]] == [t["judge"].keys() for t in direct["turns"]]
    assert scored(rejudged) == scored(direct) and scored(rejudged)["correctness"] < scored(rejudged)["recall_at_k"] * 5
    by_turn = json.loads((later / "metrics.json").read_text())["by_turn"]
    assert by_turn["2"]["correctness_avg"] == direct["turns"][1]["metrics"]["correctness"]

    assert main(["judge", str(judged), "--judge", "lexical"]) == 0
    again = records(judged)["chat"]
    assert turn_outcomes(again) == turn_outcomes(direct) and "failed" in turn_outcomes(again)
    assert again["misses"] == direct["misses"] and {m["turn"] for m in again["misses"]} >= {2}
    assert (again["outcome"], again["error"]) == ("failed", None)


def test_resume_asks_again_only_the_conversation_the_run_lacks(project: pytest.Pytester) -> None:
    """A run cut short after one conversation's record: ``--rageval-resume`` asks every turn of the missing one, and
    only it, with the history it would have had; the folder then holds both, complete."""
    eval_set(project, line("live", "first"), line("live", "second"))
    reply = system()["reply"]
    with AskServer(lambda body: reply(body["question"], body.get("history"), reads="user")) as server:
        target = f"--rageval-target={server.url}"
        project.runpytest_inprocess(*ARGS, target).assert_outcomes(passed=2)
        run = latest(project)
        whole = records(run)
        kept = [line for line in (run / "results.jsonl").read_text().splitlines() if '"first"' in line]
        (run / "results.jsonl").write_text(kept[0] + "\n")  # as a run killed after its first case leaves it
        asked = len(server.requests)
        project.runpytest_inprocess(*ARGS, target, f"--rageval-resume={run}").assert_outcomes(passed=1)
        again = [r["body"] for r in server.requests[asked:]]
    assert [body["question"] for body in again] == [turn["question"] for turn in CHAT]
    assert [body["history"] for body in again] == [turn["history"] for turn in whole["second"]["turns"]]
    resumed = records(run)
    assert set(resumed) == {"first", "second"} and turn_outcomes(resumed["second"]) == ["passed"] * 3
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["complete"] is True and metrics["by_turn"]["2"]["n"] == 2
