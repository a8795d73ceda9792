"""Hostile kernels that leave torch changed, and are right otherwise.

* ``replaces_on_call`` installs, in each call, a ``torch.softmax`` that raises (a library installing itself in
  the functions it speeds up does this with its own): the suite's torch control, and the torch of every verdict,
  would then be the replacement.  Each call must fail for it, and the kernels judged after it in the same process
  must keep their verdicts, torch's own function put back.
* ``sets_default_dtype`` leaves torch's default dtype float64: its callers' ``torch.tensor(1.0)`` would be float64
  ever after.  Each call must fail for it, the default put back.
* ``enters_a_mode`` leaves a torch function mode entered that turns every later ``torch.softmax`` into zeros (a
  profiling or tracing mode left on by an early return does as much to what it intercepts).  Each call must fail
  for it, and the kernels after it, torch's own among them, keep their verdicts.
* ``replaces_on_import.py`` replaces ``torch.nn.functional.softmax`` when imported, and
  ``registers_on_import.py`` registers its own kernel for ATen's ``_softmax`` (as ``flag_gems.enable()`` does):
  a run naming either must refuse to start (only ever named by ``--kernel``: importing them replaces torch's
  softmax for the whole process).
"""

import torch
from torch.overrides import TorchFunctionMode

from specs.registry import Capabilities


def not_torch(*args, **kwargs):
    raise RuntimeError("torch.softmax replaced by a kernel under test")


def replaces_on_call(x: torch.Tensor, dim: int) -> torch.Tensor:
    replaces_on_call.capabilities.check(x, dim)
    y = torch.softmax(x, dim)
    torch.softmax = not_torch
    return y


def sets_default_dtype(x: torch.Tensor, dim: int) -> torch.Tensor:
    sets_default_dtype.capabilities.check(x, dim)
    torch.set_default_dtype(torch.float64)
    return torch.softmax(x, dim)


class Zeros(TorchFunctionMode):
    """torch.softmax as zeros, every other torch function as it is."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        return torch.zeros_like(result) if func is torch.softmax else result


def enters_a_mode(x: torch.Tensor, dim: int) -> torch.Tensor:
    enters_a_mode.capabilities.check(x, dim)
    y = torch.softmax(x, dim)
    Zeros().__enter__()
    return y


replaces_on_call.capabilities = sets_default_dtype.capabilities = enters_a_mode.capabilities = Capabilities(
    dtypes=frozenset({torch.float32}))
