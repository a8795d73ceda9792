"""Scenario for tests/suite/test_cluster_kernels.py: every plan of full_softmax's cluster path on a Hopper card,
compiled for sm_90 without a GPU, for rows of its class's length (no masks) and shorter (and the two arithmetics of
the longest rows for sm_100, the other family the path runs on), with the shared memory each block takes: the design
needs the plan's blocks to share an SM (GPU_CLUSTER_SPANS_PER_SM of spans staged whole, fewer of spans partly held in
registers), so that one block's loads run under another's arithmetic (docs/speed.md).

Prints a line per plan and exits 1 if one does not compile or takes more than its share of an SM.  Run it as
``python -m tests.scenarios.cluster_plans`` with compiled Triton (not TRITON_INTERPRET=1), Triton 3.9 or later.
"""

import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource

from kernels.full_softmax.arithmetic import HALF_RECIPROCAL, PRECISE
from kernels.full_softmax.cluster_code import cluster_kernel, cluster_layout
from kernels.full_softmax.cuda_plan import (GPU_RESERVED_SHARED_BYTES, GPU_ROW_ELEMENTS, HOPPER_CLUSTERS,
                                            cluster_settings, longest_cluster_row, shape_class)

POINTERS = {4: "*fp32", 2: "*bf16"}
SIGNATURE = {"n_cols": "i32", "size1": "i64", "size2": "i64", "xs0": "i64", "xs1": "i64", "xs2": "i64",
             "ys0": "i64", "ys1": "i64", "ys2": "i64"}


def compile_plan(n: int, element_size: int, precise: bool, capability: int, even: bool) -> tuple[int, int]:
    """Compile the cluster plan of rows of n for ``capability``, contiguous and aligned rows (the cp.async staging),
    of n columns (``even``: no masks) or fewer; the shared memory a block takes, in bytes, and the most the plan's
    blocks an SM leave it."""
    settings = cluster_settings(shape_class(n, element_size, False), HOPPER_CLUSTERS, exact=precise)
    constants = {"xsd": 1, "ysd": 1, "C": settings.ctas, "SPAN": n // settings.ctas, "TILE": settings.columns,
                 "LAYOUT": cluster_layout(settings.ctas, settings.num_warps, element_size),
                 "ARITH": (PRECISE if precise else HALF_RECIPROCAL).value, "ALIGNED": True, "UNIT": True,
                 "ASYNC": True, "HELD": settings.held, "EVEN": even}
    signature = {"y_ptr": "*fp32" if precise else POINTERS[element_size], "x_ptr": POINTERS[element_size],
                 **SIGNATURE, **{name: "constexpr" for name in constants}}
    order = list(cluster_kernel.arg_names)
    signature = {name: signature[name] for name in order}
    # The pointers and the row length specialised as multiples of 16, as a launch on such rows finds them.
    source = GluonASTSource(fn=cluster_kernel, signature=signature, constexprs=constants,
                            attrs={(index,): [["tt.divisibility", 16]] for index in (0, 1, 2)})
    compiled = triton.compile(source, target=GPUTarget("cuda", capability, 32),
                              options={"num_warps": settings.num_warps, "num_ctas": settings.ctas,
                                       "maxnreg": settings.registers})
    assert "cp.async.cg" in compiled.asm["ptx"], "the aligned rows' span is not staged by cp.async"
    return compiled.metadata.shared, HOPPER_CLUSTERS.shared_bytes // settings.per_sm - GPU_RESERVED_SHARED_BYTES


def main() -> int:
    failed = False
    jobs = []
    for element_size in (4, 2):
        n = GPU_ROW_ELEMENTS * 2
        while n <= longest_cluster_row(HOPPER_CLUSTERS, element_size):
            outputs = [precise for precise in (element_size == 4, True)
                       if n <= longest_cluster_row(HOPPER_CLUSTERS, element_size, exact=precise)]
            jobs += [(n, element_size, precise, 90, even) for precise in dict.fromkeys(outputs)
                     for even in (True, False)]
            n *= 2
    jobs += [(longest_cluster_row(HOPPER_CLUSTERS, size), size, size == 4, 100, True) for size in (4, 2)]
    for n, element_size, precise, capability, even in jobs:
        what = (f"rows of {n if even else f'fewer than {n}'}, {element_size}-byte values, "
                f"{'fp32' if precise else 'half'} output, sm_{capability}")
        try:
            shared, share = compile_plan(n, element_size, precise, capability, even)
        except Exception as error:  # noqa: BLE001  (a plan that does not compile is reported and fails the run)
            print(f"{what}: FAILED to compile: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
            failed = True
            continue
        fits = shared <= share
        failed |= not fits
        print(f"{what}: compiled, {shared} bytes of shared memory a block "
              f"({'within' if fits else 'MORE than'} {share}: the plan's share of an SM, less CUDA's "
              f"{GPU_RESERVED_SHARED_BYTES})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
