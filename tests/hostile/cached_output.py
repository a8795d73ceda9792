"""Hostile kernels around output buffers.

``noisy`` adds random one-ulp noise to torch's fp32 softmax and to its backward, and promises determinism: two
runs differ, so the promise is broken, in the forward and in the backward alike.  ``noisy_cached`` does the same
into one output buffer per shape, reused on every call: the caller's first result is overwritten by the second,
and comparing them compares a tensor with itself.  The suite must fail it for reusing its output, whatever else it
measures.
"""

import torch

from specs.registry import Capabilities

_BUFFERS: dict = {}


def one_ulp_noise(y: torch.Tensor) -> torch.Tensor:
    up = torch.rand(y.shape, device=y.device) < 0.5
    return torch.where(up, torch.nextafter(y, torch.full_like(y, 2.0)), y)


def noisy(x: torch.Tensor, dim: int) -> torch.Tensor:
    noisy.capabilities.check(x, dim)
    return one_ulp_noise(torch.softmax(x, dim))


def noisy_backward(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    noisy.capabilities.check_backward(grad, y, dim)
    return one_ulp_noise(torch._softmax_backward_data(grad, y, dim, y.dtype))


def noisy_cached(x: torch.Tensor, dim: int) -> torch.Tensor:
    buffer = _BUFFERS.setdefault((tuple(x.shape), x.dtype, x.device), torch.empty(x.shape, dtype=x.dtype,
                                                                                    device=x.device))
    return buffer.copy_(noisy(x, dim))


noisy.softmax_backward = noisy_backward
noisy.capabilities = Capabilities(dtypes=frozenset({torch.float32}), backward=True, promises=frozenset({"determinism"}))
noisy_cached.capabilities = Capabilities(dtypes=frozenset({torch.float32}), promises=frozenset({"determinism"}))
