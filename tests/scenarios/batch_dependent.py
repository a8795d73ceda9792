"""Scenario for tests/suite/test_invariances.py: a correct softmax that is not batch invariant.

Single rows are computed in fp32, batches in float64 and rounded: both within
any honest bound, but a row's bits depend on the rows launched with it; its
backward alike.
``softmax`` promises nothing; ``promising_softmax`` promises batch invariance
(and must fail); ``SOFTMAX_SUITE_PLANT_LOSS=1`` makes even single rows take the
float64 path, so that batch invariance holds (for a baseline that the normal
run then loses).
"""

import os

import torch

from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}), ranks=frozenset({2}), last_dim_only=True, backward=True)


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    if x.shape[0] > 1 or os.environ.get("SOFTMAX_SUITE_PLANT_LOSS") == "1":
        return torch.softmax(x.double(), dim).float()
    return torch.softmax(x, dim)


def softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check_backward(grad, y, dim)
    if y.shape[0] > 1 or os.environ.get("SOFTMAX_SUITE_PLANT_LOSS") == "1":
        return torch._softmax_backward_data(grad.double(), y.double(), dim, torch.float64).float()
    return torch._softmax_backward_data(grad, y, dim, y.dtype)


def promising_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    return softmax(x, dim)


softmax.capabilities = CAPABILITIES
promising_softmax.capabilities = CAPABILITIES
softmax.softmax_backward = promising_softmax.softmax_backward = softmax_backward
promising_softmax.promises = ("batch",)
