"""Scenario for tests/suite/test_invariances.py: a log_softmax that is not shift invariant.

Its log-sum-exp is formed first, max + log(sum exp(x - max)) in one fp32 rounding (as a fused cross-entropy keeps
it), then subtracted from x: x + c and x round that sum differently, so the outputs' bits depend on a shift that is
exact for every entry.  Its softmax is torch's.  ``softmax`` promises shift invariance, which its log_softmax breaks.
"""

import torch

from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}), ranks=frozenset({2}), last_dim_only=True,
                            log_softmax=True, promises=frozenset({"shift"}))


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    return torch.softmax(x, dim)


def log_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    peak = x.amax(dim, keepdim=True)
    return x - (peak + torch.log(torch.exp(x - peak).sum(dim, keepdim=True)))


softmax.log_softmax = log_softmax
softmax.capabilities = CAPABILITIES
