"""Inputs a test builds itself (not drawn by Hypothesis), built inside the kernel's declared capabilities.

A fixed input outside them meets the kernel's refusal: a false fail of a correct kernel, or a property left
untested.  Each test that builds one takes from here the dtype it builds in, the rank it lays its rows out in and
the longest row it may use; an input that stays outside (its dim, layout or row length is its point) is skipped
naming the refusal, or, a Hypothesis example, left out.  The audit of every such test:
docs/testing.md, "Fixed inputs inside the declared capabilities".
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from specs.registry import Capabilities

from .strategies import Case


def fixed_dtype(capabilities: Capabilities) -> torch.dtype:
    """The dtype a fixed input is built in: fp32 where the kernel declares it, else the first it declares (by name)."""
    return torch.float32 if torch.float32 in capabilities.dtypes else sorted(capabilities.dtypes, key=str)[0]


def rows_rank(capabilities: Capabilities, rows: int) -> int | None:
    """The rank an input of ``rows`` rows (softmax over its last dim) is laid out in: 2, else the smallest declared
    rank above 2 (leading dims of 1), else 1 for a single row; None where no declared rank holds that many rows."""
    ranks = capabilities.ranks
    if ranks is None or 2 in ranks:
        return 2
    above = [rank for rank in ranks if rank > 2]
    if above:
        return min(above)
    return 1 if rows == 1 and 1 in ranks else None


def in_rank(rows: torch.Tensor, rank: int) -> torch.Tensor:
    """Rows (2-D) as an input of ``rank``: under leading dims of 1 above rank 2; at rank 1, the one row itself."""
    return rows.reshape((1,) * (rank - 2) + tuple(rows.shape) if rank >= 2 else rows.shape[-1:])


def row_inputs(capabilities: Capabilities, rows: torch.Tensor,
               mask: torch.Tensor | None = None) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Rows (2-D, softmax over the last dim) and their keep-mask as inputs of a rank the kernel declares: all of them
    in one input of :func:`rows_rank`, or, where no declared rank holds several rows, one input a row."""
    rank = rows_rank(capabilities, rows.shape[0])
    if rank is None:
        return [(rows[r], None if mask is None else mask[r]) for r in range(rows.shape[0])]
    return [(in_rank(rows, rank), None if mask is None else in_rank(mask, rank))]


def longest_fixed_row(capabilities: Capabilities, backend: str, rows: int = 1) -> int | None:
    """The longest row of a fixed input of ``rows`` contiguous rows that the kernel takes on ``backend``: within its
    row limit there, and within the last element offset its index arithmetic reaches; None where neither limits it."""
    limits = [capabilities.row_limit(backend)]
    if capabilities.max_offset is not None:
        limits.append((capabilities.max_offset + 1) // max(rows, 1))
    limits = [limit for limit in limits if limit is not None]
    return min(limits) if limits else None


def case_inside(case: Case, capabilities: Capabilities) -> Case:
    """A fixed case in a dtype and rank the kernel declares, where it is in others: :func:`fixed_dtype`, and the rank of
    :func:`rows_rank` above the case's (leading dims of 1, the layout kept on the others).  Its dim, layout and row
    length stay: where those are outside the capabilities they are the case's point, and it stays refused."""
    if case.dtype not in capabilities.dtypes:
        case = replace(case, dtype=fixed_dtype(capabilities))
    rank = len(case.shape)
    if capabilities.ranks is None or rank in capabilities.ranks:
        return case
    target = rows_rank(capabilities, math.prod(n for d, n in enumerate(case.shape) if d != case.dim))
    if target is None or target <= rank:
        return case
    k = target - rank
    layout = case.layout
    if layout is not None:
        layout = replace(layout, order=tuple(range(k)) + tuple(d + k for d in layout.order),
                         steps=(1,) * k + layout.steps, expanded=tuple(d + k for d in layout.expanded))
    return replace(case, shape=(1,) * k + case.shape, dim=case.dim + k, layout=layout)
