"""A right softmax whose module registers itself for ATen's softmax operator when imported, as
``flag_gems.enable()`` does for the operators it speeds up (tests/hostile/torch_state.py): every torch.softmax
in the process then runs it, and a run naming it must refuse to start."""

import torch

LIBRARY = torch.library.Library("aten", "IMPL")  # kept: the registration lasts as long as the library object


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(x, dim)


def _softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    shifted = x - x.amax(dim, keepdim=True)
    return shifted.exp() / shifted.exp().sum(dim, keepdim=True)


for key in ("CPU", "CUDA"):
    LIBRARY.impl("_softmax", _softmax, key)
