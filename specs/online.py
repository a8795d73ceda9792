"""The record of the online softmax (``kernels/online.py``), declared as a user's kernel file declares one.

It is not registered: ``--kernel specs.online:softmax`` selects it, with the
capabilities and precision below as the callable's attributes.
"""

import torch

from kernels import online
from oracles.bounds import PrecisionProfile, Reduction
from oracles.call import Call
from oracles.profiles import TILE_SUM

from . import full_softmax
from .registry import ALL_INVARIANCES, Capabilities

# float64 throughout, one rounding at the store: full_softmax's "wide" arithmetic.
ARITHMETIC = {device: full_softmax.ARITHMETIC[device, "wide"] for device in online.FLOAT64_DEVICES}

CAPABILITIES = Capabilities.extending(
    online.LIMITS,
    path_boundaries={"cpu": (online.TILE,), "cuda": (online.TILE,)},  # one tile, then several
    promises=ALL_INVARIANCES,
)


def precision(call: Call) -> PrecisionProfile:
    """float64 throughout; tiles of TILE summed by one tl.sum each (4 warps), folded with a rescale per tile."""
    tiles = max(-(-call.x.shape[call.dim] // online.TILE), 1)
    return PrecisionProfile(ARITHMETIC[call.backend],
                            Reduction(TILE_SUM[call.backend], num_warps=4, block=online.TILE, chunks=tiles))


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of a 2-D tensor over its last dim, of any strides, in two passes over tiles."""
    return online.softmax(x, dim)


softmax.capabilities = CAPABILITIES
softmax.precision = precision
