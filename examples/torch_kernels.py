"""torch's own softmax, given to the suite the way a user gives a kernel: ``--kernel examples.torch_kernels:softmax``.

These are correct kernels that declare nothing: no precision profile (they are
judged with the loosest known arithmetic) and no invariance promised.  The
suite must pass them, under every profile; a failure is a false alarm of the
suite.  Each refuses what torch's contract excludes with the suite's own
clear errors (``USER_CONTRACT.check``), as a user's wrapper would.

* ``softmax``: ``torch.softmax`` on the input's device.
* ``declared_softmax``: ``torch.softmax``, its log_softmax and both backwards,
  declaring torch's own contract and the precision model the suite judges
  torch by (``specs.torch_softmax.torch_profile``: on CUDA it keeps two of
  torch's reported bugs, each read by one operation's bound alone): a model
  the suite uses for a registered kernel is a legal declaration on every
  device, in every operation.
* ``compiled_softmax``: ``torch.compile(torch.softmax, dynamic=True)``, Inductor's
  generated Triton kernel on GPUs (its C++ kernel on the CPU).  It is not batch
  or shift invariant bit for bit (its reduction plan changes with the batch), and
  promises neither.

Run from the checkout root (it is on ``sys.path`` there); a module elsewhere
needs its folder on ``PYTHONPATH``.
"""

from dataclasses import replace

import torch

from kernels import torch_softmax
from specs.registry import USER_CONTRACT
from specs.torch_softmax import TORCH_CONTRACT, torch_profile


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    USER_CONTRACT.check(x, dim)
    return torch.softmax(x, dim)


def declared_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    TORCH_CONTRACT.check(x, dim)
    return torch.softmax(x, dim)


def declared_log_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    TORCH_CONTRACT.check(x, dim)
    return torch.log_softmax(x, dim)


declared_softmax.capabilities = replace(TORCH_CONTRACT, masked=False, out_dtype=False, scaled=False, biased=False,
                                        causal=False)
declared_softmax.log_softmax = declared_log_softmax
declared_softmax.softmax_backward = torch_softmax.softmax_backward
declared_softmax.log_softmax_backward = torch_softmax.log_softmax_backward
declared_softmax.precision = torch_profile

_compiled = None


def compiled_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    global _compiled
    USER_CONTRACT.check(x, dim)
    if _compiled is None:  # compiled on first use: importing this module stays cheap
        _compiled = torch.compile(torch.softmax, dynamic=True)
    return _compiled(x, dim)
