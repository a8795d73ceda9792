"""A user's kernel file, the one the README walks through: ``--kernel examples/my_kernels.py:softmax``.

Named by its path, as any kernel file of yours: the suite imports it as a
script would be, its folder first on the import path, in a process of its own
(``--kernel my_kernels:softmax`` names it too, with ``PYTHONPATH=examples``).

* ``softmax``: a Triton softmax, one program per row, that declares what it
  handles (``capabilities``: 2-D, last dim, contiguous rows of at most 4096
  elements, fp32/fp16/bf16; anything else is refused with the suite's clear
  errors), how it computes (``precision``: fp32 Triton arithmetic, one
  ``tl.sum`` per row, from which the suite derives its error bounds) and which
  bitwise invariances it promises.  It has a backward too
  (``softmax.softmax_backward(grad, y, dim)``, declared by ``backward=True``): the
  gradient of the logits from the forward's output and the gradient with
  respect to it, as torch's ``_softmax_backward_data`` computes it.  And attention's scaled and causal
  softmaxes (``softmax.scaled_softmax(x, scale, dim)`` and ``softmax.causal_softmax(x, scale)``, declared by
  ``scaled=True`` and ``causal=True``), the scale folded into exp2's argument as flash attention does, which
  its precision model declares (``scaled_logits="folded"``): the suite bounds the softmax of the exact
  ``scale * x`` by what that construction costs.
* ``softmax_half_sum``: the same kernel with a classic bug planted: the row sum
  accumulates in the input's half dtype.  The suite catches it.
* ``softmax_bare``: a bare callable that declares nothing.  It is held to
  torch.softmax's whole contract (any float dtype, rank, dim and layout), judged
  with the loosest arithmetic the suite knows, and promises no invariance; it
  refuses what torch refuses: integer input with a TypeError of its own, the
  rest with torch's errors.
"""

import math
from dataclasses import replace

import torch
import triton
import triton.language as tl

from oracles.profiles import triton_block_profile
from specs.registry import HALF_AND_SINGLE, Capabilities


@triton.jit
def row_softmax_kernel(y_ptr, x_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr,
                       HALF_SUM: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # 64-bit: row * stride passes 2^31 on large inputs
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # Padding lanes read -inf: they cannot win the max, and exp(-inf) adds nothing to the sum.
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    if HALF_SUM:  # the planted bug
        denominator = tl.sum(numerator.to(x_ptr.dtype.element_ty), axis=0).to(tl.float32)
    else:
        denominator = tl.sum(numerator, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, numerator / denominator, mask=mask)


@triton.jit
def row_softmax_backward_kernel(dx_ptr, g_ptr, y_ptr, n_cols, dx_row_stride, g_row_stride, y_row_stride,
                                BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    g = tl.load(g_ptr + row * g_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + row * y_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dot = tl.sum(g * y, axis=0)  # padding lanes add 0 * 0
    tl.store(dx_ptr + row * dx_row_stride + cols, y * (g - dot), mask=mask)


@triton.jit
def row_scaled_softmax_kernel(y_ptr, x_ptr, n_cols, x_row_stride, y_row_stride, scale_log2e, BLOCK: tl.constexpr,
                              CAUSAL: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    if CAUSAL:  # column j of row i masked where j > i
        keep = keep & (cols <= row)
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=keep, other=-float("inf")).to(tl.float32)
    # The scale folded into exp2's argument after the max subtraction: 2^((x - max) * scale * log2(e)).
    numerator = tl.exp2((x - tl.max(x, axis=0)) * scale_log2e)
    tl.store(y_ptr + row * y_row_stride + cols, numerator / tl.sum(numerator, axis=0), mask=cols < n_cols)


CAPABILITIES = Capabilities(
    dtypes=HALF_AND_SINGLE, ranks=frozenset({2}), last_dim_only=True, unit_row_stride=True,
    max_row_length={"cpu": 4096, "cuda": 4096, "npu": 4096}, backward=True,
)
SCALED_CAPABILITIES = replace(CAPABILITIES, scaled=True, causal=True)  # softmax's: the scaled and causal forms too


def launch(x: torch.Tensor, dim: int, half_sum: bool) -> torch.Tensor:
    CAPABILITIES.check(x, dim)  # the clear TypeError / ValueError for anything it does not handle
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        row_softmax_kernel[(x.shape[0],)](y, x, x.shape[1], x.stride(0), y.stride(0),
                                          BLOCK=triton.next_power_of_2(x.shape[1]), HALF_SUM=half_sum)
    return y


def softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int = -1) -> torch.Tensor:
    CAPABILITIES.check_backward(grad, y, dim)  # each within the capabilities, grad of y's shape, dtype and device
    dx = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    if y.numel():
        row_softmax_backward_kernel[(y.shape[0],)](dx, grad, y, y.shape[1], dx.stride(0), grad.stride(0), y.stride(0),
                                                   BLOCK=triton.next_power_of_2(y.shape[1]))
    return dx


def scaled_softmax(x: torch.Tensor, scale: float, dim: int = -1, causal: bool = False) -> torch.Tensor:
    SCALED_CAPABILITIES.check_scaled(x, dim, scale)  # x within the capabilities, a finite scale above 0
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        row_scaled_softmax_kernel[(x.shape[0],)](y, x, x.shape[1], x.stride(0), y.stride(0), scale * math.log2(math.e),
                                                 BLOCK=triton.next_power_of_2(x.shape[1]), CAUSAL=causal)
    return y


def causal_softmax(x: torch.Tensor, scale: float) -> torch.Tensor:
    return scaled_softmax(x, scale, -1, causal=True)


def precision(call):
    """fp32 Triton arithmetic, one tl.sum per row over the padded block, Triton's default 4 warps, whatever the call
    (``call``: an oracles.call.Call, with its input, dim, operation, mask and backend).  A scaled softmax folds its
    scale into exp2's argument, and tl.exp2 on NVIDIA GPUs flushes subnormal results to zero (an H100, Triton 3.6:
    0.0 for 8.0e-39), which tl.exp does not."""
    profile = triton_block_profile(call.backend, num_warps=4)
    if not call.operation.scaled:
        return profile
    return replace(profile, arithmetic=replace(profile.arithmetic, scaled_logits="folded",
                                               flushes_subnormals=call.backend == "cuda"))


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return launch(x, dim, half_sum=False)


def softmax_half_sum(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return launch(x, dim, half_sum=True)


for function in (softmax, softmax_half_sum):
    function.softmax_backward = softmax_backward
    function.capabilities = CAPABILITIES
    function.precision = precision
    function.promises = ("batch", "shift", "determinism", "ties")
softmax.scaled_softmax = scaled_softmax
softmax.causal_softmax = causal_softmax
softmax.capabilities = SCALED_CAPABILITIES


def softmax_bare(x: torch.Tensor, dim: int) -> torch.Tensor:
    if not x.dtype.is_floating_point:  # torch refuses integer input; widening it would return numbers
        raise TypeError(f"x.dtype must be a floating-point dtype; got {x.dtype}")
    if x.numel() == 0:  # amax has no identity: an empty row has nothing to normalise
        return torch.empty_like(x)
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    numerator = (wide - wide.amax(dim, keepdim=True)).exp()
    return (numerator / numerator.sum(dim, keepdim=True)).to(x.dtype)
