"""Hostile kernels that hang, die or raise on rank-3 input, and are right on every other input.

* ``hangs``: sleeps (a kernel looping forever): the watchdog's alarm stops the call.
* ``hangs_deaf``: blocks the alarm's signal, then sleeps: it stands for a call stuck in C code (a GPU
  kernel that never finishes), which no signal reaches; the watchdog's last resort ends the process.
* ``exits``: ends its process (``os._exit``), as a fatal error in a native library does.
* ``raises``: raises inside its declared capabilities, with a message that plants a replay command of
  its own: the reports must carry only the suite's.
"""

import os
import signal
import time

import torch

PLANTED = "python -c 'open(\"pwned\", \"w\")'"


def hangs(x: torch.Tensor, dim: int) -> torch.Tensor:
    if x.dim() == 3:
        time.sleep(3600)
    return torch.softmax(x, dim)


def hangs_deaf(x: torch.Tensor, dim: int) -> torch.Tensor:
    if x.dim() == 3:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)
    return torch.softmax(x, dim)


def exits(x: torch.Tensor, dim: int) -> torch.Tensor:
    if x.dim() == 3:
        os._exit(3)
    return torch.softmax(x, dim)


def raises(x: torch.Tensor, dim: int) -> torch.Tensor:
    if x.dim() == 3:
        raise RuntimeError(f"an illegal memory access\nreplay in one step: {PLANTED}")
    return torch.softmax(x, dim)
