"""How close `--rageval-concurrency C` gets to the ideal wall clock, against loopback services with fixed latency.

N answerable cases (gold support + reference answer) run against a loopback RAG
(fixed latency per request) and a loopback OpenAI-compatible judge (fixed
latency; groundedness and correctness: two judge requests per case) with
`python -m pytest --rageval -q -p no:cacheprovider --rageval-concurrency C` in a
subprocess, for each C, then once more under pytest-xdist (`-n W`, each worker
running its own C). Printed per run: wall clock (the whole subprocess, start-up
and collection included), the ideal N*(rag + 2*judge)/(C*W), the ratio, the bar
1.5*ideal + 3 s, the requests the servers saw (expect N and 2N) and the most
judge requests in flight at once. The xdist run's (and every other run's)
metrics.json aggregate_metrics is compared with the first run's, latency
excluded (it is wall time, never identical); "identical: yes/no".

``auto`` as a C runs without --rageval-concurrency (each endpoint's limit adapts, up to
rageval_max_concurrency, 64); its ideal is taken at 32 in flight. ``--refuse-above M`` makes both servers answer
429 to a request that finds M in flight; the table counts those refusals.

    python bench/concurrency.py                       # N=300, rag 100 ms, judge 200 ms, C in auto,1,16, -n 2
    python bench/concurrency.py --cases 100 --concurrency 1,8,16,32 --workers 0
    python bench/concurrency.py --concurrency auto --refuse-above 4 --workers 4
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import child_env, load_note, python, run_timed, source_state, table
from servers import JudgeServer, RagServer, eval_line

#: the in-flight count an adaptive run's ideal is taken at (rageval_max_concurrency is 64)
AUTO_SLOTS = 32

#: aggregate_metrics keys that measure time and so differ between any two runs.
TIMING_KEYS = ("latency",)


def write_project(root: Path, n: int, rag_url: str) -> None:
    (root / "eval_sets").mkdir(parents=True, exist_ok=True)
    (root / "eval_sets" / "bench.jsonl").write_text("".join(json.dumps(eval_line(i)) + "\n" for i in range(n)))
    (root / "pyproject.toml").write_text(f'[tool.pytest.ini_options]\nrageval_target = "{rag_url}"\n')


def latest_metrics(root: Path) -> dict[str, Any] | None:
    try:
        run_id = (root / "results" / "latest").read_text().strip()
        return cast("dict[str, Any] | None", json.loads((root / "results" / run_id / "metrics.json").read_text()))
    except (OSError, ValueError):
        return None


def comparable(metrics: dict[str, Any] | None) -> dict[str, Any] | None:
    """aggregate_metrics without timing, plus per-case outcomes and metric values without latency."""
    if metrics is None:
        return None
    agg = {k: v for k, v in metrics.get("aggregate_metrics", {}).items() if k not in TIMING_KEYS}
    cases = {
        key: {"outcome": c.get("outcome"), **{m: v for m, v in (c.get("metrics") or {}).items() if m != "latency_ms"}}
        for key, c in (metrics.get("cases") or {}).items()
    }
    return {
        "aggregate_metrics": agg,
        "cases": cases,
        "totals": {k: metrics.get(k) for k in ("passed", "failed", "errors")},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300, help="N eval cases (300)")
    parser.add_argument("--rag-latency-ms", type=float, default=100.0)
    parser.add_argument("--judge-latency-ms", type=float, default=200.0)
    parser.add_argument(
        "--concurrency", default="auto,1,16", help="comma-separated C values, auto = adaptive (auto,1,16)"
    )
    parser.add_argument("--refuse-above", type=int, default=None, help="servers answer 429 above this many in flight")
    parser.add_argument(
        "--workers", type=int, default=2, help="pytest-xdist workers for the extra run (2; 0 = skip it)"
    )
    parser.add_argument(
        "--workers-concurrency", type=int, default=None, help="C of the xdist run (default: the largest C)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per run (default 2*ideal + 60)")
    parser.add_argument("--show-output", action="store_true", help="print the tail of each pytest run")
    args = parser.parse_args()

    n = args.cases
    rag_s, judge_s = args.rag_latency_ms / 1000, args.judge_latency_ms / 1000
    levels = [c.strip() for c in args.concurrency.split(",") if c.strip()]
    runs: list[tuple[str, int]] = [(c, 0) for c in levels]
    if args.workers > 0:
        numbers = [int(c) for c in levels if c != "auto"]
        runs.append((str(args.workers_concurrency or (max(numbers) if numbers else "auto")), args.workers))
    budget = 4 * n * len(runs) + 100  # requests each server may answer in total

    rows: list[list[object]] = []
    first: dict[str, Any] | None = None
    notes: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="rageval-bench-") as tmp,
        RagServer(latency=rag_s, max_requests=budget, refuse_above=args.refuse_above) as rag,
        JudgeServer(latency=judge_s, max_requests=budget, refuse_above=args.refuse_above) as judge,
    ):
        root = Path(tmp) / "project"
        print(
            f"N={n} cases, RAG {args.rag_latency_ms:g} ms, judge {args.judge_latency_ms:g} ms x 2 requests per case; {load_note()}; {source_state()}",
            flush=True,
        )
        # Warm-up on a 3-case project: bytecode and assertion-rewrite caches, so no run pays for them.
        warm = Path(tmp) / "warm"
        write_project(warm, 3, rag.url)
        for extra in (["--rageval-concurrency", "2"], ["-n", str(args.workers)] if args.workers else []):
            if extra:
                run_timed(
                    [
                        python(),
                        "-m",
                        "pytest",
                        "--rageval",
                        "-q",
                        "-p",
                        "no:cacheprovider",
                        "--rageval-judge",
                        "openai",
                        "--rageval-judge-model",
                        "bench-judge",
                        "--rageval-judge-base-url",
                        judge.base_url,
                        "--rageval-no-cache",
                        *extra,
                    ],
                    cwd=warm,
                    env=child_env(),
                    timeout=120,
                )
        write_project(root, n, rag.url)
        for c, workers in runs:
            rag.reset()
            judge.reset()
            cmd = [
                python(),
                "-m",
                "pytest",
                "--rageval",
                "-q",
                "-p",
                "no:cacheprovider",
                *([] if c == "auto" else ["--rageval-concurrency", c]),
                "--rageval-judge",
                "openai",
                "--rageval-judge-model",
                "bench-judge",
                "--rageval-judge-base-url",
                judge.base_url,
                "--rageval-no-cache",
            ]
            if workers:
                cmd += ["-n", str(workers)]
            slots = (AUTO_SLOTS if c == "auto" else int(c)) * max(workers, 1)
            if c == "auto" and args.refuse_above:
                slots = min(slots, args.refuse_above)
            ideal = n * (rag_s + 2 * judge_s) / slots
            floor = n * (rag_s + judge_s) / slots  # a case's two judge requests may overlap
            timeout = args.timeout or 2 * ideal + 60
            before_children, before_self = (
                resource.getrusage(resource.RUSAGE_CHILDREN),
                resource.getrusage(resource.RUSAGE_SELF),
            )
            res = run_timed(cmd, cwd=root, env=child_env(), timeout=timeout)
            after_children, after_self = (
                resource.getrusage(resource.RUSAGE_CHILDREN),
                resource.getrusage(resource.RUSAGE_SELF),
            )
            cpu_pytest = (after_children.ru_utime + after_children.ru_stime) - (
                before_children.ru_utime + before_children.ru_stime
            )
            cpu_servers = (after_self.ru_utime + after_self.ru_stime) - (before_self.ru_utime + before_self.ru_stime)
            metrics = latest_metrics(root)
            label = f"C={c}" + (f" -n {workers}" if workers else "")
            if args.show_output or res.returncode != 0:
                print(f"--- {label}: exit {res.returncode}\n{res.tail()}", flush=True)
            same = ""
            cmp = comparable(metrics) if res.returncode == 0 else None
            if first is None:
                first = cmp
                same = "(reference)" if cmp is not None else "no metrics"
            elif cmp is None or first is None:
                same = "no metrics"
            else:
                same = "yes" if cmp == first else "no"
                if cmp != first:
                    diff = sorted(
                        k
                        for k in set(cmp["aggregate_metrics"]) | set(first["aggregate_metrics"])
                        if cmp["aggregate_metrics"].get(k) != first["aggregate_metrics"].get(k)
                    )
                    notes.append(f"{label}: differs from the first run in {diff or 'per-case values'}")
            bar = 1.5 * ideal + 3
            rows.append(
                [
                    label,
                    f"{res.wall:.1f}",
                    f"{ideal:.1f}",
                    f"{res.wall / ideal:.2f}",
                    f"{bar:.1f}",
                    "yes" if res.wall <= bar else "NO",
                    f"{floor:.1f}",
                    f"{judge.judge_requests()}/{2 * n}",
                    f"{rag.kinds['ask']}/{n}",
                    judge.max_in_flight,
                    f"{judge.refused + rag.refused}/{judge.count + rag.count + judge.refused + rag.refused}",
                    f"{cpu_pytest:.1f}",
                    f"{cpu_servers:.1f}",
                    res.returncode,
                    same,
                ]
            )
            print(f"{label}: {res.wall:.1f} s (ideal {ideal:.1f} s)", flush=True)
            if judge.unknown:
                notes.append(f"{label}: judge saw unrecognised prompts, e.g. {judge.unknown[0][:200]!r}")
    print()
    print(
        table(
            [
                "run",
                "wall s",
                "ideal s",
                "ratio",
                "bar s",
                "<= bar",
                "floor s",
                "judge req",
                "rag req",
                "judge in flight",
                "429s",
                "cpu pytest s",
                "cpu servers s",
                "exit",
                "identical",
            ],
            rows,
        )
    )
    print(
        "\nauto: no --rageval-concurrency, each endpoint's limit adapts; its ideal is at 32 in flight (at most "
        "--refuse-above); 429s = requests the servers refused / all they received;"
        "\nideal = N*(rag + 2*judge)/(C*workers); bar = 1.5*ideal + 3 s; floor = N*(rag + judge)/(C*workers), "
        "the critical path when a case's two judge requests overlap; identical = metrics.json aggregate_metrics "
        "and per-case outcomes/metrics equal to the first run's, latency excluded; judge in flight = most judge requests "
        "the server held at once; cpu = CPU seconds (user+sys) of the pytest processes and of this script's servers"
    )
    for note in notes:
        print("note:", note)
    print(f"after: {load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
