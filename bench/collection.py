"""Collection cost of a 50,000-line eval set against 50,000 parametrized trivial tests.

Writes a temp project holding `eval_sets/big.jsonl` (N answerable lines with a
gold support and a reference answer) and `test_param.py`
(`@pytest.mark.parametrize("i", range(N))` over a test that does nothing), then
times, best of R runs each:

    python -m pytest --collect-only -q -p no:cacheprovider --rageval eval_sets/big.jsonl
    python -m pytest --collect-only -q -p no:cacheprovider test_param.py

and reports both wall times (the whole subprocess: interpreter start-up and
plugin loading included), their ratio (bar: eval set / parametrize <= 2) and
each run's peak RSS (os.wait4 of the child). Nothing is sent anywhere: the
target URL in pyproject.toml points at a closed loopback port and collection
makes no request.

    python bench/collection.py                 # N=50000, best of 3
    python bench/collection.py --lines 10000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import child_env, load_note, python, run_with_rss, source_state, table
from servers import eval_line

PARAM_TEST = """import pytest


@pytest.mark.parametrize("i", range({n}))
def test_case(i):
    pass
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000, help="eval-set lines and parametrized cases (50000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, best kept (3)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run (120)")
    args = parser.parse_args()
    n = args.lines

    print(f"N={n}; {load_note()}; {source_state()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="rageval-bench-collect-") as tmp:
        root = Path(tmp)
        (root / "eval_sets").mkdir()
        with (root / "eval_sets" / "big.jsonl").open("w") as fh:
            for i in range(n):
                fh.write(json.dumps(eval_line(i)) + "\n")
        (root / "test_param.py").write_text(PARAM_TEST.format(n=n))
        (root / "pyproject.toml").write_text(
            '[tool.pytest.ini_options]\nrageval_target = "http://127.0.0.1:9/api/v1/ask"\n'
        )
        base = [python(), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        commands = {
            "eval set (--rageval)": [*base, "--rageval", "eval_sets/big.jsonl"],
            "parametrize": [*base, "test_param.py"],
        }
        results: dict[str, list[Any]] = {name: [] for name in commands}
        env = child_env()
        # Warm-up (bytecode, assertion-rewrite cache), then interleave the two so drift hits both alike.
        for cmd in commands.values():
            run_with_rss(cmd, cwd=root, env=env, timeout=args.timeout)
        for _ in range(args.repeat):
            for name, cmd in commands.items():
                res = run_with_rss(cmd, cwd=root, env=env, timeout=args.timeout)
                if res.returncode != 0:
                    print(f"--- {name}: exit {res.returncode}\n{res.tail()}")
                    return 1
                collected = next(
                    (
                        line
                        for line in res.stdout.splitlines()[::-1]
                        if "collected" in line or "tests collected" in line
                    ),
                    "",
                )
                assert res.max_rss_kb is not None  # run_with_rss always measures it
                results[name].append((res.wall, res.max_rss_kb, collected.strip()))
                print(f"{name}: {res.wall:.2f} s, {res.max_rss_kb / 1024:.0f} MiB  ({collected.strip()})", flush=True)

    best = {name: min(runs, key=lambda r: r[0]) for name, runs in results.items()}
    ev, par = best["eval set (--rageval)"], best["parametrize"]
    rows = [
        [
            name,
            f"{b[0]:.2f}",
            f"{max(r[0] for r in results[name]):.2f}",
            f"{max(r[1] for r in results[name]) / 1024:.0f}",
            b[2],
        ]
        for name, b in best.items()
    ]
    print()
    print(table(["collect", "best s", "worst s", "peak RSS MiB", "pytest says"], rows))
    ratio = ev[0] / par[0]
    print(f"\nratio eval set / parametrize: {ratio:.2f}  (bar <= 2: {'yes' if ratio <= 2 else 'NO'})")
    phase = [re.search(r"in ([0-9.]+)s", b[2]) for b in (ev, par)]
    if all(phase):
        a, b = (float(m.group(1)) for m in phase if m)
        print(
            f"collection phase only (pytest's own 'collected in'): {a:.2f} s / {b:.2f} s = {a / b:.2f} "
            f"(wall also holds start-up and the end of the session: garbage collection and interpreter exit)"
        )
    print(
        f"RSS ratio: {max(r[1] for r in results['eval set (--rageval)']) / max(r[1] for r in results['parametrize']):.2f}"
    )
    print(f"after: {load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
