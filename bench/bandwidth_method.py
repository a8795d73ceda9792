"""How the bandwidth of a softmax is measured on a GPU: the shapes, the inputs and the timing, and the fp32
error of what was timed.

Shared by ``bench/softmax_bandwidth.py`` (every provider), ``bench/tune_plans.py``
(full_softmax's candidate plans) and ``bench/cluster_sweep.py``, so that a tuned plan is chosen by the
figures the bench reports.  Timing: ``triton.testing.do_bench_cudagraph``, mean: a CUDA graph of many calls,
replayed ten times, so that neither Python's launch overhead nor the events'
half-microsecond tick weighs on kernels of a few microseconds.  Each call in the graph
reads the next of enough copies of the input, and writes a fresh output, that a copy is
not read again before ``ROTATION_L2`` times the L2 cache has gone through: inputs come
from memory, not from L2, as they would in a model, without a cache flush between calls.
"""

from __future__ import annotations

import itertools
import math

import torch
import triton

from oracles.formats import FP32

WIDTHS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
LONG_ROWS = [1 << 17, 1 << 18, 1 << 19, 1 << 20]
M = 4096  # rows of each width; long rows fill LONG_ROW_ELEMENTS
LONG_ROW_ELEMENTS = 1 << 26
# Inputs rotate through copies filling this many L2 caches: a copy is out of L2 when read again.
ROTATION_L2 = 4
REP_MS = 10  # one replay of the graph: calls enough for about this long
SCALE = 8.0  # logits of randn * 8: gaps large enough that the rounding of x - max shows


def shapes() -> list[tuple[int, int]]:
    """The (rows, row length) measured: M rows of each width, then long rows of LONG_ROW_ELEMENTS in all."""
    return [(M, n) for n in WIDTHS] + [(LONG_ROW_ELEMENTS // n, n) for n in LONG_ROWS]


def logits(rows: int, cols: int, dtype: torch.dtype) -> torch.Tensor:
    """The measured input: randn * SCALE on the GPU, the same for every run."""
    return (torch.randn(rows, cols, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
            * SCALE).to(dtype)


def copies(nbytes: int) -> int:
    """How many copies of inputs of ``nbytes`` fill ROTATION_L2 L2 caches of the current card."""
    return math.ceil(ROTATION_L2 * torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size / nbytes)


def rotation(x: torch.Tensor) -> list[torch.Tensor]:
    """``x`` and enough copies of it to fill ROTATION_L2 L2 caches."""
    return [x] + [x.clone() for _ in range(copies(x.numel() * x.element_size()) - 1)]


def time_ms(fn, inputs: list) -> float:
    """Mean time of one call in a CUDA graph of calls, each on the next of ``inputs``.

    Each output is kept until its slot comes round again, so that outputs rotate through as
    much memory as inputs do: a call writing over the output of the call before would find its
    lines in L2.
    """
    fn(inputs[0])  # compile outside the graph
    outputs = [None] * len(inputs)
    calls = itertools.count()

    def call() -> None:
        slot = next(calls) % len(inputs)
        outputs[slot] = fn(inputs[slot])

    return triton.testing.do_bench_cudagraph(call, rep=REP_MS, return_mode="mean")


def card() -> dict:
    """The card the figures are of, with what makes them comparable across cards: its SMs, L2 and memory's peak
    bandwidth (double data rate times the bus width, where torch reports both)."""
    properties = torch.cuda.get_device_properties(torch.cuda.current_device())
    clock_khz, bus_bits = getattr(properties, "memory_clock_rate", 0), getattr(properties, "memory_bus_width", 0)
    return {"name": properties.name, "sms": properties.multi_processor_count,
            "l2_mib": round(properties.L2_cache_size / 2**20, 1),
            "peak_gbps": round(2 * clock_khz * 1e3 * bus_bits / 8 / 1e9) if clock_khz and bus_bits else None,
            "torch": torch.__version__, "triton": triton.__version__}


def failure(name: str, call) -> str | None:
    """None where ``call()`` runs on the GPU; else its error, printed: a peer's library that fails on a shape leaves
    that shape only, and the rest of the run goes on."""
    try:
        call()
        torch.cuda.synchronize()
    except Exception as error:  # noqa: BLE001  (each library fails in its own way)
        message = f"{type(error).__name__}: {error}"[:300]
        print(f"  {name} fails: {message}", flush=True)
        return message
    return None


def max_ulps(y: torch.Tensor, exact: torch.Tensor) -> float:
    """The largest error of an fp32 output, in ulps of fp32 at the float64 softmax ``exact``.

    The ulp is oracles.formats.ulp's, the spacing of the binade ``exact`` lies in, computed here
    on the GPU: the oracle's numpy takes seconds on each 2^26-element output.
    """
    _, e = torch.frexp(exact)  # |exact| = m * 2^e, m in [0.5, 1)
    exponent = torch.where(exact == 0, FP32.emin, (e - 1).clamp(min=FP32.emin))
    ulp = torch.ldexp(torch.ones_like(exact), exponent - FP32.precision + 1)
    return ((y.double() - exact).abs() / ulp).max().item()
