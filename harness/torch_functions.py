"""torch's softmax functions as torch defines them, kept so while kernels run.

The suite's control kernel (``torch``) and the "torch on the same input" of
every verdict call torch's functions by name.  A kernel that replaces one, as
a library installs itself in the functions it speeds up, would make that
control a copy of the kernel and every comparison a comparison with itself: a
kernel's failure would read "torch on the same input: the same error".  So a
run whose kernel imports replace one is refused at start, and a call that
replaces one fails, the suite putting torch's back (``harness/calls.py``).
"""

from __future__ import annotations

import torch

# (owner, attribute): the functions the suite's torch control and its peer calls reach.
WATCHED = ((torch, "softmax"), (torch, "log_softmax"), (torch, "_safe_softmax"),
           (torch.nn.functional, "softmax"), (torch.nn.functional, "log_softmax"),
           (torch.Tensor, "softmax"), (torch.Tensor, "log_softmax"))
# torch's own, taken when the suite's plugins load, before any kernel is imported.
ORIGINAL = {(owner, name): getattr(owner, name) for owner, name in WATCHED}


def replaced() -> list[str]:
    """The watched functions that are no longer torch's own, by name (torch.softmax...)."""
    return [f"{owner.__name__}.{name}" for (owner, name), function in ORIGINAL.items()
            if getattr(owner, name) is not function]


def restore() -> None:
    """Put torch's own functions back."""
    for (owner, name), function in ORIGINAL.items():
        setattr(owner, name, function)
