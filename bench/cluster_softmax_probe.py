"""Can Triton hold a long softmax row in a thread-block cluster, and how fast is the plainest such kernel?

The row is one Gluon block laid out over ``C`` blocks of a cluster (``gl.BlockedLayout``'s ``cga_layout``, launched
with ``num_ctas=C``): max, exp, sum, divide, the compiler doing the exchange between the blocks through distributed
shared memory.  Triton 3.6 stopped at ``isReduceWithinCTA`` (docs/speed.md); this probe asks a newer Triton.

    python bench/cluster_softmax_probe.py --compile-only   # any machine: compile for sm_90 and look for cluster code
    python bench/cluster_softmax_probe.py                  # a CUDA GPU: run, check against float64, time a copy

On the GPU it prints, per dtype and row length (2^15 to 2^20, 2^26 elements a call), the GB/s of a copy of the same
bytes, torch.softmax, full_softmax and the cluster kernel for each cluster size and warp count that fits, with its
largest relative error to torch's float64 softmax on the first rows.
"""

import argparse
import re
import sys
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLUSTER_CODE = ("mapa", "shared::cluster", "barrier.cluster", "reqnctapercluster")  # PTX of a cluster exchange


@gluon.jit
def row_softmax(x_ptr, y_ptr, N: gl.constexpr, layout: gl.constexpr):
    row = gl.program_id(0).to(gl.int64)
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + row * N + offs).to(gl.float32)
    e = gl.exp(x - gl.max(x, axis=0))
    gl.store(y_ptr + row * N + offs, (e / gl.sum(e, axis=0)).to(y_ptr.dtype.element_ty))


def layout_of(n: int, warps: int, ctas: int):
    """The row of ``n`` over ``ctas`` blocks of ``warps`` warps each, contiguous per thread."""
    cga = [[1 << k] for k in range(ctas.bit_length() - 1)]  # each bit of the block index halves the row again
    return gl.BlockedLayout([n // (32 * warps * ctas)], [32], [warps], [0], cga)


def compile_only() -> None:
    for n, warps, ctas in [(32768, 16, 1), (32768, 16, 2), (65536, 16, 4), (262144, 32, 8)]:
        source = GluonASTSource(fn=row_softmax, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "N": "constexpr",
                                                          "layout": "constexpr"},
                                constexprs={"N": n, "layout": layout_of(n, warps, ctas)})
        try:
            ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                 options={"num_warps": warps, "num_ctas": ctas}).asm["ptx"]
            found = {code: len(re.findall(re.escape(code), ptx)) for code in CLUSTER_CODE}
            print(f"n={n} warps={warps} ctas={ctas}: compiled for sm_90; cluster code {found}")
        except Exception as error:  # noqa: BLE001  (the compiler's assertion is the finding)
            print(f"n={n} warps={warps} ctas={ctas}: {type(error).__name__}: {str(error).splitlines()[-1][:300]}")


def on_the_gpu() -> None:
    from triton.testing import do_bench

    from kernels.full_softmax import softmax as full_softmax

    print("triton", triton.__version__, "torch", torch.__version__, torch.cuda.get_device_name(), flush=True)

    def run(x, y, ctas, warps):
        row_softmax[(x.shape[0],)](x, y, x.shape[-1], layout_of(x.shape[-1], warps, ctas), num_warps=warps,
                                   num_ctas=ctas)

    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        for n in (1 << k for k in range(15, 21)):
            x = torch.randn(max(1, (1 << 26) // n), n, device="cuda", dtype=dtype) * 4
            copy_ms = do_bench(lambda: torch.empty_like(x).copy_(x))
            moved = 2 * x.numel() * x.element_size()
            line = [f"{str(dtype)[6:]} n=2^{n.bit_length() - 1} copy {moved / copy_ms / 1e6:.0f} GB/s"]
            for name, f in (("torch", lambda: torch.softmax(x, -1)), ("full_softmax", lambda: full_softmax(x, -1))):
                ms = do_bench(f)
                line.append(f"{name} {moved / ms / 1e6:.0f} GB/s ({copy_ms / ms:.2f} of copy)")
            for ctas in (1, 2, 4, 8, 16):
                for warps in (16, 32):
                    if not 1 <= n // (32 * warps * ctas) <= 64:
                        continue
                    y = torch.empty_like(x)
                    try:
                        run(x, y, ctas, warps)
                        reference = torch.softmax(x[:4].double(), -1)
                        error = ((y[:4].double() - reference).abs() / reference.abs().clamp_min(1e-300)).max().item()
                        ms = do_bench(lambda: run(x, y, ctas, warps))
                        line.append(f"C{ctas}w{warps} {moved / ms / 1e6:.0f} GB/s ({copy_ms / ms:.2f} of copy, "
                                    f"rel err {error:.1e})")
                    except Exception as error:  # noqa: BLE001
                        line.append(f"C{ctas}w{warps} {type(error).__name__}: {str(error).splitlines()[-1][:160]}")
            print(" | ".join(line), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true", help="compile for sm_90 without a GPU")
    compile_only() if parser.parse_args().compile_only else on_the_gpu()
