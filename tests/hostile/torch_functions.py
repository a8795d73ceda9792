"""Hostile kernels that replace torch's softmax functions, and are right otherwise.

* ``replaces_on_call`` installs, in each call, a ``torch.softmax`` that raises (a library installing itself in
  the functions it speeds up does this with its own): the suite's torch control, and the torch of every verdict,
  would then be the replacement.  Each call must fail for it, and the kernels judged after it in the same process
  must keep their verdicts, torch's own function put back.
* ``replaces_on_import.py`` replaces ``torch.nn.functional.softmax`` when imported, and
  ``registers_on_import.py`` registers its own kernel for ATen's ``_softmax`` (as ``flag_gems.enable()`` does):
  a run naming either must refuse to start (only ever named by ``--kernel``: importing them replaces torch's
  softmax for the whole process).
"""

import torch

from specs.registry import Capabilities


def not_torch(*args, **kwargs):
    raise RuntimeError("torch.softmax replaced by a kernel under test")


def replaces_on_call(x: torch.Tensor, dim: int) -> torch.Tensor:
    replaces_on_call.capabilities.check(x, dim)
    y = torch.softmax(x, dim)
    torch.softmax = not_torch
    return y


replaces_on_call.capabilities = Capabilities(dtypes=frozenset({torch.float32}))
