"""Scenario for tests/suite/test_failure_reports.py: kernels whose one bug fails a property test on that test's own
check, where every planted bug of the mutation catalog (``specs/mutants.py``) fails the accuracy judge first, or
declares the last dim only."""

import torch

from specs import rowwise
from specs.registry import Capabilities


def extremes_swapped(x: torch.Tensor, dim: int) -> torch.Tensor:
    """torch's softmax, but each row's largest and smallest outputs trade places: the outputs' order is not the
    logits'.  Declared of a known construction, whose outputs keep the order exactly: the monotonicity test judges
    the order itself, not the elements within their bounds."""
    extremes_swapped.capabilities.check(x, dim)
    y = torch.softmax(x, dim)
    high, low = y.argmax(dim, keepdim=True), y.argmin(dim, keepdim=True)
    return y.scatter(dim, high, y.gather(dim, low)).scatter(dim, low, y.gather(dim, high))


extremes_swapped.capabilities = Capabilities(dtypes=frozenset({torch.float32}), ranks=frozenset({2}),
                                             last_dim_only=True)
extremes_swapped.precision = rowwise.precision


def half_off_the_last_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    """torch's softmax, computed in float16 along any dim but the last."""
    if x.dim() == 0 or dim % x.dim() == x.dim() - 1:
        return torch.softmax(x, dim)
    return torch.softmax(x.half(), dim).to(x.dtype)


half_off_the_last_dim.capabilities = Capabilities(dtypes=frozenset({torch.float32}))
