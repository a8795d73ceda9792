"""torch's softmax as torch defines it, kept so while kernels run.

The suite's control kernel (``torch``) and the "torch on the same input" of
every verdict call torch's softmax functions.  A kernel that replaces one, as
a library installs itself in the functions it speeds up (``torch.softmax =
...`` in Python, or a kernel registered for ATen's operator through
``torch.library``, as ``flag_gems.enable()`` does), would make that control a
copy of the kernel and every comparison a comparison with itself: a kernel's
failure would read "torch on the same input: the same error".  So a run whose
kernel imports replace one is refused at start, and a call that replaces one
fails (``harness/calls.py``): the suite puts torch's Python functions back; a
registration it cannot undo fails every later call in the process.
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


def dispatch_kernels(operator: str) -> dict[str, str]:
    """The kernel registered for each of KEYS, as torch's dispatcher describes it (where it was registered)."""
    lines = torch._C._dispatch_dump(operator).splitlines()
    return {line.split(":", 1)[0]: line for line in lines if line.split(":", 1)[0] in KEYS}


# torch's own, as :func:`remember` found them.
ORIGINAL: dict = {}
DISPATCH: dict[str, dict[str, str]] = {}


def remember() -> None:
    """Take torch's softmax as it is now as torch's own: once the backend's library is loaded (torch_npu registers
    its kernels for ATen's operators when imported), before any kernel is imported."""
    ORIGINAL.clear()
    ORIGINAL.update({(owner, name): getattr(owner, name) for owner, name in WATCHED})
    DISPATCH.clear()
    DISPATCH.update({operator: dispatch_kernels(operator) for operator in OPERATORS})


def replaced() -> list[str]:
    """What is no longer torch's own: Python functions by name (torch.softmax), operators with the dispatch key
    of the kernel registered for them (aten::_softmax on CUDA)."""
    functions = [f"{owner.__name__}.{name}" for (owner, name), function in ORIGINAL.items()
                 if getattr(owner, name) is not function]
    operators = [f"{operator} on {key.removesuffix('[alias]')}" for operator, kernels in DISPATCH.items()
                 for key, line in dispatch_kernels(operator).items() if kernels.get(key) != line]
    return functions + operators


def restore() -> str:
    """Put torch's own Python functions back; what could not be undone, said."""
    for (owner, name), function in ORIGINAL.items():
        setattr(owner, name, function)
    left = replaced()
    return (f"the suite put torch's Python functions back, but cannot undo a kernel registered for "
            f"{', '.join(left)}: every later call in this process fails" if left else "the suite put torch's back")
