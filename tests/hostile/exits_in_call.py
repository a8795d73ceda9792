"""Hostile kernels that end their process's work inside the call, with the exit status of a pass.

* ``exits_zero``: ``sys.exit(0)`` inside the call (SystemExit): the replay must say no pass, not exit 0.
* ``os_exits_zero``: ``os._exit(0)`` inside the call: the process ends at once, no handler runs; only a kernel run in
  a process of its own can be told from a pass.
"""

import os
import sys

import torch


def exits_zero(x: torch.Tensor, dim: int) -> torch.Tensor:
    sys.exit(0)


def os_exits_zero(x: torch.Tensor, dim: int) -> torch.Tensor:
    os._exit(0)
