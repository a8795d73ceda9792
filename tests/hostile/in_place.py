"""Hostile kernels that write into their input: the oracle must judge the input as it was before the call.

* ``zeroes_input`` returns uniform rows (off by up to 0.99) and zeroes its input's storage: judged against
  the softmax of what it left behind, it would be exact.
* ``writes_result_into_input`` computes a correct softmax, writes it into x and returns x.
* ``transposes_input`` returns the softmax of a matrix along the other dim, transposed, and transposes its
  input in place (``x.t_()``: not a byte changes): judged against the input it left, it would be exact.
* ``declared_in_place`` does the same and says so (``Capabilities(in_place=True)``): it is correct.
* ``zeroes_bias``'s biased softmax returns the softmax of ``scale * x`` and zeroes its bias: judged against the bias
  it left, it would be exact.
* ``zeroes_gradient``'s softmax backward returns zeros and zeroes its gradient: judged against the gradient it left,
  exact too.
"""

import torch

from specs.registry import Capabilities

FP32 = frozenset({torch.float32})


def zeroes_input(x: torch.Tensor, dim: int) -> torch.Tensor:
    zeroes_input.capabilities.check(x, dim)
    y = torch.full(x.shape, 1 / max(x.shape[dim], 1), dtype=x.dtype, device=x.device)
    torch.empty(0, dtype=torch.uint8, device=x.device).set_(x.untyped_storage()).zero_()
    return y


def writes_result_into_input(x: torch.Tensor, dim: int) -> torch.Tensor:
    writes_result_into_input.capabilities.check(x, dim)
    return x.copy_(torch.softmax(x, dim)) if x.numel() else x


def transposes_input(x: torch.Tensor, dim: int) -> torch.Tensor:
    transposes_input.capabilities.check(x, dim)
    if x.dim() != 2:
        return torch.softmax(x, dim)
    y = torch.softmax(x, 1 - dim % 2).t().contiguous()
    x.t_()
    return y


def declared_in_place(x: torch.Tensor, dim: int) -> torch.Tensor:
    declared_in_place.capabilities.check(x, dim)
    return x.copy_(torch.softmax(x, dim))


zeroes_input.capabilities = Capabilities(dtypes=FP32)
writes_result_into_input.capabilities = Capabilities(dtypes=FP32, ranks=frozenset({2}))  # no expanded views
declared_in_place.capabilities = Capabilities(dtypes=FP32, ranks=frozenset({2}), in_place=True)
transposes_input.capabilities = Capabilities(dtypes=FP32, ranks=frozenset({2}))


def zeroes_bias(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(x, dim)


def biased_softmax(x: torch.Tensor, bias: torch.Tensor, scale: float, dim: int) -> torch.Tensor:
    zeroes_bias.capabilities.check_scaled(x, dim, scale, bias)
    bias.zero_()
    return torch.softmax(x * scale, dim)


def zeroes_gradient(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(x, dim)


def softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    zeroes_gradient.capabilities.check_backward(grad, y, dim)
    grad.zero_()
    return torch.zeros_like(y)


zeroes_bias.capabilities = Capabilities(dtypes=FP32, ranks=frozenset({2}), biased=True)
zeroes_bias.biased_softmax = biased_softmax
zeroes_gradient.capabilities = Capabilities(dtypes=FP32, ranks=frozenset({2}), backward=True)
zeroes_gradient.softmax_backward = softmax_backward
