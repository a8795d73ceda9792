"""A right softmax whose module installs itself as torch.nn.functional.softmax when imported
(tests/hostile/torch_state.py): a run naming it must refuse to start."""

import torch


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(x, dim)


torch.nn.functional.softmax = softmax
