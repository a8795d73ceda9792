"""How a call of full_softmax computes (its ARITH), chosen by device, operation and output dtype.

The rounding of x - max, not exp itself, dominates the error of a plain fp32
softmax (|x - max| u relative).  Every kernel takes its arithmetic as ARITH:

* WIDE: the gap, its exp and the row sum in float64, one rounding at the store
  (upstream Triton's interpreter; log_softmax on CUDA, whose result near 0
  needs an exact sum); never on Ascend, whose math has no float64.
* PRECISE (fp32 output on CUDA): fp32, with the gap's exact rounding error
  recovered (TwoSum) and multiplied back in, libdevice's expf, the exps summed
  exactly (``_fixed_point_sums``) and multiplied by the float64 reciprocal of
  the sum: no order of the additions (which Triton's register layout decides,
  and which may differ between two launches) can change a bit, so batch and
  shift invariance hold.
* FAST (fp32 output on Ascend): the gap's error recovered, tl.exp and a division.
* HALF (half output, unless WIDE): tl.exp of the rounded gap and a division.
  Their errors, 2^-24 |x - max| relative and a few fp32 ulps, vanish in the
  rounding to fp16 or bf16, and dropping the recovery halves the arithmetic
  per element, which bounds the speed of half rows (docs/speed.md).
* HALF_RECIPROCAL (half output on CUDA): the same, but a product by the row's
  correctly rounded reciprocal instead of a division: 1.5 ulps of fp32 against
  div.full's 2, and faster (docs/speed.md).
"""

from __future__ import annotations

import torch
import triton.language as tl

from ..launch import float64_math, interpreted

# Ordered: from PRECISE on, the sums are float64 (ARITH >= PRECISE); below FAST, half outputs.
HALF = tl.constexpr(0)
HALF_RECIPROCAL = tl.constexpr(1)
FAST = tl.constexpr(2)
PRECISE = tl.constexpr(3)
WIDE = tl.constexpr(4)
# The name of each ARITH as its precision model (specs/full_softmax.py) keys it.
ARITHMETIC_NAMES = {HALF.value: "half", HALF_RECIPROCAL.value: "half", FAST.value: "fast", PRECISE.value: "precise",
                    WIDE.value: "wide"}


def arithmetic(device: torch.device, log: bool, out_dtype: torch.dtype) -> int:
    """A call's ARITH: float64 where the interpreter's math has it (triton-ascend's computes as its
    NPUs do) and for log_softmax on CUDA; otherwise the output's dtype decides, since what a half
    output rounds away an fp32 one shows (half in, fp32 out)."""
    if (interpreted() and float64_math()) or (device.type == "cuda" and log):
        return WIDE.value
    if out_dtype != torch.float32:
        return HALF_RECIPROCAL.value if device.type == "cuda" else HALF.value
    return PRECISE.value if device.type == "cuda" else FAST.value
