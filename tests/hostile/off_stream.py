"""A hostile kernel that does its work on the device's default stream whatever stream its caller is on, as a CUDA
extension launching ``kernel<<<grid, block>>>`` with no stream does, and is right otherwise: it must fail
``tests/kernel/test_streams.py``, which calls it on another stream."""

import torch


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    with torch.cuda.stream(torch.cuda.default_stream(x.device)):
        return torch.softmax(x, dim)
