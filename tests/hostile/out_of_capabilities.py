"""A hostile kernel that declares fp32 rank-2 input and returns zeros for everything else, instead of refusing.

Numbers returned outside the declared capabilities are judged like any others: zeros are wrong.
"""

import torch

from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}), ranks=frozenset({2}))


def zeros_outside(x: torch.Tensor, dim: int) -> torch.Tensor:
    if CAPABILITIES.refusal(x, dim) is None:
        return torch.softmax(x, dim)
    return torch.zeros_like(x)


zeros_outside.capabilities = CAPABILITIES
