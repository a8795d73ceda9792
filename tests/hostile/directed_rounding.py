"""A hostile kernel: softmax rounded toward +inf, every inexact output rounded up (half an ulp high on average).

``softmax`` computes torch.softmax in float64 and rounds the result to fp32
upward (the next fp32 value above whenever the float64 result is not
representable): each output lies within one ulp of the exact value, so every
element passes its bound, yet the outputs err high on average by half an ulp.
Its attention softmaxes (scaled, biased, causal) do the same on their logits,
scale * x + bias formed in float64.  tests/kernel/test_statistical_bias.py must
catch each (on CUDA, where Triton's exp is biased, on rows tied at their max
only for the plain softmax).  ``softmax_to_nearest`` is the same kernel
rounding to nearest: it must pass (no false alarm).

Both declare fp32 only and nothing else: they are judged as kernels of unknown
construction (``--kernel tests.hostile.directed_rounding:softmax``).
"""

import torch

from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}), scaled=True, biased=True, causal=True)


def upward(wide: torch.Tensor) -> torch.Tensor:
    """float64 values rounded to fp32 toward +inf."""
    nearest = wide.float()
    return torch.where(nearest.double() < wide, torch.nextafter(nearest, torch.full_like(nearest, torch.inf)), nearest)


def to_nearest(wide: torch.Tensor) -> torch.Tensor:
    return wide.float()


def kernel(rounding):
    """The kernel whose outputs, the softmaxes of its logits in float64, are rounded to fp32 by ``rounding``."""

    def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
        CAPABILITIES.check(x, dim)
        return rounding(torch.softmax(x.double(), dim))

    def scaled_softmax(x: torch.Tensor, scale: float, dim: int = -1) -> torch.Tensor:
        CAPABILITIES.check_scaled(x, dim, scale)
        return rounding(torch.softmax(x.double() * scale, dim))

    def biased_softmax(x: torch.Tensor, bias: torch.Tensor, scale: float, dim: int = -1) -> torch.Tensor:
        CAPABILITIES.check_scaled(x, dim, scale, bias)
        return rounding(torch.softmax(x.double() * scale + bias.double(), dim))

    def causal_softmax(x: torch.Tensor, scale: float) -> torch.Tensor:
        CAPABILITIES.check_scaled(x, -1, scale)
        if x.dim() < 2:
            raise ValueError(f"x must have at least 2 dims (rows and columns of the causal mask); got {x.dim()}")
        above = torch.ones(x.shape[-2:], dtype=torch.bool, device=x.device).triu(1)
        return rounding(torch.softmax((x.double() * scale).masked_fill(above, -torch.inf), -1))

    softmax.scaled_softmax, softmax.biased_softmax = scaled_softmax, biased_softmax
    softmax.causal_softmax, softmax.capabilities = causal_softmax, CAPABILITIES
    return softmax


softmax = kernel(upward)
softmax_to_nearest = kernel(to_nearest)
