"""Scenario for tests/suite/test_declared_precision.py: an online softmax in tiles of 96 columns, narrower than any
known construction's 128, declaring its reduction honestly (its tile among its code-path boundaries, so that the
suite draws its seams there, and a rescale of the running sum per tile); and the same kernel with a tile bug.

* ``softmax``: right; its model was refused in every accuracy test as "looser than the loosest the suite knows
  ... folding tiles of 128";
* ``softmax_unrescaled``: the running sum is not rescaled when a later tile raises the maximum (the online
  normaliser's classic slip): wrong wherever a row's maximum is not in its first tile.

It computes in float64, one rounding at the store, as kernels/online.py does (a gap taken against a running maximum
rounds otherwise than against the row's, which the bounds model only for exact gaps).
"""

from dataclasses import replace

import torch
import triton
import triton.language as tl

from kernels.online import FLOAT64_DEVICES, LIMITS
from oracles.bounds import PrecisionProfile, Reduction
from oracles.call import Call
from oracles.profiles import TILE_SUM
from specs import full_softmax
from specs.registry import Capabilities

TILE = 96  # columns a program folds at a time: no power of two (a block of 128, its last 32 lanes masked)
BLOCK = 128


@triton.jit
def narrow_tiles_kernel(y_ptr, x_ptr, n_cols, x_row_stride, y_row_stride, TILE: tl.constexpr, BLOCK: tl.constexpr,
                        RESCALE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK)
    x_row, y_row = x_ptr + row * x_row_stride, y_ptr + row * y_row_stride
    running_max = tl.full([], -float("inf"), tl.float64)
    total = tl.full([], 0.0, tl.float64)
    for start in range(0, n_cols, TILE):
        cols = start + lanes
        keep = (lanes < TILE) & (cols < n_cols)
        x = tl.load(x_row + cols, mask=keep, other=-float("inf")).to(tl.float64)
        new_max = tl.maximum(running_max, tl.max(x, axis=0))
        shift = tl.where(new_max == -float("inf"), 0.0, new_max)
        if RESCALE:
            total = total * tl.exp(running_max - shift)
        total = total + tl.sum(tl.exp(x - shift), axis=0)
        running_max = new_max
    for start in range(0, n_cols, TILE):
        cols = start + lanes
        keep = (lanes < TILE) & (cols < n_cols)
        x = tl.load(x_row + cols, mask=keep, other=-float("inf")).to(tl.float64)
        tl.store(y_row + cols, (tl.exp(x - running_max) / total).to(tl.float32), mask=keep)


def launch(x: torch.Tensor, dim: int, rescale: bool) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    y = torch.empty_like(x)
    if x.numel():
        narrow_tiles_kernel[(x.shape[0],)](y, x, x.shape[1], x.stride(0), y.stride(0), TILE=TILE, BLOCK=BLOCK,
                                           RESCALE=rescale)
    return y


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    return launch(x, dim, True)


def softmax_unrescaled(x: torch.Tensor, dim: int) -> torch.Tensor:
    return launch(x, dim, False)


CAPABILITIES = Capabilities.extending(replace(LIMITS, unit_row_stride=True),
                                      path_boundaries={d: (TILE,) for d in FLOAT64_DEVICES})


def precision(call: Call) -> PrecisionProfile:
    """float64 throughout (full_softmax's "wide" arithmetic); tiles of 96 summed by one tl.sum each, folded with a
    rescale per tile."""
    tiles = max(-(-call.x.shape[call.dim] // TILE), 1)
    return PrecisionProfile(full_softmax.ARITHMETIC[call.backend, "wide"],
                            Reduction(TILE_SUM[call.backend], num_warps=4, block=TILE, chunks=tiles))


for kernel in (softmax, softmax_unrescaled):
    kernel.capabilities = CAPABILITIES
    kernel.precision = precision
