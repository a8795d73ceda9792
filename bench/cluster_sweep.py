"""Long softmax rows over a thread-block cluster (bench/cluster_kernels.py): every (blocks, warps, tile) timed.

Needs Triton 3.9 or later (Gluon's cluster layouts) and a CUDA card of sm_90 or later.  For fp32 and bf16 rows
of 2^15 to 2^20 (the bench's shapes, ``bench/bandwidth_method.py``), it times a copy, torch.softmax,
full_softmax, QuACK where it imports, and the kernels of ``bench/cluster_kernels.py`` and full_softmax's cluster
kernel in every setting that fits (a span held in registers at 16 to 128 elements a thread; a span reread in tiles;
a span staged in shared memory in 1 to 64 tiles, the blocks meeting in a cluster or, spans of 16 to 128 KB,
through global memory; a span of 64 or 128 KB partly held in registers, partly staged), each checked against the
float64 softmax of its first rows (fp32: the largest error in ulps).  Prints a line per row length and writes
``--out`` (JSON), as it goes.

    python bench/cluster_sweep.py --out sweep.json
    python bench/cluster_sweep.py --compile-only   # any machine with Triton 3.9: compile for sm_90, show the exchange
    python bench/cluster_sweep.py --check-grid     # the grid kernel's bits, whether its blocks wait or read
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bandwidth_method import card, logits, max_ulps, rotation, time_ms  # noqa: E402
from bench.cluster_kernels import (GRID_WAIT_NS, exchange_of, grid_kernel, held_kernel, launch,  # noqa: E402
                                   launch_grid, reread_kernel)
from kernels.full_softmax.arithmetic import HALF_RECIPROCAL, PRECISE  # noqa: E402
from kernels.full_softmax.cluster_code import VECTOR_BYTES, cluster_kernel, cluster_layout  # noqa: E402
from kernels.full_softmax.triton_code import FIXED_POINT_COLUMNS  # noqa: E402
from kernels.full_softmax.cuda_plan import (GPU_MAX_REGISTERS, HOPPER_CLUSTERS, blocks_per_sm,  # noqa: E402
                                            register_limit)
from kernels import peers  # noqa: E402
from kernels.launch import HAS_CLUSTER_LAYOUTS  # noqa: E402
from kernels.full_softmax import softmax as full_softmax  # noqa: E402

LENGTHS = [1 << k for k in range(15, 21)]
STAGED_BYTES = 200 * 1024  # a block's span in shared memory: of the H100's 227 KB a block, room for the rest
OTHER_REGISTERS = 40  # the registers a thread takes beside the held values (a limit below them would spill)
GRID_SPAN_BYTES = (16384, 131072)  # a block's span over the grid: 12 blocks an SM to one
ELEMENTS = 1 << 26  # rows of a length: this many elements in all, at least 2048 rows of the shorter


def rows_of(n: int) -> int:
    return max(ELEMENTS // n, 2048 if n <= 1 << 16 else 1)


def settings(n: int, element_size: int) -> list[tuple]:
    """("held", C, warps, None) at 16 to 128 elements a thread; ("reread", 16, warps, tile) for rows of 2^19 and more;
    each also with "-merged" and "-posted" exchanges (bench/cluster_kernels.py); ("staged-posted", C, warps, tile)
    where a block's span fits its shared memory in 1 to 64 tiles (fp32: at most 32768 values, its exact sum's
    limit), and ("staged-grid", G, warps, tile) where it also takes GRID_SPAN_BYTES."""
    vector = VECTOR_BYTES // element_size
    found = []
    for ctas in (1, 2, 4, 8, 16):
        for warps in (4, 8, 16, 32):
            if max(16, vector) <= n // (ctas * warps * 32) <= 128:
                found.append(("held", ctas, warps, None))
    if n >= 1 << 19:
        for warps in (4, 8, 16):
            for pieces in (1, 4):
                found.append(("reread", 16, warps, warps * 32 * vector * pieces))
    found += [(f"{kind}-{exchange}", *rest) for exchange in ("merged", "posted") for kind, *rest in found]
    for kind, most in (("staged-posted", 16), ("staged-grid", 256)):
        for ctas in (2, 4, 8, 16, 32, 64, 128, 256):
            for warps in (4, 8, 16):
                for pieces in (1, 2):
                    tile = warps * 32 * vector * pieces
                    span_bytes = n // ctas * element_size
                    if (ctas <= most and span_bytes <= STAGED_BYTES and 1 <= n // (ctas * tile) <= 64
                            and (element_size == 2 or n // ctas <= FIXED_POINT_COLUMNS.value)
                            and (kind == "staged-posted" or GRID_SPAN_BYTES[0] <= span_bytes <= GRID_SPAN_BYTES[1])):
                        found.append((kind, ctas, warps, tile))
    return found + held_settings(n, element_size)


def held_settings(n: int, element_size: int) -> list[tuple]:
    """("staged-held", C, warps, tile, held, even, registers): full_softmax's cluster kernel with a span of 64 or
    128 KB, its first ``held`` columns (0, a quarter or half of it) in registers and the rest staged; ``even``
    whether its masks fold away (rows of C x span; also without, where nothing is held: the path before it folded
    them); ``registers`` a thread's limit for the most blocks an SM's shared memory and registers hold (None: the
    compiler's choice)."""
    vector = VECTOR_BYTES // element_size
    found = []
    for ctas in (8, 16):
        span = n // ctas
        if span * element_size not in (65536, 131072) or (element_size == 4 and span > FIXED_POINT_COLUMNS.value):
            continue
        for warps in (4, 8, 16):
            threads = warps * 32
            tile = threads * vector * 2  # two 16-byte copies a thread, as the cluster path's settings take
            for held in (0, span // 4, span // 2):
                staged_bytes = (span - held) * element_size
                if held % tile:
                    continue
                held_registers = held * element_size // 4 // threads
                blocks = min(blocks_per_sm(HOPPER_CLUSTERS, staged_bytes), 4)
                max_registers = register_limit(HOPPER_CLUSTERS, blocks, threads)
                fits = max(64, held_registers + OTHER_REGISTERS) <= max_registers < GPU_MAX_REGISTERS
                limits = {None} | ({max_registers} if fits else set())
                for registers in sorted(limits, key=lambda r: r or 256):
                    for even in ((True, False) if held == 0 and registers is None else (True,)):
                        found.append(("staged-held", ctas, warps, tile, held, even, registers))
    return found


def compile_one(job: tuple) -> str:
    """Compile a setting by launching it on one row (a worker process: the compiles fill Triton's cache)."""
    n, dtype, setting = job
    x = torch.randn(1, n, device="cuda", dtype=dtype)
    try:
        launch(setting, x, torch.empty_like(x))
        torch.cuda.synchronize()
        return ""
    except Exception as error:  # noqa: BLE001  (a setting that does not compile or launch is reported)
        return f"{type(error).__name__}: {str(error).splitlines()[-1][:200] if str(error) else ''}"


KERNELS = {"held": held_kernel, "reread": reread_kernel, "staged-posted": cluster_kernel, "staged-grid": grid_kernel,
           "staged-held": cluster_kernel}
CLUSTER_CODE = ("barrier.cluster.arrive", "shared::cluster", ".reqnctapercluster")  # PTX of the exchange
GRID_CODE = ("fence.release.gpu", "globaltimer")  # of the exchange through global memory: the flag, the wait
SIGNATURE = {"y_ptr": None, "x_ptr": None, "n_cols": "i32", "size1": "i64", "size2": "i64", "xs0": "i64",
             "xs1": "i64", "xs2": "i64", "xsd": "i64", "ys0": "i64", "ys1": "i64", "ys2": "i64", "ysd": "i64",
             "pairs_ptr": None, "flags_ptr": "*i32", "wait_ns": "i64", "row_stride_x": "i64", "row_stride_y": "i64"}
COMPILED = [(("held", 16, 8, None), "fp32"), (("reread", 16, 8, 2048), "bf16"), (("held-merged", 16, 8, None), "fp32"),
            (("held-posted", 16, 8, None), "fp32"), (("reread-posted", 16, 8, 2048), "bf16"),
            (("staged-posted", 16, 8, 2048), "fp32"), (("staged-posted", 16, 4, 2048), "bf16"),
            (("staged-posted", 16, 4, 2048), "bf16-strided"),  # staged by loads, not cp.async
            (("staged-grid", 16, 4, 2048), "fp32"), (("staged-grid", 8, 8, 4096), "bf16"),  # no cluster: GRID_CODE
            (("staged-held", 8, 8, 2048, 16384, True, 128), "fp32"),
            (("staged-held", 8, 8, 2048, 8192, False, 128), "fp32"),  # held columns masked
            (("staged-held", 8, 16, 8192, 16384, True, None), "bf16"),
            (("staged-held", 8, 8, 4096, 8192, False, 128), "bf16-strided")]  # held and staged by loads


def constants_of(setting: tuple, dtype: str) -> dict:
    """The constexprs of a setting's kernel for rows of 2^18 of ``dtype`` ("bf16-strided": columns of any stride)."""
    kind, ctas, warps, tile = setting[:4]
    element_size = 4 if dtype == "fp32" else 2
    unit = not dtype.endswith("strided")
    constants = {"C": ctas, "SPAN": (1 << 18) // ctas, "LAYOUT": cluster_layout(ctas, warps, element_size),
                 "ALIGNED": True, "UNIT": unit} | ({"xsd": 1, "ysd": 1} if unit else {})
    arith = (PRECISE if dtype == "fp32" else HALF_RECIPROCAL).value
    if kind == "staged-grid":
        return {"G": ctas, "SPAN": (1 << 18) // ctas, "TILE": tile, "LAYOUT": cluster_layout(1, warps, element_size),
                "ARITH": arith, "ALIGNED": True, "ASYNC": unit}
    if kind == "staged-posted":
        return constants | {"TILE": tile, "ARITH": arith, "ASYNC": unit, "HELD": 0, "EVEN": True}
    if kind == "staged-held":
        return constants | {"TILE": tile, "ARITH": arith, "ASYNC": unit, "HELD": setting[4], "EVEN": setting[5]}
    return constants | {"PRECISE": dtype == "fp32", "EXCHANGE": exchange_of(kind)} | ({"TILE": tile} if tile else {})


def compile_only() -> bool:
    """Compile each kernel for sm_90 without a GPU; print the cluster code its PTX holds.  True if all hold it."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    complete = True
    for setting, dtype in COMPILED:
        kind, ctas, warps, _ = setting[:4]
        constants = constants_of(setting, dtype)
        kernel = KERNELS.get(kind) or KERNELS[kind.partition("-")[0]]
        pointer = f"*{dtype.partition('-')[0]}"
        types = dict(SIGNATURE, y_ptr=pointer, x_ptr=pointer, pairs_ptr="*fp64" if dtype == "fp32" else "*fp32",
                     **{name: "constexpr" for name in constants})
        signature = {name: types[name] for name in kernel.arg_names}
        # The pointers and the row length specialised as multiples of 16, as a launch of the sweep's rows finds them.
        source = GluonASTSource(fn=kernel, signature=signature, constexprs=constants,
                                attrs={(index,): [["tt.divisibility", 16]] for index in (0, 1, 2)})
        ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                             options={"num_warps": warps, "num_ctas": constants.get("C", 1),
                                      "maxnreg": setting[6] if kind == "staged-held" else None}).asm["ptx"]
        exchange = GRID_CODE if kind == "staged-grid" else CLUSTER_CODE
        found = {code: ptx.count(code) for code in exchange + ("cp.async.cg",)}
        complete &= all(found[code] for code in exchange) and (found["cp.async.cg"] > 0) == (
            kind.startswith("staged") and not dtype.endswith("strided"))
        print(f"{kind} {dtype} {ctas} blocks x {warps} warps: compiled for sm_90; exchange code {found}", flush=True)
    return complete


def rows_with_seams(n: int, span: int, dtype: torch.dtype) -> torch.Tensor:
    """Rows of n at a span's seams: plain logits; a first span of -inf; -inf but for the last value; a NaN in the
    last span; a +inf in the middle; logits 80 apart across a span's end."""
    x = torch.randn(6, n, device="cuda", generator=torch.Generator(device="cuda").manual_seed(5)) * 4
    x[1, :span] = -float("inf")
    x[2, :-1] = -float("inf")
    x[3, -1] = float("nan")
    x[4, n // 2] = float("inf")
    x[5, span:] -= 80
    return x.to(dtype)


def check_grid() -> bool:
    """grid_kernel's blocks that read the spans whose pairs have not come give the bits of blocks that wait: rows
    of 2^19 at a span's seams (aligned, staged by cp.async, and 5 shorter, staged by loads; fp32 and bf16), run
    with the default wait, with none (most blocks then read others' spans), and again.  True if all agree, and
    NaN stands where torch's float64 softmax has it."""
    blocks = 32
    agree = True
    for dtype, warps in ((torch.float32, 4), (torch.bfloat16, 8)):
        for n in (1 << 19, (1 << 19) - 5):
            x = rows_with_seams(n, (1 << 19) // blocks, dtype)
            outputs = []
            for wait_ns in (GRID_WAIT_NS, 0, GRID_WAIT_NS):
                y = torch.empty_like(x)
                launch_grid(y, x, blocks=blocks, tile=warps * 32 * VECTOR_BYTES // x.element_size(), num_warps=warps,
                            wait_ns=wait_ns)
                outputs.append(y.view(torch.int16 if dtype == torch.bfloat16 else torch.int32))
            waited, read, again = outputs
            nan = torch.equal(waited.view(dtype).isnan(), torch.softmax(x.double(), -1).isnan())
            differ = [int((waited[r] != read[r]).sum()) for r in range(x.shape[0])]
            same = torch.equal(waited, again) and not any(differ) and nan
            agree &= same
            print(f"{str(dtype)[6:]} rows of {n}: {'same bits' if same else 'DIFFER'} (elements that differ a row "
                  f"with no wait: {differ}; run twice equal: {torch.equal(waited, again)}; NaN as torch: {nan})",
                  flush=True)
    return agree


def error_of(y: torch.Tensor, exact: torch.Tensor) -> float:
    """fp32: largest error in ulps; bf16: largest error relative to the largest output."""
    if y.dtype == torch.float32:
        return max_ulps(y, exact)
    return ((y.double() - exact).abs().max() / exact.abs().max()).item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("cluster_sweep.json"))
    parser.add_argument("--lengths", type=int, nargs="*", default=LENGTHS)
    parser.add_argument("--kinds", nargs="*", help="time only these kinds of setting (held, reread-posted, "
                        "staged-posted, ...; none: full_softmax and its peers alone)")
    parser.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    parser.add_argument("--compile-only", action="store_true", help="compile for sm_90 without a GPU")
    parser.add_argument("--check-grid", action="store_true", help="check that grid_kernel's blocks reading each "
                        "other's spans give the bits of blocks that wait (a card of sm_90 or later)")
    args = parser.parse_args()
    if not HAS_CLUSTER_LAYOUTS:
        sys.exit(f"Triton {triton.__version__} has no cluster layouts: the kernels need Triton 3.9 or later")
    if args.compile_only:
        sys.exit(0 if compile_only() else 1)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        sys.exit("no CUDA card of sm_90 or later here: the sweep times clusters on one (--compile-only needs none)")
    if args.check_grid:
        sys.exit(0 if check_grid() else 1)
    quack = None
    try:
        importlib.import_module("quack")
        quack = (peers.quack_softmax, peers.QUACK_MAX_ROW)
    except Exception as error:  # noqa: BLE001  (QuACK is timed where it imports)
        print(f"QuACK not timed: {type(error).__name__}: {error}", flush=True)
    print(json.dumps(card()), flush=True)
    jobs = [(n, dtype, s) for dtype in (torch.float32, torch.bfloat16) for n in args.lengths
            for s in settings(n, torch.finfo(dtype).bits // 8) if not args.kinds or s[0] in args.kinds]
    torch.multiprocessing.set_start_method("spawn", force=True)
    with ProcessPoolExecutor(args.workers) as pool:
        compiled = dict(zip(jobs, pool.map(compile_one, jobs)))
    results = {"card": card(), "rows": []}
    for dtype in (torch.float32, torch.bfloat16):
        for n in args.lengths:
            rows = rows_of(n)
            x = logits(rows, n, dtype)
            moved = 2 * x.numel() * x.element_size()
            exact = torch.softmax(x[:4].double(), -1)
            inputs = rotation(x)
            providers = {"copy": lambda t: torch.empty_like(t).copy_(t), "torch": lambda t: torch.softmax(t, -1),
                         "full_softmax": lambda t: full_softmax(t, -1)}
            if quack and n <= quack[1]:
                providers["quack"] = quack[0]
            tried = [s for s in settings(n, x.element_size()) if not args.kinds or s[0] in args.kinds]
            for s in tried:
                if not compiled[(n, dtype, s)]:
                    providers[s] = (lambda s: lambda t: _run(s, t))(s)
            line = {"dtype": str(dtype)[6:], "n": n, "rows": rows}
            for name, fn in providers.items():
                try:
                    error = None if name == "copy" else error_of(fn(x[:4]), exact)
                    ms = time_ms(fn, inputs)
                    line[str(name)] = {"gbps": round(moved / ms / 1e6), "error": error}
                except Exception as failure:  # noqa: BLE001
                    line[str(name)] = {"failed": f"{type(failure).__name__}: {str(failure)[:200]}"}
            for s in tried:
                if compiled[(n, dtype, s)]:
                    line[str(s)] = {"failed": compiled[(n, dtype, s)]}
            copy = line["copy"]["gbps"]
            summary = sorted(((v["gbps"] / copy, k) for k, v in line.items() if isinstance(v, dict) and "gbps" in v),
                             reverse=True)
            print(f"{line['dtype']} n={n}: " + " | ".join(f"{k} {r:.3f}" + (
                f" e={line[k]['error']:.3g}" if line[k].get("error") is not None else "") for r, k in summary),
                flush=True)
            results["rows"].append(line)
            args.out.write_text(json.dumps(results, indent=1))  # as it goes: a sweep cut short keeps its lines
            del inputs, x
            torch.cuda.empty_cache()


def _run(setting: tuple, x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    launch(setting, x, y)
    return y


if __name__ == "__main__":
    main()
