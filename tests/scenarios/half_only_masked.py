"""Scenario for tests/suite/test_fixed_inputs.py: correct kernels, as a user writes them, that declare fp16 and bf16
only, softmax and masked softmax over the last dim.

* ``softmax``: rank 2;
* ``softmax_rank_3``: rank 3 only, rows of at most 32 elements (one warp's lanes) on every device.

Every test of ``tests/kernel`` must build its inputs inside these capabilities: a test that builds an fp32 input,
another rank or a longer row meets the kernel's refusal, a false fail.  Both compute in fp32 with torch and round once
to the input's dtype, so they are judged by torch's own arithmetic (``precision``), without its reported bugs (which
a declared model may not take: specs.registry.declared_profile).
"""

from dataclasses import replace

import torch

from oracles.profiles import correct_construction
from specs.registry import Capabilities
from specs.torch_softmax import torch_profile

HALF = frozenset({torch.float16, torch.bfloat16})
CAPABILITIES = Capabilities(dtypes=HALF, ranks=frozenset({2}), last_dim_only=True, masked=True)
RANK_3 = replace(CAPABILITIES, ranks=frozenset({3}), max_row_length={"cpu": 32, "cuda": 32, "npu": 32})


def computed(capabilities: Capabilities, x: torch.Tensor, mask: torch.Tensor | None, dim: int) -> torch.Tensor:
    """The softmax of x in fp32, rounded once to x's dtype; masked entries (``mask`` False) count as -inf, and a row
    left with nothing but -inf is zeros (safe softmax)."""
    capabilities.check(x, dim)
    if mask is None:
        return torch.softmax(x.float(), dim).to(x.dtype)
    if mask.dtype != torch.bool or mask.shape != x.shape:
        raise ValueError(f"mask must be a bool tensor of x's shape {tuple(x.shape)}; got {mask.dtype} {tuple(mask.shape)}")
    return torch._safe_softmax(x.float().masked_fill(~mask, -torch.inf), dim).to(x.dtype)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return computed(CAPABILITIES, x, None, dim)


def masked_softmax(x: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return computed(CAPABILITIES, x, mask, dim)


def softmax_rank_3(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return computed(RANK_3, x, None, dim)


def masked_softmax_rank_3(x: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return computed(RANK_3, x, mask, dim)


def precision(call):
    profile = torch_profile(call)
    return replace(profile, arithmetic=correct_construction(profile.arithmetic))


for function, capabilities, masked in ((softmax, CAPABILITIES, masked_softmax),
                                       (softmax_rank_3, RANK_3, masked_softmax_rank_3)):
    function.capabilities = capabilities
    function.masked_softmax = masked
    function.precision = precision
    function.promises = ("determinism",)
