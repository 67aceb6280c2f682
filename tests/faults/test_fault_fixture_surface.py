"""A conftest ``rageval_client`` of the user's own, and odd target objects, cannot hang or crash the run.

Real pytest runs in process (pytester): the conftest returns a client object whose ``aask`` never returns, raises
SystemExit, KeyboardInterrupt or an ordinary error, and whose ``describe()`` raises; target modules hold objects whose
``__getattr__`` or ``__signature__`` raise. Each is one case error (or the session stopped as on Ctrl-C, run folder
written), never an INTERNALERROR, a traceback or a hang. The concurrency rule after a timeout is held on the real
limiter, gate and callable client.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

CONFTEST = """
import asyncio
import pytest
from pytest_rageval.evaluation.schema import RagResponse
from pytest_rageval.targets.protocol import RagReply

class Client:
    async def aask(self, question, *, k, params):
        if question == "hang":
            await asyncio.Event().wait()
        if question == "exit":
            raise SystemExit(3)
        if question == "interrupt":
            raise KeyboardInterrupt
        if question == "broken":
            raise ValueError("no index")
        chunk = {"rel_path": "docs/a.md", "heading_path": "# A"}
        return RagReply(response=RagResponse(answer="A.", retrieved_chunks=[chunk]), latency_ms=1.0, attempts=1)

    async def aclose(self):
        pass

    def describe(self):
        raise RuntimeError("describe is broken")

@pytest.fixture(scope="session")
def rageval_client():
    return Client()
"""

HANDWRITTEN = """
import pytest
from pytest_rageval.targets.protocol import RagCallError

def test_ask_that_never_returns_ends(rageval_client):
    with pytest.raises(RagCallError, match="did not return within 1 s"):
        rageval_client.ask("hang")
"""


def project(pytester: pytest.Pytester, questions: list[str]) -> None:
    rows = [
        json.dumps({"id": f"c{i}", "question": q, "gold_supports": [{"rel_path": "docs/a.md", "heading_path": "# A"}]})
        for i, q in enumerate(questions)
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(rows) + "\n"})
    pytester.makeconftest(CONFTEST)


def run_folder(root: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    (run_dir,) = [p for p in (root / "results").iterdir() if p.is_dir() and not p.is_symlink()]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return metrics, {r["question"]: r for r in records}


ARGS = ("--rageval", "--rageval-judge=none", "-p", "no:cacheprovider", "-o", "rageval_timeout=1")


def test_a_fixture_client_that_hangs_or_raises_is_each_cases_error(pytester: pytest.Pytester) -> None:
    project(pytester, ["ok", "hang", "exit", "broken", "ok again"])
    pytester.makepyfile(test_hand=HANDWRITTEN)
    start = time.monotonic()
    # a subprocess: a run that hangs fails the test at its timeout
    result = pytester.runpytest_subprocess(*ARGS, "--rageval-concurrency=1", "eval_sets", "test_hand.py", timeout=60)
    assert time.monotonic() - start < 40
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    result.assert_outcomes(passed=3, errors=3)
    metrics, records = run_folder(pytester.path)
    assert metrics["complete"] is True and metrics["errors"] == 3
    assert records["hang"]["error"] == {
        "kind": "timeout",
        "message": "the rageval_client fixture did not return within 1 s",
    }
    assert records["exit"]["error"]["message"] == "the rageval_client fixture raised SystemExit(3)"
    assert records["broken"]["error"]["message"] == "the rageval_client fixture raised ValueError: no index"
    assert records["ok again"]["outcome"] == "passed"


@pytest.mark.parametrize("first", [True, False], ids=["first-case", "later-case"])
def test_keyboard_interrupt_from_a_fixture_client_stops_as_ctrl_c_with_the_run_folder(
    pytester: pytest.Pytester, first: bool
) -> None:
    project(pytester, ["interrupt", "ok", "ok 2"] if first else ["ok", "interrupt", "ok 2"])
    result = pytester.runpytest_inprocess(*ARGS, "--rageval-concurrency=1")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    output = result.stdout.str()
    assert "INTERNALERROR" not in output
    assert "the rageval_client fixture raised KeyboardInterrupt(): the session stops, as on Ctrl-C" in output
    metrics, records = run_folder(pytester.path)
    assert metrics["complete"] is False
    assert records["interrupt"]["outcome"] == "error"
    assert "ok 2" not in records  # nothing after it ran


ODD = """
ANSWER = {"answer": "A.", "retrieved_chunks": [{"rel_path": "docs/a.md", "heading_path": "# A"}]}

class RaisingGetattr:
    def __getattr__(self, name):
        raise RuntimeError(f"no {name} here")

    def __call__(self, question, params):
        return ANSWER

class RaisingSignature:
    @property
    def __signature__(self):
        raise RuntimeError("no signature")

    def __call__(self, question, params):
        return ANSWER

getattr_target = RaisingGetattr()
signature_target = RaisingSignature()
"""


@pytest.mark.parametrize("name", ["getattr_target", "signature_target"])
def test_an_odd_target_object_runs_in_pytest_and_rageval_inspect(
    pytester: pytest.Pytester, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_rageval.cli import main

    project(pytester, ["ok", "ok 2"])
    (pytester.path / "conftest.py").unlink()
    pytester.makepyfile(odd=ODD)
    pytester.syspathinsert()
    result = pytester.runpytest_inprocess(*ARGS, f"--rageval-target=odd:{name}")
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    result.assert_outcomes(passed=2)
    capsys.readouterr()
    assert main(["inspect", f"odd:{name}", "ok"]) == 0
    shown = capsys.readouterr()
    assert "Traceback" not in shown.err and "answer: 'A.'" in shown.out


# -- the concurrency of one after a timeout ----------------------------------------------------------


def test_a_call_past_its_timeout_keeps_its_place_until_it_ends() -> None:
    """With one place, the next call never runs beside an abandoned one: it waits within its timeout and errors
    naming the held place; once the abandoned call ends, the place is free again."""
    from pytest_rageval.flow import EndpointLimiter
    from pytest_rageval.targets.callable_client import CallableClient
    from pytest_rageval.targets.first_call import GatedClient
    from pytest_rageval.targets.protocol import RagCallError

    release = threading.Event()
    lock = threading.Lock()
    running, most = 0, 0

    def target(question: str, params: dict[str, Any]) -> dict[str, Any]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            if question == "slow":
                release.wait(30)
            return {"answer": "A."}
        finally:
            with lock:
                running -= 1

    client = CallableClient(target, name="myrag:ask", timeout=0.3, abandon_limit=4)
    gate = GatedClient(client, limiter=EndpointLimiter(1), name="myrag:ask", stop_on_mismatch=True)
    gate.timeout = 0.3

    async def ask(question: str, after: float) -> str:
        await asyncio.sleep(after)
        try:
            return (await gate.aask(question, k=1, params={})).response.answer
        except RagCallError as exc:
            return exc.message

    async def scenario() -> list[str]:
        # after a first call (which goes out alone), "queued" waits for the place from the start; "next" asks
        # once "slow" was given up
        assert await ask("first", 0) == "A."
        said = list(await asyncio.gather(ask("slow", 0), ask("queued", 0.05)))
        said.append(await ask("next", 0))
        release.set()
        for _ in range(100):
            if not getattr(gate, "abandoned", 0):
                break
            await asyncio.sleep(0.05)
        reply = await gate.aask("after", k=1, params={})
        said.append(reply.response.answer)
        return said

    try:
        said = asyncio.run(scenario())
    finally:
        release.set()
    assert most == 1
    assert said[0].startswith("myrag:ask did not return within 0.3 s")
    never = (
        "myrag:ask was not called within 0.3 s: 1 earlier call past its timeout still running held every place "
        "the target's concurrency allows"
    )
    assert said[1:3] == [never, never]
    assert said[3] == "A."


def test_an_async_call_that_ignores_its_cancellation_keeps_its_place() -> None:
    from pytest_rageval.flow import EndpointLimiter
    from pytest_rageval.targets.callable_client import CallableClient
    from pytest_rageval.targets.first_call import GatedClient
    from pytest_rageval.targets.protocol import RagCallError

    running, most = 0, 0
    stubborn_until = 0.0

    async def target(question: str, params: dict[str, Any]) -> dict[str, Any]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            while question == "stubborn" and time.monotonic() < stubborn_until:
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:
                    continue  # ignores the timeout's cancellation
            return {"answer": "A."}
        finally:
            running -= 1

    client = CallableClient(target, name="myrag:aask", timeout=0.3)
    gate = GatedClient(client, limiter=EndpointLimiter(1), name="myrag:aask", stop_on_mismatch=True)
    gate.timeout = 2.0

    async def scenario() -> list[str]:
        nonlocal stubborn_until
        stubborn_until = time.monotonic() + 1.0
        said = []
        for question in ("stubborn", "next"):
            try:
                said.append((await gate.aask(question, k=1, params={})).response.answer)
            except RagCallError as exc:
                said.append(exc.message)
        return said

    started = time.monotonic()
    said = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert time.monotonic() - started < 10
    assert most == 1
    assert said == ["myrag:aask did not return within 0.3 s", "A."]
