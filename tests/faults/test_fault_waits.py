"""Every wait ends: a rate slower than one request a ``rageval_timeout`` (it would hold a request past its timeout,
or forever) and a concurrency no limit could reach are usage errors at start, naming the key, before any case runs.
"""

from __future__ import annotations

import json

import pytest

RAG = "def ask(question, params):\n    return {'answer': 'A.', 'retrieved_chunks': [{'rel_path': 'a.md', 'text': 'A.'}]}\n"


def project(pytester: pytest.Pytester, ini: str) -> None:
    pytester.makepyfile(rag=RAG)
    pytester.makefile(
        ".jsonl",
        **{"eval_sets/s": json.dumps({"id": "c", "question": "q?", "gold_supports": [{"rel_path": "a.md"}]}) + "\n"},
    )
    pytester.makeini(f"[pytest]\n{ini}")


def run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--rageval", "--rageval-judge=none", "--rageval-target=rag:ask", "-p", "no:cacheprovider", *extra
    )


@pytest.mark.parametrize(
    "key, rate, timeout, shown",
    [
        (
            "rageval_target_rate",
            "1e-300/s",
            "60",
            "'1e-300/s' is one request every 1e+300 s, longer than rageval_timeout (60 s)",
        ),
        (
            "rageval_target_rate",
            "0.0000001/h",
            "60",
            "'0.0000001/h' is one request every 3.6e+10 s, longer than rageval_timeout (60 s)",
        ),
        ("rageval_judge_rate", "1/min", "30", "'1/min' is one request every 60 s, longer than rageval_timeout (30 s)"),
        (
            "rageval_judge_rate",
            "5e-324/s",
            "60",
            "'5e-324/s' is one request every more than 1e+308 s, longer than rageval_timeout (60 s)",
        ),
    ],
)
def test_a_rate_slower_than_one_request_a_timeout_is_a_usage_error(
    pytester: pytest.Pytester, key: str, rate: str, timeout: str, shown: str
) -> None:
    project(pytester, f"{key} = {rate}\nrageval_timeout = {timeout}\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{key}: {shown}*use a faster rate or a longer timeout*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_rate_of_one_request_a_timeout_runs(pytester: pytest.Pytester) -> None:
    project(pytester, "rageval_target_rate = 1/min\nrageval_timeout = 60\n")
    run(pytester).assert_outcomes(passed=1)


@pytest.mark.parametrize("value, shown", [(str(10**23), "a number of 24 digits"), ("1000000", "1000000")])
def test_a_concurrency_option_past_the_ini_bound_is_a_usage_error(
    pytester: pytest.Pytester, value: str, shown: str
) -> None:
    project(pytester, "")
    result = run(pytester, f"--rageval-concurrency={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--rageval-concurrency: must be a whole number from 1 to 999999, got {shown}*"])
