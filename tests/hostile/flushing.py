"""Hostile kernels that leave this process's CPU arithmetic flushing subnormal numbers, and are right otherwise.

* ``flushes_on_call`` turns flushing on in each call (``torch.set_flush_denormal(True)``, as a library built
  with -ffast-math does when a call first loads it): the suite would then read subnormal outputs, its own
  correctly rounded values among them, as zeros.  Each call must fail for it, and the kernels judged after it
  in the same process must keep their verdicts.
* ``keeps_watch`` is right and raises when called in a process that flushes: it fails wherever the suite let
  the mode outlive the call that set it.
* ``flushes_on_import``'s module turns it on when imported (a module imported by a test would do it for the
  whole run, so this one is only ever named by ``--kernel``): the run must refuse to start.
"""

import torch

from specs.registry import Capabilities


def flushes_on_call(x: torch.Tensor, dim: int) -> torch.Tensor:
    flushes_on_call.capabilities.check(x, dim)
    torch.set_flush_denormal(True)
    return torch.softmax(x, dim)


def keeps_watch(x: torch.Tensor, dim: int) -> torch.Tensor:
    keeps_watch.capabilities.check(x, dim)
    if 5e-324 * (x.dim() + 1) == 0.0:  # a thread that reads subnormal operands as zero
        raise RuntimeError("called in a process that flushes subnormal numbers")
    return torch.softmax(x, dim)


flushes_on_call.capabilities = keeps_watch.capabilities = Capabilities(dtypes=frozenset({torch.float32}))
