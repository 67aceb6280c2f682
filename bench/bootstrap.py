"""Time of the gate's paired bootstrap over 5,000 cases: the one stdlib random source against the former numpy path.

The gate (gate/statistics.py ``bootstrap_interval``) draws ``samples`` resamples of the
paired per-case differences with ``random.Random(seed)`` only, so an interval
is the same in every process whether numpy is importable or not. Before, runs
of more than 2,000,000 draws (cases x samples) used numpy's
``default_rng(seed)`` when it was importable; that path is reproduced here
(it needs numpy) to print the ratio. Best of R runs each, interleaved.

    python bench/bootstrap.py                      # 5000 cases, 1000 samples, best of 5
    python bench/bootstrap.py --cases 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_rageval.gate.aggregate import percentile
from pytest_rageval.gate.statistics import bootstrap_interval

Interval = tuple[float | None, float | None] | None  # percentile() is None for no samples


def numpy_interval(diffs: list[float], samples: int, seed: int) -> Interval:
    """The former large-input path: numpy's ``default_rng(seed)``, chunks of at most 2,000,000 draws."""
    import numpy as np

    data = np.asarray(diffs, dtype=float)
    n = len(diffs)
    rng = np.random.default_rng(seed)
    per_chunk = max(1, 2_000_000 // n)
    means: list[float] = []
    while len(means) < samples:
        rows = min(per_chunk, samples - len(means))
        means.extend(data[rng.integers(0, n, size=(rows, n))].mean(axis=1).tolist())
    means.sort()
    return percentile(means, 2.5), percentile(means, 97.5)


def best(fn: Callable[[], Interval], repeat: int) -> tuple[float, Interval]:
    """Fastest wall time of ``repeat`` calls, and the interval."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5_000, help="paired cases (5000)")
    parser.add_argument("--samples", type=int, default=1_000, help="bootstrap resamples, the gate's default (1000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each, best kept (5)")
    args = parser.parse_args()
    rnd = random.Random(1)
    diffs = [rnd.choice((-1.0, -0.5, 0.0, 0.0, 0.0, 0.5, 1.0)) + rnd.random() / 10 for _ in range(args.cases)]
    stdlib_s, stdlib = best(lambda: bootstrap_interval(diffs, samples=args.samples, seed=0), args.repeat)
    print(f"{args.cases} cases x {args.samples} samples")
    print(f"stdlib random.Random (now, every environment): {stdlib_s:.3f} s  interval {stdlib}")
    try:
        numpy_s, former = best(lambda: numpy_interval(diffs, args.samples, 0), args.repeat)
    except ImportError:
        print("numpy is not importable: no former path to compare with")
        return 0
    print(f"numpy default_rng (before, when importable):   {numpy_s:.3f} s  interval {former}")
    print(f"ratio now / before: {stdlib_s / numpy_s:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
