"""Bandwidth of softmax kernels against torch.softmax and a device-to-device copy.

    python bench/softmax_bandwidth.py [--out DIR] [--dtypes float32 bfloat16] [--providers ...] [--lengths N ...]

For M = 4096 rows and N from 128 to 65536, then long rows (2^18 and 2^20
elements, with M chosen so that a tensor holds 2^26 elements), in fp32 and
bf16, it times: the full-domain kernel (``kernels/full_softmax/``), the
documents' kernel (``kernels/fused_softmax.py``), torch.softmax, the naive
five-op torch version, the peers whose libraries import (Liger-Kernel,
FlagGems, torch.compile, QuACK: ``kernels/peers.py``, under their registry
names; each peer that cannot run here is named with the reason, and a peer that
fails on a shape is left out of that shape, its error printed), and
``y.copy_(x)``, the practical limit.  GB/s count one read and one write of the
tensor.  Every ratio in the table is between figures measured in this run.
The providers are timed in turn, ROUNDS times over after a round not counted:
the table gives each provider's median, and the spread of the kernel-to-torch
ratio over the rounds, so that a miss within the noise of short kernels shows
as such.  The inputs are randn * 8 (gaps of up to ~80 in a row), and each
kernel's largest error on them, in ulps of fp32 to the float64 softmax, is
measured on the fp32 rows.

Timing: ``triton.testing.do_bench_cudagraph`` over inputs rotated through
four L2 caches' worth of copies (``bench/bandwidth_method.py``, which
``bench/tune_plans.py`` shares).  On a machine without a GPU the script runs
once, tiny, under the Triton interpreter, as a smoke check: its numbers are not
performance.

torch.compile is timed twice: as the suite registers it (``inductor``,
``dynamic=True``, one kernel for every shape) and as most callers meet it
(``inductor_static``, the default compile, specialised to each shape).

Writes ``bandwidth.json`` (the card, its SMs, L2 and memory's peak bandwidth,
with every figure, the copy's among them, so that ratios compare across cards)
and ``bandwidth.png`` to ``--out`` (default ``docs/bench``), and checks the targets of the full kernel: at least
0.95x the fastest of torch, Liger, FlagGems, torch.compile and QuACK at every N, 0.9
of a copy for rows of 1024 to 32768, fp32 errors of at most 4 ulps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

SMOKE = not torch.cuda.is_available()
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bandwidth_method import (LONG_ROWS, M, WIDTHS, card, failure, logits, max_ulps, rotation,  # noqa: E402
                                    shapes, time_ms)
from kernels import full_softmax, fused_softmax, peers  # noqa: E402
from report.figures import pyplot  # noqa: E402
from specs.registry import resolve  # noqa: E402

ROUNDS = 3
# A first round, not counted: on the H100 the first round of a shape ran slower where no ulps
# were measured before it (bf16 rows of 128 to 2048: at N = 512, full_softmax 1073 GB/s, then
# 1306 and 1171; torch 804, then 1035 and 1035).
WARMUP_ROUNDS = 1
# The softmaxes people use, the fastest of which sets the bar.
PEERS = ("torch", "liger", "flag_gems", "inductor", "inductor_static", "quack")
# The registered peers (specs/peers.py), timed where they run: their reasons where not.
REGISTERED_PEERS = ("liger", "flag_gems", "inductor", "quack")
NOT_RUN = {name: why for name in REGISTERED_PEERS if (why := resolve(name).skip_reason("cpu" if SMOKE else "cuda"))}


def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    """The tutorials' five-op version: max, subtract, exp, sum, divide (5 reads, 3 writes)."""
    z = x - x.max(dim=1)[0][:, None]
    numerator = torch.exp(z)
    return numerator / numerator.sum(dim=1)[:, None]


if not SMOKE:
    # A static compile per shape, each of the benchmark's shapes in both dtypes (the default limit, 8,
    # would fall back to eager torch.softmax for later shapes, and the column would time torch).
    torch._dynamo.config.recompile_limit = 4 * (len(WIDTHS) + len(LONG_ROWS))

PROVIDERS = {
    "full_softmax": lambda x: full_softmax.softmax(x, -1),
    "fused_softmax": lambda x: fused_softmax.softmax(x, -1),
    "torch": lambda x: torch.softmax(x, -1),
    "naive": naive_softmax,
    # The peers run where their library imports (and, for FlagGems, Inductor and QuACK, on a GPU).
    **{name: (lambda spec: lambda x: spec.softmax(x, -1))(resolve(name))
       for name in REGISTERED_PEERS if name not in NOT_RUN},
    **({} if SMOKE else {"inductor_static": torch.compile(lambda x: torch.softmax(x, -1), dynamic=False)}),
    "copy": lambda x: torch.empty_like(x).copy_(x),
}
REFUSALS = {"fused_softmax": fused_softmax.LIMITS, "liger": peers.LIGER, "quack": peers.QUACK}  # rows too long


def measure(rows: int, cols: int, dtype: torch.dtype) -> dict:
    nbytes = rows * cols * torch.finfo(dtype).bits // 8
    x = logits(rows, cols, dtype)
    providers = {name: fn for name, fn in PROVIDERS.items()
                 if name not in REFUSALS or REFUSALS[name].refusal(x, -1) is None}
    failed = {name: error for name in REGISTERED_PEERS if name in providers
              and (error := failure(name, lambda: providers[name](x)))}
    providers = {name: fn for name, fn in providers.items() if name not in failed}
    ulps = {}
    if dtype == torch.float32:
        exact = torch.softmax(x.double(), -1)
        ulps = {name: max_ulps(fn(x), exact) for name, fn in providers.items() if name != "copy"}
        del exact
    inputs = rotation(x)
    rounds = {name: [] for name in providers}
    for number in range(WARMUP_ROUNDS + ROUNDS):
        for name, fn in providers.items():
            if name in failed:
                continue
            if number < WARMUP_ROUNDS and name in REGISTERED_PEERS:  # its first time in a CUDA graph
                if error := failure(name, lambda: time_ms(fn, inputs)):
                    failed[name] = error
                continue
            gbps = 2 * nbytes / (time_ms(fn, inputs) * 1e-3) / 1e9
            if number >= WARMUP_ROUNDS:
                rounds[name].append(gbps)
    rounds = {name: gbps for name, gbps in rounds.items() if name not in failed}
    result = {"M": rows, "N": cols, "dtype": str(dtype).removeprefix("torch."), "max_ulps": ulps,
              "gbps": {name: statistics.median(gbps) for name, gbps in rounds.items()}, "rounds": rounds,
              **({"failed": failed} if failed else {})}
    del x, inputs
    torch.cuda.empty_cache()
    return result


def fastest_peer(r: dict) -> str:
    return max((name for name in PEERS if name in r["gbps"]), key=r["gbps"].get)


TARGETS = [
    ("at least 0.95x the fastest of torch, Liger, FlagGems, torch.compile and QuACK, every N", lambda r: True,
     lambda r: r["gbps"]["full_softmax"] >= 0.95 * r["gbps"][fastest_peer(r)]),
    ("at least 90% of copy, N 1024..32768", lambda r: 1024 <= r["N"] <= 32768 and r["M"] == M,
     lambda r: r["gbps"]["full_softmax"] >= 0.9 * r["gbps"]["copy"]),
    ("at least 85% of copy, long rows", lambda r: r["M"] != M, lambda r: r["gbps"]["full_softmax"] >= 0.85 * r["gbps"]["copy"]),
    ("fp32 errors of at most 4 ulps", lambda r: r["max_ulps"], lambda r: r["max_ulps"]["full_softmax"] <= 4),
]


def table(results: list[dict]) -> list[str]:
    names = list(PROVIDERS)
    lines = ["dtype     M      N        " + "".join(f"{n:>14}" for n in names)
             + "   full/fastest peer (rounds)   full/copy  max ulps (full, fastest peer)"]
    for r in results:
        g, peer = r["gbps"], fastest_peer(r)
        cells = "".join(f"{g[n]:>14.0f}" if n in g else f"{'fails' if n in r.get('failed', {}) else 'refuses':>14}"
                        for n in names)
        per_round = [mine / theirs for mine, theirs in zip(r["rounds"]["full_softmax"], r["rounds"][peer])]
        ulps = (f"{r['max_ulps']['full_softmax']:>6.1f}, {r['max_ulps'][peer]:.1f}" if r["max_ulps"] else "")
        lines.append(f"{r['dtype']:<9} {r['M']:<6} {r['N']:<8} {cells}   "
                     f"{g['full_softmax'] / g[peer]:>5.2f}x {peer:<9} ({min(per_round):.2f}-{max(per_round):.2f})"
                     f"  {g['full_softmax'] / g['copy']:>8.2f}  {ulps}")
    return lines


def check_targets(results: list[dict]) -> list[str]:
    lines = []
    for title, applies, holds in TARGETS:
        rows = [r for r in results if applies(r)]
        misses = [f"{r['dtype']} N={r['N']}" for r in rows if not holds(r)]
        lines.append(f"{'met ' if not misses else 'MISSED'}  {title}" + (f": {', '.join(misses)}" if misses else ""))
    return lines


def plot(results: list[dict], path: Path) -> None:
    plt = pyplot()
    dtypes = sorted({r["dtype"] for r in results})
    figure, axes = plt.subplots(1, len(dtypes), figsize=(7 * len(dtypes), 4.5), squeeze=False)
    for axis, dtype in zip(axes[0], dtypes):
        mine = [r for r in results if r["dtype"] == dtype]
        for name in PROVIDERS:
            points = [(r["N"], r["gbps"][name]) for r in mine if name in r["gbps"]]
            axis.plot(*zip(*points), marker="o", label=name)
        axis.set_xscale("log", base=2)
        axis.set(xlabel="N (row length)", ylabel="GB/s (one read + one write)",
                 title=f"{dtype}, M = {M} (long rows: 2^26 elements)")
        axis.legend(fontsize=8)
    figure.suptitle(torch.cuda.get_device_name())
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def not_run() -> list[str]:
    return [f"{name} not timed: {why}" for name, why in NOT_RUN.items()]


def smoke() -> None:
    print("No GPU: a smoke run under the Triton interpreter. These numbers are NOT performance.")
    print("\n".join(not_run()))
    x = torch.randn(64, 300)
    for name, fn in PROVIDERS.items():
        start = time.perf_counter()
        y = fn(x)
        elapsed = time.perf_counter() - start
        error = (y - torch.softmax(x.double(), -1)).abs().max().item() if name != "copy" else 0.0
        print(f"  {name:<14} ran in {elapsed * 1e3:8.1f} ms, max abs error {error:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/bench"))
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--providers", nargs="+", choices=sorted(PROVIDERS),
                        help="time only these, beside full_softmax, torch and the copy (default: every one that runs)")
    parser.add_argument("--lengths", nargs="+", type=int,
                        help="time only rows of these lengths, of the table's (default: every one)")
    args = parser.parse_args()
    measured = [(rows, n) for rows, n in shapes() if n in (args.lengths or [n])]
    if not measured:
        parser.error(f"--lengths: none of {args.lengths} is a row length of the table, {[n for _, n in shapes()]}")
    for name in set(PROVIDERS) - set(args.providers or PROVIDERS) - {"full_softmax", "torch", "copy"}:
        del PROVIDERS[name]
    if SMOKE:
        smoke()
        return
    print("\n".join(not_run()), flush=True)
    results = []
    for dtype in (getattr(torch, name) for name in args.dtypes):
        for rows, n in measured:
            results.append(measure(rows, n, dtype))
        print("\n".join(table(results[-len(measured):])), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    device = card()
    (args.out / "bandwidth.json").write_text(json.dumps({"device": device, "results": results}, indent=1) + "\n")
    plot(results, args.out / "bandwidth.png")
    print(f"\n{device['name']}: {device['sms']} SMs, L2 {device['l2_mib']} MiB, memory peak "
          f"{device['peak_gbps'] or 'unknown'} GB/s; torch {device['torch']}, triton {device['triton']}")
    print("\n".join(table(results)))
    print("\n".join(check_targets(results)))


if __name__ == "__main__":
    main()
