"""What softmax and log_softmax return for special values: the one place it is defined.

A row is one slice along the softmax dimension.  The rules follow
``torch.softmax`` / ``torch.log_softmax``, which follow IEEE propagation through
``exp(x - max(x)) / sum``:

=====================================  ==================  ====================
row contains                           softmax             log_softmax
=====================================  ==================  ====================
a NaN anywhere                         all NaN             all NaN
a +inf anywhere (inf - inf is NaN)     all NaN             all NaN
only -inf (an all -inf row)            all NaN             all NaN
-inf entries, finite maximum           0 at each -inf      -inf at each -inf
nothing (an empty row)                 empty               empty
=====================================  ==================  ====================

Everything else is ordinary arithmetic on the finite entries, which the oracles
compute to correct rounding.  Signs of zero in the input do not matter
(``exp(-0) == exp(+0)``).

Masked softmax (``masked_softmax(x, mask, dim)``, ``mask`` True = keep): masked
entries act as -inf (whatever they held, NaN included), and a row left with
nothing but -inf (fully masked, or whose kept entries are all -inf) gives all
zeros rather than NaN.  This is the "safe softmax" convention of PyTorch's
``_safe_softmax`` and of attention kernels: a query with nothing to attend to
contributes nothing, instead of poisoning later sums with NaN.  A NaN or +inf
among the kept entries still makes the row NaN.
"""

from __future__ import annotations

import numpy as np


def special_row(row: np.ndarray) -> np.ndarray | None:
    """The result for a row decided by its special values, or None.

    None means the row has a finite maximum and no NaN or +inf: its finite
    entries need arithmetic, its -inf entries give 0 (softmax) or -inf
    (log_softmax), see :func:`minus_inf_result`.
    """
    if row.size == 0:
        return row.astype(np.float64)
    if np.isnan(row).any() or np.isposinf(row).any() or np.isneginf(row).all():
        return np.full(row.shape, np.nan)
    return None


def minus_inf_result(*, log: bool = False) -> float:
    """Exact result at a -inf entry of a row with a finite maximum."""
    return -np.inf if log else 0.0



def empty_after_masking(masked: np.ndarray) -> np.ndarray:
    """Rows (last axis) that are all -inf once masked entries are -inf: their masked softmax is zero."""
    return np.isneginf(masked).all(axis=-1)
