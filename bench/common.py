"""Small helpers shared by the benchmark scripts: a clean child environment, timed runs, tables."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PYCACHE = os.path.join(tempfile.gettempdir(), "rageval-bench-pycache")


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child pytest: no OpenAI/DeepEval credentials or endpoints, loopback only.

    This machine sets PYTHONDONTWRITEBYTECODE=1, which makes every pytest run re-do the assertion rewriting of
    every installed pytest11 plugin's modules (hypothesis, pytest-benchmark, ...: ~1 s per run here); the child
    gets a private pycache instead.

    Proxy variables are dropped: every URL is on 127.0.0.1. (Pointing them at a dead port to catch escapes
    would cost each new httpx client three extra SSL contexts, which penalises DeepEval, that builds a
    client per judge call, by ~1 s per case.)
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            (
                "PYTHONDONTWRITEBYTECODE",
                "PYTHONPYCACHEPREFIX",
                "OPENAI_",
                "RAGEVAL_",
                "DEEPEVAL_",
                "CONFIDENT_",
                "LOCAL_MODEL_",
                "PYTEST_",
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "ALL_PROXY",
                "http_proxy",
                "https_proxy",
                "all_proxy",
                "NO_PROXY",
                "no_proxy",
            )
        )
    }
    env.update(
        {
            # Bytecode (and pytest's assertion-rewrite cache) on, but in a tree of its own under /tmp: runs after the
            # first are warm, as on a developer's machine, and nothing is written into site-packages or the repo.
            "PYTHONPYCACHEPREFIX": PYCACHE,
        }
    )
    env.update(extra or {})
    return env


@dataclass
class Timed:
    """One timed child process."""

    wall: float
    returncode: int
    stdout: str
    stderr: str
    max_rss_kb: int | None = None

    def tail(self, lines: int = 15) -> str:
        text = (self.stdout + "\n" + self.stderr).strip().splitlines()
        return "\n".join(text[-lines:])


def run_timed(cmd: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float) -> Timed:
    """Run ``cmd``, measuring wall clock (and, with /usr/bin/time, the child's peak RSS)."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(list(cmd), cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return Timed(time.perf_counter() - start, -9, out, err + f"\n[bench] timed out after {timeout:.0f} s")
    return Timed(time.perf_counter() - start, proc.returncode, proc.stdout, proc.stderr)


def run_with_rss(cmd: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float) -> Timed:
    """Like ``run_timed``, plus the child's own peak RSS in KiB (from ``os.wait4`` on that child)."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    chunks: dict[str, bytes] = {}
    readers = [
        threading.Thread(target=lambda n=n, f=f: chunks.__setitem__(n, f.read()), daemon=True)
        for n, f in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for reader in readers:
        reader.start()
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        killer.cancel()
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join()
    out = chunks.get("out", b"").decode("utf-8", "replace")
    err = chunks.get("err", b"").decode("utf-8", "replace")
    if proc.returncode == -9:
        err += f"\n[bench] killed after {timeout:.0f} s"
    return Timed(wall, proc.returncode, out, err, max_rss_kb=usage.ru_maxrss)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain aligned text table."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def python() -> str:
    return sys.executable


def load_note() -> str:
    """Cores and load average, to print next to the numbers (a busy machine makes them unreliable)."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return f"{os.cpu_count()} cores"
    note = f"{os.cpu_count()} cores, load average {one:.2f} (1 min) {five:.2f} (5 min)"
    if one > 0.5 * (os.cpu_count() or 1):
        note += "  <- other work is running: numbers are noisier than usual"
    return note


def source_state() -> str:
    """Which pytest-rageval is measured: the repo's commit, and whether pytest_rageval/ has uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "pytest_rageval"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "pytest-rageval (no git)"
    return f"pytest-rageval at {commit or '?'}{' + uncommitted changes in pytest_rageval/' if dirty else ''}"
