"""What the installed-but-idle plugin costs an unrelated pytest run.

A temp project with one trivial test is run with
`python -m pytest -q -p no:cacheprovider` (the plugin loads through its pytest11
entry point and stays idle: no --rageval) and with `-p no:rageval` (the plugin
is blocked, so its module is never imported), best of R runs each,
interleaved; prints both, the ratio (bar: <= 1.3) and
`python -X importtime -c "import pytest_rageval.plugin"`: the pytest_rageval
modules' own import time, and the cumulative time of the import (pytest
included, which every pytest run imports anyway).

    python bench/startup.py              # best of 10
    python bench/startup.py --repeat 20
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import child_env, load_note, python, run_timed, source_state, table

IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def importtime(env: dict[str, str]) -> tuple[list[tuple[str, int, int]], int]:
    """(module, self us, cumulative us) of pytest_rageval modules, and the cumulative us of the whole import."""
    proc = subprocess.run(
        [python(), "-X", "importtime", "-c", "import pytest_rageval.plugin"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    mods: list[tuple[str, int, int]] = []
    total = 0
    for line in proc.stderr.splitlines():
        found = IMPORT_LINE.match(line)
        if not found:
            continue
        self_us, cum_us, indent, name = int(found.group(1)), int(found.group(2)), found.group(3), found.group(4)
        if name.startswith("pytest_rageval"):
            mods.append((name, self_us, cum_us))
        if len(indent) == 1:  # a top-level import of the -c statement
            total += cum_us
    return mods, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs of each, best kept (10)")
    args = parser.parse_args()
    print(f"{load_note()}; {source_state()}", flush=True)
    env = child_env()
    with tempfile.TemporaryDirectory(prefix="rageval-bench-startup-") as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n")
        (root / "test_unrelated.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
        base = [python(), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        commands = {"plugin installed, idle": base, "-p no:rageval": [*base, "-p", "no:rageval"]}
        times: dict[str, list[float]] = {name: [] for name in commands}
        for cmd in commands.values():  # warm-up
            run_timed(cmd, cwd=root, env=env, timeout=60)
        for _ in range(args.repeat):
            for name, cmd in commands.items():
                res = run_timed(cmd, cwd=root, env=env, timeout=60)
                if res.returncode != 0 or "1 passed" not in res.stdout:
                    print(f"--- {name}: exit {res.returncode}\n{res.tail()}")
                    return 1
                times[name].append(res.wall)
        # -p no:rageval really keeps the module out (else the comparison means nothing)
        probe = subprocess.run(
            [*base, "-p", "no:rageval", "--help"], cwd=root, env=env, capture_output=True, text=True, timeout=60
        )
        blocked = "--rageval" not in probe.stdout

    rows = [[name, f"{min(t):.3f}", f"{sorted(t)[len(t) // 2]:.3f}", f"{max(t):.3f}"] for name, t in times.items()]
    print()
    print(table(["run", "best s", "median s", "worst s"], rows))
    idle, off = min(times["plugin installed, idle"]), min(times["-p no:rageval"])
    ratio = idle / off
    print(
        f"\nratio idle / -p no:rageval (best of {args.repeat}): {ratio:.3f}  (bar <= 1.3: {'yes' if ratio <= 1.3 else 'NO'});"
        f" difference {1000 * (idle - off):.0f} ms; -p no:rageval blocks the plugin: {'yes' if blocked else 'NO'}"
    )

    mods, total = importtime(env)
    own = sum(s for _, s, _ in mods)
    print(
        f"\npython -X importtime -c 'import pytest_rageval.plugin': pytest_rageval modules {own / 1000:.1f} ms "
        f"(self time, {len(mods)} modules), whole import {total / 1000:.1f} ms (pytest included)"
    )
    print(
        table(["module", "self ms", "cumulative ms"], [[m, f"{s / 1000:.1f}", f"{c / 1000:.1f}"] for m, s, c in mods])
    )
    print(f"after: {load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
