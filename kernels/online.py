"""An online (two-pass) Triton softmax: the mutation catalog's parent for bugs of that algorithm.

A program takes a row in tiles of TILE columns.  The first pass keeps a
running maximum and a sum of exponentials rescaled each time the maximum grows
(Milakov & Gimelshein's online normaliser); the second pass writes.  While
every entry seen so far is -inf the running maximum is -inf too, and the
rescale factor exp(m_old - m_new) would be exp(-inf + inf) = NaN: the shift
stays 0 until a finite maximum appears.  ``MUTATION`` plants one bug
(:mod:`specs.mutants`); like the mutants, it is not registered:
``--kernel specs.online:softmax`` selects it with its record.

It computes in float64 (one rounding, at the store): a gap taken against a
running maximum rounds differently from the gap against the row's maximum,
which the derived bounds model only for exact gaps.  So it runs where Triton
has float64: the interpreter and NVIDIA GPUs, not Ascend.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import require_triton_device
from .limits import HALF_AND_SINGLE, InputLimits

CORRECT = tl.constexpr(0)
NEG_INF_HEAD_NAN = tl.constexpr(1)

TILE = 256
FLOAT64_DEVICES = ("cpu", "cuda")  # where Triton has float64: the interpreter and NVIDIA GPUs


@triton.jit(do_not_specialize=["n_cols", "x_row_stride", "x_col_stride", "y_row_stride", "y_col_stride"])  # as rowwise's
def online_softmax_kernel(y_ptr, x_ptr, n_cols, x_row_stride, x_col_stride, y_row_stride, y_col_stride,
                          TILE: tl.constexpr, MUTATION: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, TILE).to(tl.int64)
    running_max = tl.full([], -float("inf"), tl.float64)
    total = tl.full([], 0.0, tl.float64)
    for start in range(0, n_cols, TILE):
        x = tl.load(x_ptr + row * x_row_stride + (start + cols) * x_col_stride, mask=start + cols < n_cols,
                    other=-float("inf")).to(tl.float64)
        new_max = tl.maximum(running_max, tl.max(x, axis=0))
        shift = tl.where(new_max == -float("inf"), 0.0, new_max)
        if MUTATION == NEG_INF_HEAD_NAN:
            shift = new_max
        total = total * tl.exp(running_max - shift) + tl.sum(tl.exp(x - shift), axis=0)
        running_max = new_max
    for start in range(0, n_cols, TILE):
        x = tl.load(x_ptr + row * x_row_stride + (start + cols) * x_col_stride, mask=start + cols < n_cols,
                    other=-float("inf")).to(tl.float64)
        y = (tl.exp(x - running_max) / total).to(tl.float32)  # one rounding; the store rounds once more for half
        tl.store(y_ptr + row * y_row_stride + (start + cols) * y_col_stride, y, mask=start + cols < n_cols)


LIMITS = InputLimits(dtypes=HALF_AND_SINGLE, ranks=frozenset({2}), last_dim_only=True)


def launch(x: torch.Tensor, dim: int, mutation: tl.constexpr) -> torch.Tensor:
    LIMITS.check(x, dim)
    require_triton_device(x)
    if x.device.type not in FLOAT64_DEVICES:
        raise TypeError(f"x is on {x.device.type}: kernels.online computes in float64, which Triton has on "
                        f"{' and '.join(FLOAT64_DEVICES)} only")
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        online_softmax_kernel[(x.shape[0],)](y, x, x.shape[1], *x.stride(), *y.stride(), TILE=TILE,
                                             MUTATION=mutation.value)
    return y


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of a 2-D tensor over its last dim, of any strides, in two passes over tiles."""
    return launch(x, dim, CORRECT)
