"""Whether this thread's CPU arithmetic keeps subnormal numbers, as IEEE 754 and the oracle need.

A thread that flushes them reads every subnormal as zero (DAZ, denormals are zero) or
rounds every subnormal result to zero (FTZ, flush to zero): ``torch.set_flush_denormal(True)``
turns both on, and so does loading a library built with ``-ffast-math``.  The suite's
arithmetic on the host then sees a kernel's subnormal outputs, and the correctly rounded
values it rounds to a half or fp32 format, as zeros: a right kernel's outputs there are
judged wrong, a flushing kernel's exact, and torch's CPU softmax flushes too.  So the suite
judges nothing in that mode: the start of a run refuses a process that flushes, and each
kernel call must leave the mode as it found it (``harness/guard/calls.py``).
"""

from __future__ import annotations

import torch

SMALLEST_NORMAL = 2.2250738585072014e-308  # float64's; a multiple of 2^-1074, the smallest subnormal
SMALLEST_SUBNORMAL = 5e-324


def flushing(tiny: float = SMALLEST_SUBNORMAL, normal: float = SMALLEST_NORMAL) -> str | None:
    """What this thread flushes, in words, or None where it keeps subnormals.  The operands are arguments so that
    Python cannot fold the products into constants when it compiles this function."""
    modes = []
    if tiny * 2.0 == 0.0:
        modes.append("reads subnormal operands as zero (DAZ)")
    if normal * 0.5 == 0.0:
        modes.append("flushes subnormal results to zero (FTZ)")
    return " and ".join(modes) or None


def restore() -> str | None:
    """Turn flushing off in this thread where torch can (x86); what still flushes, or None."""
    torch.set_flush_denormal(False)
    return flushing()


def refusal(mode: str, when: str) -> str:
    """Why the suite judges nothing in a process whose CPU arithmetic flushes (``mode``, from :func:`flushing`)."""
    return (f"this process's CPU arithmetic {mode} {when}: the suite would read subnormal outputs and correctly "
            "rounded values as zeros (harness/internals/subnormals.py)")
