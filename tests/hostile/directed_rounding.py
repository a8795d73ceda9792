"""A hostile kernel: softmax rounded toward +inf, every inexact output rounded up (half an ulp high on average).

``softmax`` computes torch.softmax in float64 and rounds the result to fp32
upward (the next fp32 value above whenever the float64 result is not
representable): each output lies within one ulp of the exact value, so every
element passes its bound, yet the outputs err high on average by half an ulp.
tests/kernel/test_statistical_bias.py must catch it (on CUDA, where Triton's exp is biased, on rows tied at their
max only).  ``softmax_to_nearest`` is the same kernel
rounding to nearest: it must pass (no false alarm).

Both declare fp32 only and nothing else: they are judged as kernels of unknown
construction (``--kernel tests.hostile.directed_rounding:softmax``).
"""

import torch

from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}))


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    wide = torch.softmax(x.double(), dim)
    nearest = wide.float()
    return torch.where(nearest.double() < wide, torch.nextafter(nearest, torch.full_like(nearest, torch.inf)), nearest)


def softmax_to_nearest(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    return torch.softmax(x.double(), dim).float()


softmax.capabilities = CAPABILITIES
softmax_to_nearest.capabilities = CAPABILITIES
