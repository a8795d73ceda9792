"""full_softmax's host side: its checks, which plan a call takes, and the launch of its kernels."""

from __future__ import annotations

import functools
import math

import torch

from ..launch import HAS_CLUSTER_LAYOUTS, compute_units, interpreted, require_triton_device
from ..limits import HALF_AND_SINGLE, InputLimits, dense
from .arithmetic import PRECISE, arithmetic
from .buffer_plan import buffer_plan
from .cuda_plan import ClusterCard, gpu_plan
from .launch_cache import CONTIGUOUS_CALLS, ContiguousLaunch, call_key, remember_contiguous_call
from .layout import MAX_OUTER_DIMS, row_layout
from .plan import Plan
from .triton_code import rows_kernel, split_stats_kernel, split_write_kernel
from .tuned_plans import card_plans

LIMITS = InputLimits(dtypes=HALF_AND_SINGLE)  # any rank, dim, strides and row length
CLUSTER_MAJORS = (9, 10)  # the compute capabilities whose rows may take the cluster path (cluster_card)


@functools.lru_cache(maxsize=4096)  # a pure function of its arguments, and on every call's path
def plan(shape: tuple[int, ...], dim: int, device: torch.device, element_size: int, masked: bool = False,
         log: bool = False, exact: bool = False) -> Plan:
    """The path and tile for a call.

    The tile, the warps and the path follow from the row length (and, on CUDA,
    whether the call is masked or a log_softmax, the card's tuned table and
    whether it runs the cluster path) alone: a row's sum must not change with
    the number of rows around it (batch invariance).  Only the program count may.
    ``exact``: the call sums exactly (fp32 outputs on CUDA, arithmetic.PRECISE),
    which bounds the cluster path's spans.
    """
    n = shape[dim]
    n_rows = max(math.prod(shape) // max(n, 1), 1)
    if device.type == "cuda" and not interpreted():
        clusters = None if log else cluster_card(device)  # log_softmax computes in float64 (arithmetic.WIDE)
        return gpu_plan(n, n_rows, compute_units(device), element_size, masked, card_plans(device), clusters,
                        exact)
    return buffer_plan(n, n_rows, device, element_size, compute_units(device), interpreted())


@functools.cache
def cluster_card(device: torch.device) -> ClusterCard | None:
    """The card's shared memory, registers (64 K an SM where torch does not say) and largest cluster (16 blocks),
    where the cluster path runs: NVIDIA's sm_90 and sm_100 families (Triton 3.9 lowers no ``st.async`` for
    sm_120's), Triton 3.9 and later, a torch that reports an SM's shared memory; else None.  ROCm's torch
    reports AMD cards as "cuda" devices, with capabilities of their own: no cluster path there."""
    if not HAS_CLUSTER_LAYOUTS or torch.version.hip:
        return None
    major = torch.cuda.get_device_capability(device)[0]
    properties = torch.cuda.get_device_properties(device)
    shared = getattr(properties, "shared_memory_per_multiprocessor", None)
    if major not in CLUSTER_MAJORS or not shared:
        return None
    return ClusterCard(shared, 16, getattr(properties, "regs_per_multiprocessor", None) or ClusterCard.registers)


def _run(x: torch.Tensor, dim: int, *, log: bool, mask: torch.Tensor | None,
         out_dtype: torch.dtype | None) -> torch.Tensor:
    if mask is None and isinstance(x, torch.Tensor) and dense(x):  # call_key reads strides
        launch = CONTIGUOUS_CALLS.get(call_key(x, dim, log, out_dtype))
        if launch is not None:
            return launch(x, torch.empty(x.shape, dtype=out_dtype or x.dtype, device=x.device))
    LIMITS.check(x, dim)
    require_triton_device(x)
    if out_dtype not in (None, x.dtype, torch.float32):
        raise TypeError(f"out_dtype must be None, x.dtype or torch.float32; got {out_dtype}")
    if mask is not None and (not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool
                             or mask.shape != x.shape or mask.device != x.device):
        raise ValueError(f"mask must be a bool tensor of x's shape {tuple(x.shape)} on {x.device}")
    if x.dim() == 0:
        scalar_mask = None if mask is None else mask.reshape(1)
        return _run(x.reshape(1), 0, log=log, mask=scalar_mask, out_dtype=out_dtype).reshape(())
    call = call_key(x, dim, log, out_dtype)
    dim %= x.dim()
    y = torch.empty(x.shape, dtype=out_dtype or x.dtype, device=x.device)
    if x.numel() == 0:
        return y
    n = x.shape[dim]
    n_rows = x.numel() // n
    arith = arithmetic(x.device, log, y.dtype)
    p = plan(tuple(x.shape), dim, x.device, x.element_size(), mask is not None, log, arith == PRECISE.value)
    tile = dict(ROWS=p.rows, BLOCK=p.block, CHUNKED=p.path == "chunked", LOG=log, ARITH=arith, num_warps=p.num_warps)
    if (mask is None and p.path in ("single", "chunked") and dim == x.dim() - 1 and x.stride(dim) == 1
            and (x.dim() <= 2 or x.is_contiguous())):
        launch = ContiguousLaunch((p.programs,), (n_rows, n, x.stride(0) if x.dim() == 2 else n, n), tile)
        remember_contiguous_call(call, launch)
        return launch(x, y)
    keep = None if mask is None else mask.view(torch.uint8)
    layout = row_layout([x, y] + ([keep] if keep is not None else []), dim)
    if layout is None:  # more than three index dims that will not merge: copy to contiguous once
        contiguous_mask = None if mask is None else mask.contiguous()
        return _run(x.contiguous(), dim, log=log, mask=contiguous_mask, out_dtype=out_dtype)
    sizes, (xs, ys, *rest) = layout
    ms = rest[0] if rest else [0] * MAX_OUTER_DIMS
    masked = keep is not None
    mask_arg, msd = (keep, keep.stride(dim)) if masked else (x, 0)
    aligned = all(stride % 16 == 0 for stride in xs + ys + ms)
    if p.path == "cluster":
        from .cluster_code import launch_cluster  # Gluon's cluster layouts: Triton 3.9 and later

        launch_cluster(y, x, n_rows, n, sizes, xs, ys, x.stride(dim), y.stride(dim), ctas=p.splits, span=p.span(n),
                       tile=p.block, num_warps=p.num_warps, arith=arith, aligned=aligned, held=p.held,
                       registers=p.registers)
        return y
    if p.path == "split":
        span, spans = p.span(n), p.spans(n)
        stats = torch.empty((n_rows, spans, 2), dtype=torch.float64 if arith >= PRECISE.value else torch.float32,
                            device=x.device)
        split_stats_kernel[(p.programs,)](
            stats, x, mask_arg, n_rows, n, span, spans, sizes[1], sizes[2], *xs, x.stride(dim), *ms, msd,
            BLOCK=p.block, MASKED=masked, ARITH=arith, num_warps=p.num_warps)
        split_write_kernel[(p.programs,)](
            y, x, mask_arg, stats, n_rows, n, span, spans, sizes[1], sizes[2], *xs, x.stride(dim), *ys, y.stride(dim),
            *ms, msd, SPLITS=p.splits, FULL=spans == p.splits, BLOCK=p.block, LOG=log, MASKED=masked, ARITH=arith,
            num_warps=p.write_warps or p.num_warps)
        return y
    rows_kernel[(p.programs,)](y, x, mask_arg, n_rows, n, sizes[1], sizes[2], *xs, x.stride(dim), *ys,
                               y.stride(dim), *ms, msd, MASKED=masked, ALIGNED=aligned, **tile)
    return y


def softmax(x: torch.Tensor, dim: int = -1, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Softmax of ``x`` along ``dim``; ``out_dtype=torch.float32`` returns fp32 for half inputs."""
    return _run(x, dim, log=False, mask=None, out_dtype=out_dtype)


def log_softmax(x: torch.Tensor, dim: int = -1, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    return _run(x, dim, log=True, mask=None, out_dtype=out_dtype)


def masked_softmax(x: torch.Tensor, mask: torch.Tensor, dim: int = -1,
                   out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Softmax where ``mask`` is True; rows left with nothing but -inf give zeros (safe softmax)."""
    return _run(x, dim, log=False, mask=mask, out_dtype=out_dtype)
