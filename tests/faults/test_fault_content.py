"""Hostile content from the system under test and the judge: the run completes, the artifacts stay strict JSON.

Each fault is sent for one case ("bad") of three, by the loopback ask server
(raw bytes, so NaN, lone surrogate escapes, 100,000-deep nesting and a
5,000-digit number go out as written) and by a callable target (the same as
Python values). What a user notices is checked: the other cases run and pass,
the bad case has the outcome and a readable reason, metrics.json is complete
and counts right, results.jsonl parses with a strict reader and encodes as
UTF-8, and no plugin traceback or raw escape sequence reaches the terminal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest
from ask_server import AskServer
from fault_content_payloads import ANSI, GOLD, http_reply
from openai_server import DEFAULT_VERDICTS, OpenAIServer, metric_named, metric_of, ok, user_text

HERE = Path(__file__).parent

#: fault -> (the bad case's outcome, a regex its note or error message must match)
FAULTS: dict[str, tuple[str, str]] = {
    "surrogate_answer": ("passed", r"^answer: invalid Unicode \(lone surrogate\) replaced by U\+FFFD$"),
    "surrogate_chunk_extra": ("passed", r"^debug\.retrieved_chunks\[0\]\.source: invalid Unicode"),
    "surrogate_timings_key": ("passed", r"^timings\.retrieval\ufffd: invalid Unicode"),
    "nan_score": ("passed", r"^debug\.retrieved_chunks\[0\]\.score_final: NaN replaced by null$"),
    "infinity_score": ("passed", r"^debug\.retrieved_chunks\[0\]\.score_final: -Infinity replaced by null$"),
    "deep_nesting": ("error", r"nested deeper than 64 levels"),
    "huge_integer": ("error", r"a number of 5000 characters|an integer of more than 100 digits"),
    "ansi_answer": ("failed", r"^$"),  # nothing to repair: the answer is stored as sent, escaped when shown
    "ansi_error": ("error", r"\x1b\[2J"),
    "big_answer": ("passed", r"^answer cut from 52,428,800 to 20,000 characters$"),
}
#: Faults that crashed the session before, also under xdist (each target once; both run serially above).
CRASHES = [
    ("surrogate_chunk_extra", "callable"),
    ("nan_score", "http"),
    ("deep_nesting", "callable"),
    ("huge_integer", "http"),
]


def strict(line: str) -> dict[str, Any]:
    """A results.jsonl line as a strict JSON reader sees it (no NaN/Infinity), after checking it encodes as UTF-8."""
    line.encode("utf-8")
    return cast(
        "dict[str, Any]", json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} written to results.jsonl"))
    )


def run_dir(root: Path) -> Path:
    """The newest run folder (a run whose every case errored does not move ``latest``)."""
    return max((root / "results").glob("*/metrics.json"), key=lambda p: p.stat().st_mtime_ns).parent


def records(root: Path) -> dict[str, dict[str, Any]]:
    lines = (run_dir(root) / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["test_case_id"]: r for r in map(strict, lines)}


def project(pytester: pytest.Pytester, fault: str, target: str) -> None:
    cases = [{"id": name, "question": name, "gold_supports": [GOLD]} for name in ("c1", "bad", "c3")]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in cases) + "\n"})
    if target == "callable":
        pytester.makepyfile(
            myrag=(
                f"import sys\nsys.path.insert(0, {str(HERE)!r})\nfrom fault_content_payloads import call\n\n"
                f"def ask(question, params):\n    return call({fault!r}, question)\n"
            )
        )


def check_run(pytester: pytest.Pytester, result: pytest.RunResult, fault: str) -> dict[str, Any]:
    """The checks every fault shares; returns the bad case's record."""
    outcome, reason = FAULTS[fault]
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out, out[-3000:]
    assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
    result.assert_outcomes(
        passed=2 + (outcome == "passed"), failed=int(outcome == "failed"), errors=int(outcome == "error")
    )
    metrics = json.loads((run_dir(pytester.path) / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["complete"] is True and metrics["total_tests"] == 3
    assert metrics["passed"] == 2 + (outcome == "passed") and metrics["errors"] == int(outcome == "error")
    by_id = records(pytester.path)
    assert sorted(by_id) == ["bad", "c1", "c3"]
    assert by_id["c1"]["outcome"] == by_id["c3"]["outcome"] == "passed"
    bad = by_id["bad"]
    assert bad["outcome"] == outcome
    if outcome == "error":
        message = bad["error"]["message"]
        assert re.search(reason, message), message
        assert not re.fullmatch(r"\S+\.py:\d+", message)
        assert bad["error"]["kind"] in ("invalid_response", "http", "target")
    elif reason != "^$":
        assert any(re.search(reason, note) for note in bad["notes"]), bad["notes"]
    (run_dir(pytester.path) / "report.html").read_text(encoding="utf-8")
    return bad


def run(pytester: pytest.Pytester, fault: str, target: str, *extra: str) -> tuple[pytest.RunResult, Any]:
    project(pytester, fault, target)
    args = ["--rageval", "--rageval-judge=none", "-p", "no:cacheprovider", *extra]
    if target == "callable":
        return pytester.runpytest(*args, "--rageval-target=myrag:ask"), None
    if fault == "big_answer":  # a 50 MB body: over the default limit of response bodies (its own fault test)
        args += ["-o", "rageval_max_response_bytes=67108864"]
    server = AskServer(lambda body: http_reply(fault, body.get("question")))
    with server:
        return pytester.runpytest(*args, f"--rageval-target={server.url}"), server


@pytest.mark.parametrize("target", ["http", "callable"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_serial(pytester: pytest.Pytester, fault: str, target: str) -> None:
    result, _ = run(pytester, fault, target)
    bad = check_run(pytester, result, fault)
    out = result.stdout.str()
    if fault == "ansi_answer":
        assert bad["answer"] == f"Answer {ANSI} end."  # stored as sent (JSON escapes it) ...
        # ... shown escaped (the one-line excerpt turns the carriage return into a space)
        assert r"\x1b[2J\x1b[H ALL TESTS PASSED\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x9b31m" in out
    if fault == "ansi_error":
        assert r"\x1b[2J" in out
    if fault == "big_answer":
        assert len(bad["answer"]) == 20_000
        assert "answer" not in bad["judge_input"]  # the answer is stored once
        assert (run_dir(pytester.path) / "results.jsonl").stat().st_size < 200_000
        assert (run_dir(pytester.path) / "report.html").stat().st_size < 500_000
        report = (run_dir(pytester.path) / "report.html").read_text(encoding="utf-8")
        assert "<h4>Notes</h4><ul><li>answer cut from 52,428,800 to 20,000 characters</li></ul>" in report
    if fault in ("deep_nesting", "huge_integer"):
        result.stdout.fnmatch_lines(["*[[]bad[]] RAG call failed (invalid_response): *"])


@pytest.mark.parametrize(("fault", "target"), CRASHES)
def test_fault_under_xdist(pytester: pytest.Pytester, fault: str, target: str) -> None:
    result, _ = run(pytester, fault, target, "-n", "2")
    check_run(pytester, result, fault)


def test_note_is_shown_in_the_failure_message_and_the_cap_is_configurable(pytester: pytest.Pytester) -> None:
    """A failing case with a cut answer says so; rageval_max_answer_chars sets the cut."""
    pytester.makeini("[pytest]\nrageval_max_answer_chars = 1000\nrageval_max_response_bytes = 67108864\n")
    cases = [{"id": "bad", "question": "bad", "gold_supports": [{"rel_path": "docs/elsewhere.md"}]}]
    pytester.makefile(".jsonl", **{"eval_sets/s": json.dumps(cases[0]) + "\n"})
    with AskServer(lambda body: http_reply("big_answer", "bad")) as server:
        result = pytester.runpytest(
            "--rageval", "--rageval-judge=none", "-p", "no:cacheprovider", f"--rageval-target={server.url}"
        )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*notes:*", "*answer cut from 52,428,800 to 1,000 characters*"])
    assert len(records(pytester.path)["bad"]["answer"]) == 1000


def test_bad_cap_setting_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrageval_max_answer_chars = lots\n")
    pytester.makefile(".jsonl", **{"eval_sets/s": json.dumps({"id": "a", "question": "q"}) + "\n"})
    result = pytester.runpytest("--rageval", "--rageval-judge=none", "--rageval-target=http://127.0.0.1:9/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*rageval_max_answer_chars: must be a whole number of characters, got 'lots'*"])


def test_judge_reasoning_with_escape_sequences_is_shown_escaped_and_capped(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGEVAL_JUDGE_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    pytester.makeini("[pytest]\nrageval_max_reasoning_chars = 200\n")
    project(pytester, "none", "http")
    reasoning = f"Invented {ANSI} " + "x" * 500

    def judge(body: dict[str, Any], headers: dict[str, Any]) -> Any:
        verdict = dict(DEFAULT_VERDICTS[metric_named(body)])
        if "bad" in user_text(body) and metric_of(body) == "groundedness":
            verdict.update(reasoning=reasoning, score=1, unsupported_claims=[f"claim {ANSI}"], supported_claims=[])
        return ok(json.dumps(verdict))

    with AskServer(lambda body: http_reply("none", body.get("question"))) as rag, OpenAIServer(judge) as srv:
        # In a subprocess: an in-process run would drop the openai SDK's lazily imported modules afterwards,
        # breaking later tests' exception mapping (see tests/conftest.py).
        result = pytester.runpytest_subprocess(
            "--rageval",
            f"--rageval-target={rag.url}",
            "--rageval-judge=openai",
            "--rageval-judge-model=m",
            f"--rageval-judge-base-url={srv.base_url}",
            "-p",
            "no:cacheprovider",
        )
    out = result.stdout.str()
    assert "\x1b" not in out and "\x07" not in out and "Traceback" not in out
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([r"*groundedness judge: Invented \x1b[[]2J*", r"*unsupported: claim \x1b[[]2J*"])
    bad = records(pytester.path)["bad"]
    assert bad["judge"]["groundedness"]["reasoning"] == reasoning[:200]
    assert f"groundedness judge reasoning cut from {len(reasoning)} to 200 characters" in bad["notes"]


def test_an_exception_in_setup_is_recorded_by_type_and_message_and_shown_escaped(pytester: pytest.Pytester) -> None:
    """A client fixture that raises: the record says what was raised (not ``conftest.py:N``), the terminal shows it escaped."""
    project(pytester, "none", "callable")
    pytester.makeconftest(
        f"import pytest\n\n@pytest.fixture\ndef rageval_client():\n    raise RuntimeError({'health check said: ' + ANSI!r})\n"
    )
    result = pytester.runpytest("--rageval", "--rageval-judge=none", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "\x1b" not in out and "\x07" not in out
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(
        [
            r"E *RuntimeError: health check said: \x1b[[]2J*",
            r"ERROR eval_sets/s.jsonl::bad - RuntimeError: health check said: \x1b[[]2J*",
        ]
    )
    error = records(pytester.path)["bad"]["error"]
    assert error == {"kind": "other", "message": f"RuntimeError: health check said: {' '.join(ANSI.split())}"}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_lone_surrogate_in_an_eval_line_is_one_bad_line_and_the_others_run(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """The eval-set loader refuses a lone surrogate (issue 8, w8-ids): one error item naming line and field."""
    project(pytester, "none", "callable")
    cases = [
        {
            "id": "bad",
            "question": "bad",
            "gold_supports": [GOLD],
            "metadata": {"m": "x\ud800"},
            "params": {"p": "\udc80"},
        },
        {"id": "c1", "question": "c1", "gold_supports": [GOLD]},
        {"id": "c3", "question": "c3", "gold_supports": [GOLD]},
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in cases) + "\n"})
    result = pytester.runpytest(
        "--rageval", "--rageval-judge=none", "-p", "no:cacheprovider", "--rageval-target=myrag:ask", *workers
    )
    assert "INTERNALERROR" not in result.stdout.str()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*eval_sets/s.jsonl:1: field 'metadata.m': a lone surrogate (\\ud800) is not valid Unicode text*"]
    )
    metrics = json.loads((run_dir(pytester.path) / "metrics.json").read_text(encoding="utf-8"))
    assert (
        metrics["complete"] is True
        and metrics["total_tests"] == metrics["passed"] == 2
        and metrics["invalid_lines"] == 1
    )
