"""torch.softmax as a kernel under test: the suite's false-alarm check.

It declares the full contract (any float dtype, rank, dim and layout), so the
whole suite runs on it; a failure here is a bug in the suite, not in torch.
The wrappers only turn torch's refusals (RuntimeError for integer dtypes,
IndexError for a bad dim) into the TypeError / ValueError the suite asks of
every kernel; the numbers are torch's.
"""

import torch

from oracles.profiles import torch_profile

from .registry import TORCH_CONTRACT, KernelSpec, register


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    TORCH_CONTRACT.check(x, dim)
    return torch.softmax(x, dim)


def log_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    TORCH_CONTRACT.check(x, dim)
    return torch.log_softmax(x, dim)


SPEC = register(KernelSpec(
    name="torch",
    softmax=softmax,
    capabilities=TORCH_CONTRACT,
    log_softmax=log_softmax,
    precision=torch_profile,
    description="torch.softmax on the same device (the reference implementation)",
))
