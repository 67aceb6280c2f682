"""Peak memory of whole runs: N eval-set cases against N parametrized trivial tests.

Writes a temp project holding `eval_sets/big.jsonl` (N lines like
`servers.eval_line`: one gold support, a reference answer, a tag),
`trivial.py` (a callable target, `ask(question, params)`, returning an answer
and the line's gold support as its one chunk and reference, so every case
passes) and `test_param.py` (`@pytest.mark.parametrize("i", range(N))` over a
test that does nothing). For each N it runs, full runs (not collect-only):

    python -m pytest -q -p no:cacheprovider test_param.py
    python -m pytest -q -p no:cacheprovider --rageval eval_sets/big.jsonl \
      --rageval-target trivial:ask --rageval-judge none

and prints each run's peak RSS (`ru_maxrss` from `os.wait4` on that child),
the difference, the difference per case in KB (1,000 bytes), the marginal
cost (the growth of the difference from the N before, per added case: the
fixed cost of the plugin's imports left out) and both wall times. The bar: at most 200 MB over plain pytest at 100,000 cases, i.e. at
most 2 KB per case. Nothing is sent anywhere (the target is in-process).

    python bench/memory.py                              # N = 10000, 50000, 100000
    python bench/memory.py --cases 20000 --timeout 600
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Timed, child_env, load_note, python, run_with_rss, source_state, table
from servers import eval_line

PARAM_TEST = """import pytest


@pytest.mark.parametrize("i", range({n}))
def test_case(i):
    pass
"""

TARGET = '''"""A trivial in-process RAG: the answer, and the question's gold support as its one chunk."""


def ask(question, params):
    i = question.split()[0][2:]
    chunk = {"rel_path": f"docs/case{i}.md", "heading_path": f"# Case {i}", "text": f"Note {i}.", "rank": 1}
    return {"answer": f"Note {i} says the budget is {i} ARB.", "references": [chunk], "abstained": False, "debug": {"retrieved_chunks": [chunk]}}
'''

#: the bar: peak RSS over plain pytest's, per case (KB = 1,000 bytes) and at 100,000 cases (MB)
BAR_KB_PER_CASE = 2.0
BAR_MB_AT_100K = 200.0


def write_project(root: Path, n: int) -> None:
    (root / "eval_sets").mkdir(exist_ok=True)
    with (root / "eval_sets" / "big.jsonl").open("w") as fh:
        for i in range(n):
            fh.write(json.dumps(eval_line(i)) + "\n")
    (root / "test_param.py").write_text(PARAM_TEST.format(n=n))
    (root / "trivial.py").write_text(TARGET)
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")


def commands() -> dict[str, list[str]]:
    base = [python(), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    return {
        "parametrize": [*base, "test_param.py"],
        "--rageval": [
            *base,
            "--rageval",
            "eval_sets/big.jsonl",
            "--rageval-target",
            "trivial:ask",
            "--rageval-judge",
            "none",
        ],
    }


def last_line(res: Timed) -> str:
    return next(
        (
            line.strip()
            for line in res.stdout.splitlines()[::-1]
            if " in " in line and ("passed" in line or "failed" in line)
        ),
        "",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", default="10000,50000,100000", help="comma-separated case counts (10000,50000,100000)"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run (1800)")
    args = parser.parse_args()
    counts = [int(c) for c in args.cases.split(",") if c.strip()]

    print(f"N={counts}; {load_note()}; {source_state()}", flush=True)
    env = child_env()
    rows = []
    previous: tuple[int, float] | None = None  # (N, diff) of the row before: the marginal cost per case
    with tempfile.TemporaryDirectory(prefix="rageval-bench-memory-") as tmp:
        root = Path(tmp)
        write_project(root, 50)  # warm-up: bytecode and the assertion-rewrite cache
        for cmd in commands().values():
            run_with_rss(cmd, cwd=root, env=env, timeout=args.timeout)
        for n in counts:
            shutil.rmtree(root / "results", ignore_errors=True)  # each N starts with an empty output folder
            write_project(root, n)
            measured: dict[str, Timed] = {}
            for name, cmd in commands().items():
                res = run_with_rss(cmd, cwd=root, env=env, timeout=args.timeout)
                if res.returncode != 0:
                    print(f"--- {name} N={n}: exit {res.returncode}\n{res.tail()}")
                    return 1
                measured[name] = res
                print(
                    f"N={n} {name}: {res.wall:.1f} s, peak RSS {(res.max_rss_kb or 0) / 1024:.0f} MiB  ({last_line(res)})",
                    flush=True,
                )
            plain = (measured["parametrize"].max_rss_kb or 0) * 1024
            ours = (measured["--rageval"].max_rss_kb or 0) * 1024
            diff = ours - plain
            per_case = diff / n / 1000
            marginal = (
                f"{(diff - previous[1]) / (n - previous[0]) / 1000:.2f}"
                if previous is not None and n > previous[0]
                else "-"
            )
            previous = (n, diff)
            rows.append(
                [
                    f"{n:,}",
                    f"{plain / 2**20:.0f}",
                    f"{ours / 2**20:.0f}",
                    f"{diff / 1e6:.0f}",
                    f"{per_case:.2f}",
                    marginal,
                    f"{measured['parametrize'].wall:.1f}",
                    f"{measured['--rageval'].wall:.1f}",
                    "yes" if per_case <= BAR_KB_PER_CASE else "NO",
                ]
            )
    print()
    print(
        table(
            [
                "N",
                "parametrize MiB",
                "--rageval MiB",
                "diff MB",
                "KB/case over",
                "marginal KB/case",
                "parametrize s",
                "--rageval s",
                f"<= {BAR_KB_PER_CASE:g} KB/case",
            ],
            rows,
        )
    )
    print(f"\nbar: at most {BAR_MB_AT_100K:g} MB over plain pytest at 100,000 cases ({BAR_KB_PER_CASE:g} KB per case)")
    print(f"after: {load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
