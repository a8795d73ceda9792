"""A hostile kernel: a real bug hidden behind a declared precision model that tolerates anything.

``softmax`` computes softmax(x / 2), a temperature bug (hundreds of thousands of ulps off on ordinary rows),
and declares, through ``precision``, an arithmetic whose division errs by up to 1e30 ulps: every bound derived
from it is beyond any output, so every accuracy test would pass.  Its other figures are
torch's on the CPU.  A declared arithmetic looser than the loosest the suite knows must be refused
(``specs.registry.precision_model``): tests/suite/test_declared_precision.py checks that this kernel fails.

It declares fp32 only (``--kernel tests.hostile.declares_loose_precision:softmax``).
"""

from dataclasses import replace

import torch

from oracles.bounds import PrecisionProfile
from oracles.profiles import ORDER_FREE, TORCH_CPU
from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}))
ANYTHING_GOES = replace(TORCH_CPU, name="a division within 1e30 ulps", div_ulps=1e30)


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    return torch.softmax(x / 2, dim)  # the bug: a temperature of 2


def precision(call) -> PrecisionProfile:
    """torch's CPU arithmetic but for its division, declared 1e30 ulps, summed in any order."""
    return PrecisionProfile(ANYTHING_GOES, ORDER_FREE)


softmax.capabilities = CAPABILITIES
softmax.precision = precision
