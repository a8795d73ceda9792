"""Scenario for tests/suite/test_tiling.py: a tiled Triton softmax as a user writes it, one row a program, its row in
tiles of TILE (a pass for the maximum, one for the sum, one for the writes).

* ``softmax``: declares what a one-tile kernel declares (the README example's ``triton_block_profile``: one tl.sum
  over the padded row, and no code-path boundary), which its tiles are not: the suite warns;
* ``softmax_declared``: the same kernel declaring its tile, as specs/online.py does (``path_boundaries`` at TILE,
  ``Reduction(..., block=TILE, chunks=tiles)``): no warning.
"""

from dataclasses import replace

import torch
import triton
import triton.language as tl

from oracles.bounds import PrecisionProfile, Reduction
from oracles.profiles import TILE_SUM, triton_block_profile
from specs.registry import HALF_AND_SINGLE, Capabilities

TILE = 256


@triton.jit
def tiled_softmax_kernel(y_ptr, x_ptr, n_cols, x_row_stride, y_row_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, TILE)
    x_row, y_row = x_ptr + row * x_row_stride, y_ptr + row * y_row_stride
    top = tl.full((), -float("inf"), tl.float32)
    for start in range(0, n_cols, TILE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf")).to(tl.float32)
        top = tl.maximum(top, tl.max(x, axis=0))
    total = tl.zeros((), tl.float32)
    for start in range(0, n_cols, TILE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf")).to(tl.float32)
        total += tl.sum(tl.exp(x - top), axis=0)
    for start in range(0, n_cols, TILE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_row + start + cols, tl.exp(x - top) / total, mask=start + cols < n_cols)


CAPABILITIES = Capabilities(dtypes=HALF_AND_SINGLE, ranks=frozenset({2}), last_dim_only=True, unit_row_stride=True,
                            max_row_length={"cpu": 4096, "cuda": 4096, "npu": 4096})


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        tiled_softmax_kernel[(x.shape[0],)](y, x, x.shape[1], x.stride(0), y.stride(0), TILE=TILE)
    return y


def one_tile(call):
    """What the README example declares, wrongly here: one tl.sum over the padded row."""
    return triton_block_profile(call.backend, num_warps=4)


def tiles(call) -> PrecisionProfile:
    """Tiles of TILE, each summed by one tl.sum, folded one after another."""
    chunks = max(-(-call.x.shape[call.dim] // TILE), 1)
    return replace(one_tile(call), reduction=Reduction(TILE_SUM.get(call.backend, "sequential"), num_warps=4,
                                                       block=TILE, chunks=chunks))


def softmax_declared(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return softmax(x, dim)


softmax.capabilities = CAPABILITIES
softmax.precision = one_tile
softmax_declared.capabilities = replace(CAPABILITIES, path_boundaries={"cpu": (TILE,), "cuda": (TILE,)})
softmax_declared.precision = tiles
