"""Whether `rageval_judge_rate` keeps a run inside a rate-limited judge's budget, serially and under pytest-xdist.

N answerable cases (gold support + reference answer: groundedness and correctness, two judge requests per
case) run against a fast loopback RAG and a loopback OpenAI-compatible judge that allows R requests in any
W-second window (a sliding window: a request that finds R accepted within the last W s gets 429 with a
Retry-After of the whole seconds until the oldest of them leaves). Four runs, each in a fresh project (its own
output folder) with `--rageval-no-cache`:

    (a) serial, no rate          (b) -n 4, no rate
    (c) serial, -o rageval_judge_rate=<R/W as N/min>          (d) -n 4, the same rate

Printed per run: wall clock; the ideal at the rate, 2N/R*W; the judge requests accepted and refused (429); the
most accepted in any W-second window (the server holds it to R; shown as a check) and the most sent (accepted +
refused) in any W-second window, which is what the client asked of the budget; the exit status and cases
passed; whether metrics.json (aggregate_metrics and per-case outcomes and values, latency excluded) equals run
(c)'s; and the plugin's own summary line of the judge endpoint. With the rate set, expect 0 refused and at most
R sent in any window, with -n 4 too (one budget for all the workers); without it, refusals, each retried after
its Retry-After.

    python bench/rate_budget.py                               # N=60, 20 per 10 s window (120/min), 50 ms judge
    python bench/rate_budget.py --cases 30 --allowed 10 --window 5 --workers 2
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Timed, child_env, load_note, python, run_timed, source_state, table
from concurrency import comparable, latest_metrics, write_project
from servers import JudgeServer, RagServer, most_in_window


@dataclass
class Run:
    label: str
    workers: int
    rate: str | None
    result: Timed | None = None
    accepted: int = 0
    refused: int = 0
    most_accepted: int = 0
    most_sent: int = 0
    passed: object = "-"
    summary: str = ""
    metrics: dict[str, Any] | None = None


def judge_line(output: str) -> str:
    """The plugin's summary line of the judge endpoint: the line starting ``judge `` that names its limit."""
    for line in output.splitlines():
        text = line.strip()
        if text.startswith("judge ") and "limit" in text:
            return text
    return "(no judge line in the output)"


def pytest_cmd(judge_url: str, workers: int, rate: str | None) -> list[str]:
    cmd = [python(), "-m", "pytest", "--rageval", "-q", "-p", "no:cacheprovider", "--rageval-judge", "openai"]
    cmd += ["--rageval-judge-model", "bench-judge", "--rageval-judge-base-url", judge_url, "--rageval-no-cache"]
    if workers:
        cmd += ["-n", str(workers)]
    if rate:
        cmd += ["-o", f"rageval_judge_rate={rate}"]
    return cmd


def shown(cmd: list[str]) -> str:
    """A command line as a reader would type it (``python`` for this interpreter)."""
    return shlex.join(["python", *cmd[1:]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=60, help="N eval cases (60): 2N judge requests a run")
    parser.add_argument("--allowed", type=int, default=20, help="R: judge requests allowed in any window (20)")
    parser.add_argument("--window", type=float, default=10.0, help="W: the judge's window in seconds (10)")
    parser.add_argument("--judge-latency-ms", type=float, default=50.0)
    parser.add_argument("--rag-latency-ms", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=4, help="pytest-xdist workers of runs (b) and (d) (4)")
    parser.add_argument("--show-output", action="store_true", help="print the tail of each pytest run")
    args = parser.parse_args()

    n, allowed, window = args.cases, args.allowed, args.window
    rate = f"{allowed * 60 / window:g}/min"
    ideal = 2 * n / allowed * window
    runs = [
        Run("(a) serial, no rate", 0, None),
        Run(f"(b) -n {args.workers}, no rate", args.workers, None),
        Run(f"(c) serial, {rate}", 0, rate),
        Run(f"(d) -n {args.workers}, {rate}", args.workers, rate),
    ]
    budget = 20 * n + 100  # requests a server may answer in all
    rag_s, judge_s = args.rag_latency_ms / 1000, args.judge_latency_ms / 1000
    with (
        tempfile.TemporaryDirectory(prefix="rageval-bench-") as tmp,
        RagServer(latency=rag_s, max_requests=budget) as rag,
        JudgeServer(latency=judge_s, max_requests=budget, rate_limit=(allowed, window)) as judge,
    ):
        print(
            f"N={n} cases (2 judge requests each), judge {args.judge_latency_ms:g} ms allowing {allowed} requests in any "
            f"{window:g} s window ({rate}), RAG {args.rag_latency_ms:g} ms; {load_note()}; {source_state()}",
            flush=True,
        )
        # Warm-up on a 3-case project against an unlimited judge: bytecode and assertion-rewrite caches.
        with JudgeServer(latency=judge_s) as free:
            warm = Path(tmp) / "warm"
            write_project(warm, 3, rag.url)
            for workers in (0, args.workers):
                run_timed(pytest_cmd(free.base_url, workers, None), cwd=warm, env=child_env(), timeout=120)
        for run in runs:
            root = Path(tmp) / f"project-{runs.index(run)}"
            write_project(root, n, rag.url)
            rag.reset()
            judge.reset()  # a fresh budget: the window forgets the previous run
            cmd = pytest_cmd(judge.base_url, run.workers, run.rate)
            print(f"{run.label}: {shown(cmd)}", flush=True)
            res = run_timed(cmd, cwd=root, env=child_env(), timeout=4 * ideal + 120)
            run.result = res
            run.accepted, run.refused = judge.count, judge.refused
            run.most_accepted = most_in_window(judge.arrivals, window)
            run.most_sent = most_in_window(sorted(judge.arrivals + judge.refused_arrivals), window)
            run.summary = judge_line(res.stdout + "\n" + res.stderr)
            run.metrics = comparable(latest_metrics(root))
            if run.metrics is not None:
                totals = run.metrics["totals"]
                run.passed = f"{totals.get('passed')}/{n}"
            if args.show_output or res.returncode != 0:
                print(f"--- {run.label}: exit {res.returncode}\n{res.tail()}", flush=True)
            print(f"    {res.wall:.1f} s, {run.accepted} accepted, {run.refused} refused", flush=True)
            if judge.unknown:
                print(f"    note: the judge saw unrecognised prompts, e.g. {judge.unknown[0][:200]!r}")

    reference = runs[2].metrics
    rows: list[list[object]] = []
    for run in runs:
        assert run.result is not None
        if run is runs[2]:
            same = "(reference)" if reference is not None else "no metrics"
        elif run.metrics is None or reference is None:
            same = "no metrics"
        else:
            same = "yes" if run.metrics == reference else "no"
        rows.append(
            [
                run.label,
                f"{run.result.wall:.1f}",
                f"{ideal:.1f}",
                run.accepted,
                run.refused,
                f"{run.most_accepted} <= {allowed}"
                if run.most_accepted <= allowed
                else f"{run.most_accepted} > {allowed}",
                run.most_sent,
                run.result.returncode,
                run.passed,
                same,
            ]
        )
    print()
    print(
        table(
            [
                "run",
                "wall s",
                "ideal s",
                "accepted",
                "refused",
                f"most accepted in {window:g} s",
                f"most sent in {window:g} s",
                "exit",
                "passed",
                "identical",
            ],
            rows,
        )
    )
    print()
    for run in runs:
        print(f"{run.label}: {run.summary}")
    print(
        f"\nideal = 2N/R*W = {2 * n}/{allowed}*{window:g} s, the judge's budget spent evenly; accepted / refused = judge requests "
        f"the server answered / refused with 429 + Retry-After; most accepted / sent = the most requests in any {window:g}-second "
        f"window (sent: accepted + refused); passed = cases passed (metrics.json); identical = metrics.json aggregate_metrics and "
        f"per-case outcomes/values equal to run (c)'s, latency excluded"
    )
    for run in runs:
        if run.metrics is not None and reference is not None and run.metrics != reference and run is not runs[2]:
            diff = sorted(
                k
                for k in set(run.metrics["aggregate_metrics"]) | set(reference["aggregate_metrics"])
                if run.metrics["aggregate_metrics"].get(k) != reference["aggregate_metrics"].get(k)
            )
            print(f"note: {run.label} differs from (c) in {diff or 'per-case values'}")
    print(f"after: {load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
