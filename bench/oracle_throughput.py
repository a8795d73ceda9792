"""Throughput of the correctly rounded oracle on one core: tier 2 alone vs the two-tier oracle.

    python bench/oracle_throughput.py [--rows 256] [--mp-rows 2] [--n 4096]

Both run on fp32 rows of randn * 4 (n = 4096 by default) in this process, one
after the other; the ratio is of figures measured in this run.  Tier 2 alone
(``oracles/mp_softmax.py``: every element of a row decided by the interval Ziv
loop) is timed on a few rows only (tens of us per element); its rate does not
depend on the number of rows.
"""

import argparse
import os
import sys
import time
from pathlib import Path

for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = "1"  # one core, before numpy loads

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracles.correctly_rounded import softmax_rows  # noqa: E402
from oracles.formats import FP32  # noqa: E402
from oracles.mp_softmax import correctly_rounded_rows  # noqa: E402


def rate(function, rows: np.ndarray, repeats: int) -> tuple[float, object]:
    """Elements per second, the median of ``repeats`` timed runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function(rows)
        times.append(time.perf_counter() - start)
    return rows.size / float(np.median(times)), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256, help="rows for the two-tier oracle")
    parser.add_argument("--mp-rows", type=int, default=2, help="rows for tier 2 alone")
    parser.add_argument("--n", type=int, default=4096, help="row length")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = (rng.standard_normal((args.rows, args.n)) * 4).astype(np.float32).astype(np.float64)
    softmax_rows(rows[:1], FP32)  # warm up imports and caches
    fast_rate, fast = rate(lambda r: softmax_rows(r, FP32), rows, repeats=5)
    slow_rate, (slow, _) = rate(lambda r: correctly_rounded_rows(r, FP32), rows[: args.mp_rows], repeats=1)
    if not np.array_equal(fast.rounded[: args.mp_rows], slow):
        raise SystemExit("the two oracles disagree: not a benchmark, a bug")
    print(f"fp32 rows of {args.n}, one core")
    print(f"  tier 2 alone (interval Ziv loop): {slow_rate:12,.0f} elements/s  ({args.mp_rows} rows)")
    print(f"  two-tier oracle:                  {fast_rate:12,.0f} elements/s  ({args.rows} rows, median of 5)")
    print(f"  ratio two-tier / tier 2:          {fast_rate / slow_rate:12,.0f}x")
    print(f"  escalation rate:                  {fast.escalation_rate:12.2e}  ({fast.escalated} of {fast.rounded.size})")


if __name__ == "__main__":
    main()
