"""Host time of a repeated full_softmax call, against a bare Triton launch of the same kernel.

    python bench/host_path.py [--calls 3000]

A tiny input (4 x 128 fp32), so that the GPU finishes each kernel long before
the host issues the next and the time per call is the host's: Python, the
checks and the plan (skipped for a repeated call), ``torch.empty`` for the
output, and the launch.  Timed: ``full_softmax.softmax``; the bare launch that
its first call made, ``contiguous_rows_kernel[grid](...)``, with the output
preallocated; ``torch.empty`` alone; ``torch.softmax``.  Medians of five
rounds, all in this run.  The target: a repeated call at most 1.3x
the bare launch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernels import full_softmax  # noqa: E402
from kernels.full_softmax.launch_cache import CONTIGUOUS_CALLS, call_key  # noqa: E402
from kernels.full_softmax.triton_code import contiguous_rows_kernel  # noqa: E402

ROUNDS = 5
TARGET = 1.3


def microseconds_per_call(fn, calls: int) -> float:
    for _ in range(calls // 10):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("No GPU: host_path times launches on a GPU; nothing to measure here.")
        return
    x = torch.randn(4, 128, device="cuda")
    y = torch.empty_like(x)
    first = full_softmax.softmax(x)
    launch = CONTIGUOUS_CALLS[call_key(x, -1, False, None)]
    bare = contiguous_rows_kernel[launch.grid]
    assert torch.equal(full_softmax.softmax(x), first), "a repeated call changed the result"
    repeated, bare_launch = "full_softmax.softmax(x), repeated", "bare launch, contiguous_rows_kernel[grid](...)"
    calls = {
        repeated: lambda: full_softmax.softmax(x),
        bare_launch: lambda: bare(y, x, *launch.sizes, **launch.tile),
        "torch.empty alone": lambda: torch.empty(x.shape, dtype=x.dtype, device=x.device),
        "torch.softmax(x)": lambda: torch.softmax(x, -1),
    }
    rounds = {name: [] for name in calls}
    for _ in range(ROUNDS):
        for name, fn in calls.items():
            rounds[name].append(microseconds_per_call(fn, args.calls))
    medians = {name: statistics.median(times) for name, times in rounds.items()}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {__import__('triton').__version__}")
    for name, us in medians.items():
        print(f"  {name:<48} {us:7.2f} us a call  (rounds {min(rounds[name]):.2f}-{max(rounds[name]):.2f})")
    ratio = medians[repeated] / medians[bare_launch]
    verdict = "met " if ratio <= TARGET else "MISSED"
    print(f"{verdict}  a repeated call {ratio:.2f}x a bare launch (target <= {TARGET}x)")


if __name__ == "__main__":
    main()
