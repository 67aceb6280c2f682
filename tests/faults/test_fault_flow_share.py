"""The socket of the endpoint limits xdist workers share serves only the session's workers, and refuses hostile
messages without hanging: a foreign process of the same user cannot stall an ``-n 2`` run through it, and a
client that knows the key but sends values no worker sends (a pause of 1e308 s, a rate of 1e-300, a place
never released) is cut off while the others go on.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ask_server import AskServer, answer, chunk

from pytest_rageval.engine.flow_share import FlowAddress, FlowServer, SharedLimiter, SharedSpec, link_to
from pytest_rageval.flow import EndpointLimiter

#: a process of the same user that finds the session's socket in the temp folder and tries to stall the run: it
#: asks for the target's only place at a rate of one request in 1e300 s, pauses the endpoint for 1e308 s, and stays
ATTACKER = """
import glob, json, os, socket, sys, time
tmp, endpoints = sys.argv[1], sys.argv[2:]
deadline = time.monotonic() + 60
while not (found := glob.glob(os.path.join(tmp, "rageval-stop-*", "flow.sock"))) and time.monotonic() < deadline:
    time.sleep(0.002)
s = socket.socket(socket.AF_UNIX)
s.connect(found[0])
acquire = {"op": "acquire", "id": 1, "ceiling": 1, "adaptive": False, "start": 1, "rate": 1e-300, "shared": True}
hostile = [{**acquire, "ep": e} for e in endpoints] + [{"op": "pause", "ep": e, "seconds": 1e308} for e in endpoints]
s.sendall(b"".join(json.dumps(m).encode() + b"\\n" for m in hostile))
start = time.monotonic()
s.settimeout(120)
try:
    while s.recv(4096):
        pass
    print("closed after", round(time.monotonic() - start, 1), flush=True)
except OSError as exc:
    print("error", exc, flush=True)
"""


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp folder with a short path (a Unix socket's path is bounded)."""
    with tempfile.TemporaryDirectory(prefix="rageval-t-", dir="/tmp") as folder:
        yield Path(folder)


@pytest.mark.e2e
def test_a_foreign_process_on_the_socket_cannot_stall_an_xdist_run(
    pytester: pytest.Pytester, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = 12
    lines = [{"id": f"c{i}", "question": f"q{i}", "gold_supports": [{"rel_path": "docs/a.md"}]} for i in range(cases)]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in lines) + "\n"})
    pytester.makeini("[pytest]\nrageval_target_rate = 10/s\nrageval_timeout = 20\n")
    gold = chunk("docs/a.md", "# A", 1, text="A fact.")
    monkeypatch.setenv("TMPDIR", str(short_tmp))  # the run's temp folder, where the attacker looks for the socket
    with AskServer(lambda body: answer("A fact [1].", [gold])) as rag:
        endpoints = [f"target {rag.url}", f"target {rag.url}?debug=true"]  # (the run asks for the chunks' text too)
        attacker = subprocess.Popen(
            [sys.executable, "-c", ATTACKER, str(short_tmp), *endpoints], stdout=subprocess.PIPE, text=True
        )
        try:
            result = pytester.runpytest_subprocess(
                "--rageval",
                f"--rageval-target={rag.url}",
                "--rageval-judge=none",
                "-n",
                "2",
                "-p",
                "no:cacheprovider",
                timeout=120,
            )
            out, _ = attacker.communicate(timeout=30)
        finally:
            attacker.kill()
            attacker.wait()
    result.assert_outcomes(passed=cases)
    assert out.startswith("closed after"), out  # the server hung up on it at once
    assert float(out.split()[-1]) < 5, out


# --------------------------------------------------------------------------- a client with the key


@pytest.fixture
def server() -> Iterator[FlowServer]:
    with tempfile.TemporaryDirectory(prefix="rageval-t-", dir="/tmp") as folder:
        flow = FlowServer(Path(folder) / "flow.sock", max_spacing=60.0, max_hold=1.0)
        flow.start()
        yield flow
        flow.stop()


SPEC = SharedSpec(ceiling=2, adaptive=False, start=2)


def _requests(server: FlowServer, workers: int, each: int) -> tuple[int, int]:
    """``workers`` processes' worth of requests through the server (a thread and loop each, 20 ms a request):
    how many ran, and the most at once; all within 20 s or the test fails."""
    lock = threading.Lock()
    ran = [0, 0, 0]  # total, now, most

    def worker() -> None:
        limiter = SharedLimiter(
            link_to(FlowAddress(server.path, server.key)), "judge e", SPEC, EndpointLimiter(SPEC.ceiling)
        )

        async def one() -> None:
            async with limiter.slot() as ticket:
                with lock:
                    ran[0] += 1
                    ran[1] += 1
                    ran[2] = max(ran[2], ran[1])
                await asyncio.sleep(0.02)
                with lock:
                    ran[1] -= 1
                ticket.done(0.02)

        async def main() -> None:
            await asyncio.gather(*(one() for _ in range(each)))

        asyncio.run(main())

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads), "the workers were stalled"
    return ran[0], ran[2]


def _hostile(server: FlowServer, messages: list[Any], *, key: str | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(server.path))
    lines = [{"op": "hello", "key": server.key if key is None else key}, *messages]
    try:
        sock.sendall(b"".join((m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n" for m in lines))
    except (BrokenPipeError, ConnectionResetError):
        pass  # hung up on before all of it was read
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server hangs up on ``sock`` within ``seconds`` (what it sent before is read and dropped)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


def _acquire(request: int, **spec: Any) -> dict[str, Any]:
    return {
        "op": "acquire",
        "ep": "judge e",
        "id": request,
        "ceiling": 2,
        "adaptive": False,
        "start": 2,
        "rate": None,
        "shared": True,
    } | spec


HOSTILE = {
    "pause 1e308 s": [{"op": "pause", "ep": "judge e", "seconds": 1e308}],
    "pause NaN": [b'{"op": "pause", "ep": "judge e", "seconds": NaN}'],
    "pause Infinity": [b'{"op": "pause", "ep": "judge e", "seconds": Infinity}'],
    "rate 1e-300": [_acquire(1, ep="judge f", rate=1e-300)],
    "ceiling 10**30": [_acquire(1, ep="judge f", ceiling=10**30)],
    "a release never granted": [
        {"op": "release", "ep": "judge e", "id": 7, "result": "done", "seconds": 0.1, "epoch": 0}
    ]
    * 5,
    "a flood of acquires": [_acquire(i) for i in range(1, 1001)],
    "an endpoint name of a megabyte": [_acquire(1, ep="x" * 1_000_000)],
    "not an object": [b"[1, 2]"],
}


@pytest.mark.parametrize("messages", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_message_with_the_key_is_refused_without_hanging(server: FlowServer, messages: list[Any]) -> None:
    assert _requests(server, 1, 2) == (2, 2)  # the endpoint exists, with a limit of 2
    sock = _hostile(server, messages)
    assert _closed_within(sock, 5)
    total, most = _requests(server, 3, 10)
    assert (total, most) == (30, 2)  # the limit holds: nothing the hostile client said changed it
    [(_, stats)] = [s for s in server.stats() if s[0] == "judge e"]
    assert stats.limit == 2 and stats.rate is None


def test_places_taken_and_never_released_are_freed(server: FlowServer) -> None:
    """A client that takes both places and then says nothing is cut off after ``max_hold`` (1 s here)."""
    sock = _hostile(server, [_acquire(1), _acquire(2)])
    started = time.monotonic()
    assert _requests(server, 2, 5) == (10, 2)
    assert time.monotonic() - started >= 0.9  # they waited for the places the client held
    assert _closed_within(sock, 1)


@pytest.mark.parametrize("key", ["", "wrong key"])
def test_a_client_without_the_key_is_closed_before_it_is_served(server: FlowServer, key: str) -> None:
    sock = _hostile(server, [_acquire(1), _acquire(2)], key=key)
    assert _closed_within(sock, 5)
    assert _requests(server, 2, 5) == (10, 2)
    assert server.stats()[0][1].requests == 10  # none for the client without the key
