"""torch's own softmax, given to the suite the way a user gives a kernel: ``--kernel examples.torch_kernels:softmax``.

These are correct kernels that declare nothing: no precision profile (they are
judged with the loosest known arithmetic) and no invariance promised.  The
suite must pass them, under every profile; a failure is a false alarm of the
suite.  Each refuses what torch's contract excludes with the suite's own
clear errors (``USER_CONTRACT.check``), as a user's wrapper would.

* ``softmax``: ``torch.softmax`` on the input's device.
* ``compiled_softmax``: ``torch.compile(torch.softmax, dynamic=True)``, Inductor's
  generated Triton kernel on GPUs (its C++ kernel on the CPU).  It is not batch
  or shift invariant bit for bit (its reduction plan changes with the batch), and
  promises neither.

Run from the checkout root (it is on ``sys.path`` there); a module elsewhere
needs its folder on ``PYTHONPATH``.
"""

import torch

from specs.registry import USER_CONTRACT


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    USER_CONTRACT.check(x, dim)
    return torch.softmax(x, dim)


_compiled = None


def compiled_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    global _compiled
    USER_CONTRACT.check(x, dim)
    if _compiled is None:  # compiled on first use: importing this module stays cheap
        _compiled = torch.compile(torch.softmax, dynamic=True)
    return _compiled(x, dim)
