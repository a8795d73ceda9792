"""A right softmax whose module turns on flushing subnormal numbers when imported, as a library built with
-ffast-math does when it loads (tests/hostile/flushing.py): a run naming it must refuse to start."""

import torch

torch.set_flush_denormal(True)


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(x, dim)
