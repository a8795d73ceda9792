"""Ordinary kernels that do what a kernel may, which the kernel process once failed or let flood the run:

* ``splits_over_processes``: softmax of its rows split over a ProcessPoolExecutor: it failed ("daemonic processes
  are not allowed to have children"); it passes;
* ``returns_a_padded_view``: the right softmax returned as a view of a padded buffer (rows 4096 apart): it failed as
  an answer that cannot cross (the buffer counted, not its view); its values cross, and it passes;
* ``prints_a_lot``: the right softmax, printing 1 MiB a call: its output went into the run's log whole (1.1 GB in a
  gate); it passes, and what it printed is kept, capped, with its test.
"""

import sys
from concurrent.futures import ProcessPoolExecutor

import torch

from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}), ranks=frozenset({2}), last_dim_only=True)
WIDTH = 4096  # the padded buffer's row stride


def _rows(rows: torch.Tensor) -> torch.Tensor:
    return torch.softmax(rows, -1)


def splits_over_processes(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    halves = [part.cpu().clone() for part in x.chunk(2)]  # copies: pickling shares a storage in place
    with ProcessPoolExecutor(2) as pool:
        return torch.cat(list(pool.map(_rows, halves))).to(x.device)


def returns_a_padded_view(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    if x.shape[1] > WIDTH:
        raise ValueError(f"x: rows of at most {WIDTH} columns")
    buffer = torch.empty(x.shape[0], WIDTH, dtype=x.dtype, device=x.device)
    buffer[:, :x.shape[1]] = torch.softmax(x, dim)
    return buffer[:, :x.shape[1]]


def prints_a_lot(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    sys.stdout.write("softmax! " * (1 << 17))
    sys.stdout.flush()
    return torch.softmax(x, dim)


for _kernel in (splits_over_processes, returns_a_padded_view, prints_a_lot):
    _kernel.capabilities = CAPABILITIES
returns_a_padded_view.capabilities = Capabilities(dtypes=frozenset({torch.float32}), ranks=frozenset({2}),
                                                  last_dim_only=True, max_row_length={"cpu": 4096, "cuda": 4096,
                                                                                      "npu": 4096})
