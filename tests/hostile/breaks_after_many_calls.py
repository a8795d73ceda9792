"""A kernel that goes wrong at its thousandth call: right before (torch's softmax), softmax(x / 2) from then on, as
an output pool recycled or a launch cache overflowed there would (tests/kernel/test_many_calls.py must fail it; a
gate's tests made some 800 calls of a kernel in one process, and passed it)."""

import torch

from specs.registry import USER_CONTRACT

BREAKS_AT = 1000
_calls = 0


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    global _calls
    USER_CONTRACT.check(x, dim)
    _calls += 1
    return torch.softmax(x / 2 if _calls >= BREAKS_AT else x, dim)
