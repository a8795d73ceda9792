"""What of torch the suite relies on, kept as torch had it while kernels run: its softmax and its defaults.

* **torch's softmax**, the Python functions and the kernels torch's dispatcher
  runs for ATen's softmax operators: the suite's control kernel (``torch``)
  and the "torch on the same input" of every verdict call it.  A kernel that
  replaces it, as a library installs itself in the functions it speeds up
  (``torch.softmax = ...``, or a kernel registered for ATen's operator through
  ``torch.library``, as ``flag_gems.enable()`` does), would make that control
  a copy of the kernel and every comparison a comparison with itself: a
  kernel's failure would read "torch on the same input: the same error".
* **torch's global settings**: the default dtype and device (what
  ``torch.tensor(1.0)`` or ``torch.empty(n)`` give the kernel's caller
  afterwards), autocast, and the torch function and dispatch modes entered (a
  mode left on intercepts every later torch call, the suite's control
  included).  A kernel that changes them changes every program that calls it
  (the suite draws its inputs naming dtype and device, so they do not move).

A run whose kernel imports change any of these is refused at start, and a call
that changes one fails (``harness/guard/calls.py``): the suite puts back what it can;
a dispatcher registration it cannot undo fails every later call in the process.
"""

from __future__ import annotations

import torch

# (owner, attribute): the Python functions the suite's torch control and its peer calls reach.
WATCHED = ((torch, "softmax"), (torch, "log_softmax"), (torch, "_safe_softmax"),
           (torch.nn.functional, "softmax"), (torch.nn.functional, "log_softmax"),
           (torch.Tensor, "softmax"), (torch.Tensor, "log_softmax"))
# The ATen operators behind them, and the dispatch keys whose kernels compute them on each backend (the other keys,
# Meta and functorch's among them, torch fills in lazily).
OPERATORS = ("aten::_softmax", "aten::_log_softmax", "aten::_safe_softmax", "aten::softmax.int",
             "aten::log_softmax.int")
KEYS = ("CPU", "CUDA", "PrivateUse1", "CompositeImplicitAutograd[alias]", "CompositeExplicitAutograd[alias]")


# Why a change fails, in the words of every message that says so.
WHY = ("torch's softmax is the suite's torch control and every verdict's torch, and torch's defaults are every "
       "caller's (harness/internals/torch_state.py)")


def dispatch_kernels(operator: str) -> dict[str, str]:
    """The kernel registered for each of KEYS, as torch's dispatcher describes it (where it was registered)."""
    lines = torch._C._dispatch_dump(operator).splitlines()
    return {line.split(":", 1)[0]: line for line in lines if line.split(":", 1)[0] in KEYS}


def pop_function_modes(depth: int) -> None:
    while torch._C._len_torch_function_stack() > depth:
        torch._C._pop_torch_function_stack()


def pop_dispatch_modes(depth: int) -> None:
    from torch.utils._python_dispatch import _pop_mode

    while torch._C._len_torch_dispatch_stack() > depth:
        _pop_mode()


def set_default_device(device: torch.device) -> None:
    # None drops the default-device context (a torch function mode) altogether, as a process that never set one.
    torch.set_default_device(None if device == torch.device("cpu") else device)


# torch's global settings a kernel must leave as it found them: how each is read, and how it is put back (in this
# order: the default device's own mode goes before the others are popped).
SETTINGS = {
    "default dtype": (torch.get_default_dtype, torch.set_default_dtype),
    "default device": (torch.get_default_device, set_default_device),
    "autocast on the CPU": (lambda: torch.is_autocast_enabled("cpu"), lambda on: torch.set_autocast_enabled("cpu", on)),
    "autocast on CUDA": (lambda: torch.is_autocast_enabled("cuda"), lambda on: torch.set_autocast_enabled("cuda", on)),
    "torch function modes entered": (torch._C._len_torch_function_stack, pop_function_modes),
    "torch dispatch modes entered": (torch._C._len_torch_dispatch_stack, pop_dispatch_modes),
}

# torch's own, as :func:`remember` found them.
ORIGINAL: dict = {}
DISPATCH: dict[str, dict[str, str]] = {}
DEFAULTS: dict[str, object] = {}


def remember() -> None:
    """Take torch as it is now for torch's own: once the backend's library is loaded (torch_npu registers its
    kernels for ATen's operators when imported), before any kernel is imported."""
    ORIGINAL.clear()
    ORIGINAL.update({(owner, name): getattr(owner, name) for owner, name in WATCHED})
    DISPATCH.clear()
    DISPATCH.update({operator: dispatch_kernels(operator) for operator in OPERATORS})
    DEFAULTS.clear()
    DEFAULTS.update({name: read() for name, (read, _) in SETTINGS.items()})


def changed() -> list[str]:
    """What is no longer as remembered, in words: Python functions by name (torch.softmax), operators with the
    dispatch key of the kernel registered for them (aten::_softmax on CUDA), settings with their values."""
    functions = [f"{owner.__name__}.{name}" for (owner, name), function in ORIGINAL.items()
                 if getattr(owner, name) is not function]
    operators = [f"{operator} on {key.removesuffix('[alias]')}" for operator, kernels in DISPATCH.items()
                 for key, line in dispatch_kernels(operator).items() if kernels.get(key) != line]
    settings = [f"{name} ({DEFAULTS[name]}, now {value})" for name, (read, _) in SETTINGS.items()
                if DEFAULTS and (value := read()) != DEFAULTS[name]]
    return functions + operators + settings


def restore() -> str:
    """Put back what can be; what could not be undone, said."""
    for (owner, name), function in ORIGINAL.items():
        setattr(owner, name, function)
    for name, (read, put) in SETTINGS.items():
        if DEFAULTS and read() != DEFAULTS[name]:
            put(DEFAULTS[name])
    left = changed()
    return (f"the suite put back what it could, but cannot undo a kernel registered for {', '.join(left)}: every "
            "later call in this process fails" if left else "the suite put torch's back")
