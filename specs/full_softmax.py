"""The record of full_softmax (``kernels/full_softmax/``): its operations, capabilities, promises and precision.

The kernel computes differently from plain Triton on purpose, and has its own
arithmetic (``kernels/full_softmax/arithmetic.py`` chooses it for each call,
:data:`ARITHMETIC` below models it).  Under the interpreter, and for
log_softmax on CUDA, it keeps the gap, the exps, the sum and the log in
float64 and rounds once (compute format float64).  Its fp32-output softmax on
CUDA stays in fp32 for speed but recovers the rounding error of x - max
(TwoSum), so no gap rounding enters; it uses libdevice ``expf`` (2 ulp, CUDA
programming guide; 1.8 measured with the correction on an H100), sums exactly
in 64-bit fixed point (to n 2^-47, below any fp32 sum's error) and multiplies
by the float64 reciprocal (0.51 ulp with the final rounding).  On Ascend, fp32
outputs take tl.exp likewise corrected, and a log_softmax that adds the gap's
error back (a second rounding).  Half outputs ("half", any device) take plain
tl.exp of the rounded gap and a division (on CUDA a product by the correctly
rounded reciprocal), whose errors vanish in the rounding to fp16 or bf16:
their profiles are the device's plain Triton arithmetic.  triton-ascend's
interpreter, whose math library refuses float64, runs the Ascend paths on
numpy.  tests/suite/test_profiles.py measures these helpers on the device.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from kernels.full_softmax import host
from kernels.full_softmax.arithmetic import ARITHMETIC_NAMES, PRECISE, arithmetic
from kernels.full_softmax.buffer_plan import INTERPRETER_BLOCK, largest_block
from kernels.full_softmax.cuda_plan import (GPU_CHUNKED_ROW_BYTES, GPU_MASKED_ROW_BYTES, GPU_ROW_ELEMENTS,
                                            HOPPER_CLUSTERS, longest_cluster_row)
from kernels.full_softmax.plan import Plan
from oracles.bounds import Arithmetic, PrecisionProfile, Reduction
from oracles.call import Call
from oracles.formats import FP64
from oracles.profiles import INTERPRETER, TILE_SUM, TRITON_ASCEND, TRITON_NVIDIA

from .registry import ALL_INVARIANCES, Capabilities, KernelSpec, register

WIDE_DOWNCAST = {  # float64 -> fp32 (to nearest), then the store's conversion for half outputs
    torch.float32: 0.5, torch.float16: 0.5 + 2.0**-12, torch.bfloat16: 0.5 + 2.0**-15}

# triton-ascend's interpreter, whose math refuses float64: the fp32 path of Ascend, on numpy's
# exp (2.52 ulp) plus the rounding of the gap correction's addition (0.5 ulp).
ASCEND_INTERPRETER_FAST = replace(INTERPRETER, name="full_softmax under triton-ascend's interpreter (fp32, as on Ascend)",
                                  exp_ulps=3.1, exact_gap=True, log_result_ulps=1.0)
ASCEND_FAST = replace(TRITON_ASCEND, name="full_softmax on Ascend (unmeasured, conservative)", exact_gap=True,
                      log_result_ulps=1.0)

# Keyed by (backend, mode): "wide" keeps the gap, exps and sums in float64 and rounds once;
# "precise" and "fast" compute in fp32 with the gap's rounding recovered (fp32 outputs, of fp32 or
# half inputs, which fp32 holds exactly); "half" (half outputs, whose rounding hides the gap's) does not.
ARITHMETIC = {
    ("cpu", "wide"): Arithmetic(
        "full_softmax under the interpreter (float64 gap, exp, sum and log)", exp_ulps=1.0, exp_ulps_per_gap=0.0,
        div_ulps=0.5, exp_bias_ulps=0.0, div_bias_ulps=0.0, flushes_subnormals=False, log_ulps=1.0, exact_gap=True,
        compute=FP64,
        downcast_ulps={**WIDE_DOWNCAST, torch.bfloat16: 1.0 + 2.0**-15},  # the interpreter truncates to bf16
        subnormal_downcast_unreliable=frozenset({torch.bfloat16}),
    ),
    ("cpu", "fast"): ASCEND_INTERPRETER_FAST,
    ("cpu", "half"): replace(ASCEND_INTERPRETER_FAST, name="full_softmax under triton-ascend's interpreter, half output",
                             exact_gap=False),
    # Its sums are exact to n 2^-47 and its reciprocal float64; modelled as fp32 sums (a looser,
    # still valid bound).
    # libdevice expf's bias is unmeasured (its worst case); the float64 reciprocal and product err by
    # 2^-29 ulp before one rounding to nearest (biased on rows of tied maxima as any: oracles/profiles.py).
    ("cuda", "precise"): replace(TRITON_NVIDIA, name="full_softmax on NVIDIA (libdevice expf, exact sums)",
                                 exp_ulps=2.5, exp_ulps_per_gap=0.0, div_ulps=0.51, exact_gap=True,
                                 exp_bias_ulps=2.5, div_bias_ulps=0.05, exp_bias_per_gap=0.0),
    # A correctly rounded reciprocal and a product: 1.5 ulps, within div.full's 2.5, and unbiased.
    ("cuda", "half"): replace(TRITON_NVIDIA, name="full_softmax on NVIDIA, half output (tl.exp, reciprocal)",
                              div_bias_ulps=0.0),
    ("cuda", "wide"): Arithmetic(
        "full_softmax log_softmax on NVIDIA (float64)", exp_ulps=1.0, exp_ulps_per_gap=0.0, div_ulps=0.5,
        exp_bias_ulps=0.0, div_bias_ulps=0.0, flushes_subnormals=False, log_ulps=1.0, exact_gap=True, compute=FP64,
        downcast_ulps=WIDE_DOWNCAST,
    ),
    ("npu", "fast"): ASCEND_FAST,
    ("npu", "half"): replace(ASCEND_FAST, name="full_softmax on Ascend, half output (unmeasured, conservative)",
                            exact_gap=False),
}

CAPABILITIES = Capabilities.extending(
    host.LIMITS,
    log_softmax=True,
    masked=True,
    out_dtype=True,
    # The interpreter: one pass -> chunked -> split; Ascend: one pass -> chunked; CUDA: one pass ->
    # chunked in fp32 (masked rows first) and in half, chunked -> split in fp32; on Hopper with Triton 3.9, one
    # pass -> cluster, spans staged whole -> partly held in registers at 2^18 in fp32, cluster -> split in fp32 at
    # 2^19 (in half at 2^19 and 2^20, past the suite's longest CUDA row).
    path_boundaries={"cpu": (INTERPRETER_BLOCK, 2 * INTERPRETER_BLOCK), "npu": (largest_block(interpret=False),),
                     "cuda": (GPU_MASKED_ROW_BYTES // 4, GPU_ROW_ELEMENTS, GPU_CHUNKED_ROW_BYTES // 4,
                              longest_cluster_row(HOPPER_CLUSTERS, 4, held=False),
                              longest_cluster_row(HOPPER_CLUSTERS, 4))},
    # The tile, warps and path follow from the row length (and the card's tuned table, and whether card and
    # Triton run the cluster path) alone; fp32 sums are exact on CUDA.
    promises=ALL_INVARIANCES,
)


def reduction(p: Plan, n: int, kind: str) -> Reduction:
    """The tree in which a plan sums a row of n: one block, or blocks folded with rescales.

    A split row's spans are added in the write kernel, in more warps than the statistics kernel's
    num_warps: counted over the fewer threads, their tree is at least as deep.  A cluster's blocks each
    sum every tile of their span, padding included, and its columns held in registers (a sum of their own,
    counted as one more tile as wide as they are: its tree, a thread's values then the block's, is no deeper
    than a tile of that width, and the staged tiles' no deeper than it with the other tiles before), then
    meet as a split row's spans do (``splits``, its blocks); the rescales the model counts between chunks,
    which the cluster path does not do, exceed the ones it does (log2 of its blocks in their meeting, and the
    factor that brings a block's exps to the row's maximum, an exp and a product each).
    """
    return Reduction(kind, num_warps=p.num_warps, rows=p.rows,
                     block=None if p.path == "single" else max(p.block, p.held),
                     chunks=1 if p.path == "single" else p.chunks(n), spans=p.splits)


def precision(call: Call) -> PrecisionProfile:
    """The arithmetic and the reduction of the path the kernel takes for ``call``.

    Both follow from the call as the host code decides them (``kernels/full_softmax/host.py``): the plan
    from the shape, dim, device, element size and whether the call is masked, a log_softmax or sums exactly (on
    CUDA each may take another plan, ``gpu_plan``), the arithmetic from the device, the operation and the output dtype
    (a half input with fp32 output computes as an fp32 output does).
    """
    x = call.x
    shape = tuple(x.shape) or (1,)
    dim = call.dim % len(shape)
    kind = TILE_SUM.get(call.backend, "sequential")
    arith = arithmetic(x.device, call.log, call.result_dtype)
    tree = reduction(host.plan(shape, dim, x.device, x.element_size(), call.mask is not None, call.log,
                               arith == PRECISE.value), shape[dim], kind)
    mode = ARITHMETIC_NAMES[arith]
    return PrecisionProfile(ARITHMETIC[call.backend, mode], tree)


SPEC = register(KernelSpec(
    name="full_softmax",
    softmax=host.softmax,
    capabilities=CAPABILITIES,
    log_softmax=host.log_softmax,
    masked_softmax=host.masked_softmax,
    precision=precision,
    arithmetics={backend: tuple(a for (where, _), a in ARITHMETIC.items() if where == backend)
                 for backend in ("cpu", "cuda", "npu")},
    description="full-domain Triton softmax: any rank, dim and strides, any row length, log and masked",
))
