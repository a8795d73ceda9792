"""Scenario for tests/suite/test_invariances.py: a correct softmax that is not batch invariant.

Single rows are computed in fp32, batches in float64 and rounded: both within
any honest bound, but a row's bits depend on the rows launched with it.
``softmax`` promises nothing; ``promising_softmax`` promises batch invariance
(and must fail); ``SOFTMAX_SUITE_PLANT_LOSS=1`` makes even single rows take the
float64 path, so that batch invariance holds (for a baseline that the normal
run then loses).
"""

import os

import torch

from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}), ranks=frozenset({2}), last_dim_only=True)


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    if x.shape[0] > 1 or os.environ.get("SOFTMAX_SUITE_PLANT_LOSS") == "1":
        return torch.softmax(x.double(), dim).float()
    return torch.softmax(x, dim)


def promising_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    return softmax(x, dim)


softmax.capabilities = CAPABILITIES
promising_softmax.capabilities = CAPABILITIES
promising_softmax.promises = ("batch",)
