"""The dims that index a call's rows, merged where the strides allow: the kernels take up to three."""

from __future__ import annotations

import torch

MAX_OUTER_DIMS = 3


def row_layout(tensors: list[torch.Tensor], dim: int) -> tuple[list[int], list[list[int]]] | None:
    """Sizes of the dims that index rows, with each tensor's strides for them.

    Dims merge where every tensor steps over the next one exactly; size-1 dims
    drop out.  None when more than three remain.
    """
    sizes: list[int] = []
    strides: list[list[int]] = [[] for _ in tensors]
    for d, n in enumerate(tensors[0].shape):
        if d == dim or n == 1:
            continue
        if sizes and all(st[-1] == t.stride(d) * n for st, t in zip(strides, tensors)):
            sizes[-1] *= n
            for st, t in zip(strides, tensors):
                st[-1] = t.stride(d)
        else:
            sizes.append(n)
            for st, t in zip(strides, tensors):
                st.append(t.stride(d))
    if len(sizes) > MAX_OUTER_DIMS:
        return None
    pad = MAX_OUTER_DIMS - len(sizes)
    return [1] * pad + sizes, [[0] * pad + st for st in strides]
