"""The softmax kernels people already use, measured on the suite's terms.

* ``liger``: Liger-Kernel's Triton softmax (``LigerSoftmaxFunction``) and its
  backward: the last dim of any shape, fp32/fp16/bf16, rows of 1 to 65536
  elements (version 0.8.5 has one block per row and nothing beyond, and fails
  on rows of length zero).
* ``flag_gems``: FlagGems' softmax, log_softmax and their backwards
  (``flag_gems.ops``): any dim, fp32/fp16/bf16, and fp32 output of half input
  (``half_to_float``).
* ``flag_gems_scaled``: FlagGems' scaled softmax (``flag_gems.ops.scaled_softmax_forward``,
  Megatron's ``scaled_softmax``): softmax(scale * x) over the last dim of a 4-D tensor, fp16/bf16,
  rows of up to 16384 (its softmax is the same with a scale of 1).
* ``inductor``: ``torch.compile`` (``dynamic=True``) of torch.softmax,
  torch.log_softmax and their backwards (``torch._softmax_backward_data``,
  ``torch._log_softmax_backward_data``), and of the eager expressions of the
  scaled, biased and causal softmaxes: the Triton kernels Inductor generates
  on GPUs.
* ``quack``: QuACK's softmax (``quack.softmax``, quack-kernels 0.6.5), written
  in NVIDIA's CuTe DSL for Hopper and Blackwell, not Triton: the last dim,
  fp32/fp16/bf16, rows of up to 2^18 elements, on NVIDIA GPUs only.

Each library is imported on first use, never at import: where it is absent,
its adapter raises only when called.  Each refuses as its library does (any
exception, as torch does), and the adapters add only the refusals of inputs
outside the limits below.  Their records are in ``specs/peers.py``.
"""

from __future__ import annotations

import functools
import importlib
import math

import torch

from .limits import FLOATING, HALF_AND_SINGLE, InputLimits
from .torch_softmax import biased_expression, causal_expression, scaled_expression

LIGER_MAX_ROW = 65536


# ---------------------------------------------------------------------------- Liger-Kernel

# Rows of length zero: its reshape to (-1, 0) raises (docs/findings/liger-kernel.md).
LIGER = InputLimits(dtypes=HALF_AND_SINGLE, last_dim_only=True, empty_rows=False,
                    max_row_length={"cpu": LIGER_MAX_ROW, "cuda": LIGER_MAX_ROW, "npu": LIGER_MAX_ROW})


def liger_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    LIGER.check(x, dim)
    from liger_kernel.ops.softmax import LigerSoftmaxFunction

    return LigerSoftmaxFunction.apply(x)


def liger_softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """What LigerSoftmaxFunction.backward runs: its _softmax_backward with the block its forward chose for the row."""
    LIGER.check_backward(grad, y, dim)
    from liger_kernel.ops.softmax import _softmax_backward
    from liger_kernel.ops.utils import calculate_settings

    block, num_warps = calculate_settings(y.size(-1))
    return _softmax_backward(grad, y, block, num_warps, y.size(-1) > block)


# ---------------------------------------------------------------------------- FlagGems

FLAG_GEMS = InputLimits(dtypes=HALF_AND_SINGLE)


def half_to_float(x: torch.Tensor, out_dtype: torch.dtype | None) -> bool:
    """FlagGems' (and aten's) flag for an fp32 result of half input."""
    if out_dtype not in (None, x.dtype, torch.float32):
        raise TypeError(f"out_dtype must be None, x.dtype or torch.float32; got {out_dtype}")
    return out_dtype == torch.float32 and x.dtype != torch.float32


def flag_gems_softmax(x: torch.Tensor, dim: int, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    FLAG_GEMS.check(x, dim)
    return importlib.import_module("flag_gems.ops").softmax(x, dim, half_to_float(x, out_dtype))


def flag_gems_log_softmax(x: torch.Tensor, dim: int, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    FLAG_GEMS.check(x, dim)
    return importlib.import_module("flag_gems.ops").log_softmax(x, dim, half_to_float(x, out_dtype))


def flag_gems_softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    FLAG_GEMS.check_backward(grad, y, dim)
    return importlib.import_module("flag_gems.ops").softmax_backward(grad, y, dim, y.dtype)


def flag_gems_log_softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    FLAG_GEMS.check_backward(grad, y, dim)
    return importlib.import_module("flag_gems.ops").log_softmax_backward(grad, y, dim, y.dtype)


# Its own asserts: 4-D, fp16/bf16, rows of at most 16384 (a multiple of 8, more than one query: the adapter pads
# those, below).
FLAG_GEMS_SCALED = InputLimits(dtypes=frozenset({torch.float16, torch.bfloat16}), ranks=frozenset({4}),
                               last_dim_only=True, max_row_length={"cuda": 16384, "npu": 16384})
FLAG_GEMS_SCALED_ROW_MULTIPLE = 8


def flag_gems_scaled_softmax(x: torch.Tensor, scale: float, dim: int = -1) -> torch.Tensor:
    """softmax(scale * x) by FlagGems' scaled_softmax_forward.  It asserts a row length that is a multiple of 8 and
    more than one query per head: the adapter pads a row with -inf (which adds nothing to a sum) and a lone query
    with a copy of itself, then returns the part asked for; an input that fits goes in as given, layout and all."""
    FLAG_GEMS_SCALED.check_scaled(x, dim, scale)
    if not x.numel():
        return torch.empty_like(x)
    padding = -x.size(-1) % FLAG_GEMS_SCALED_ROW_MULTIPLE
    given = torch.nn.functional.pad(x, (0, padding), value=-math.inf) if padding else x
    if given.size(2) == 1:
        given = torch.cat([given, given], dim=2)
    y = importlib.import_module("flag_gems.ops").scaled_softmax_forward(given, scale)
    return y[:, :, :x.size(2), :x.size(3)] if y.shape != x.shape else y


def flag_gems_softmax_by_scaled(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """softmax(x): the scaled softmax with a scale of 1."""
    return flag_gems_scaled_softmax(x, 1.0, dim)


# ---------------------------------------------------------------------------- Inductor

INDUCTOR = InputLimits(dtypes=FLOATING)


@functools.cache
def compiled(function):
    """``function`` compiled by Inductor once, on first use (importing this module stays cheap)."""
    return torch.compile(function, dynamic=True)


# Eager torch.softmax refuses integer tensors; Inductor's kernel returns integer zeros for them
# (docs/findings/inductor.md), so the adapter refuses them itself, as declared.
def inductor_softmax(x: torch.Tensor, dim: int, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    INDUCTOR.check(x, dim)
    return compiled(torch.softmax)(x, dim, dtype=out_dtype)


def inductor_log_softmax(x: torch.Tensor, dim: int, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    INDUCTOR.check(x, dim)
    return compiled(torch.log_softmax)(x, dim, dtype=out_dtype)


def softmax_backward_data(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    return torch._softmax_backward_data(grad, y, dim, y.dtype)


def log_softmax_backward_data(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    return torch._log_softmax_backward_data(grad, y, dim, y.dtype)


def inductor_softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    INDUCTOR.check_backward(grad, y, dim)
    return compiled(softmax_backward_data)(grad, y, dim)


def inductor_log_softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    INDUCTOR.check_backward(grad, y, dim)
    return compiled(log_softmax_backward_data)(grad, y, dim)


def inductor_scaled_softmax(x: torch.Tensor, scale: float, dim: int) -> torch.Tensor:
    INDUCTOR.check_scaled(x, dim, scale)
    return compiled(scaled_expression)(x, scale, dim)


def inductor_biased_softmax(x: torch.Tensor, bias: torch.Tensor, scale: float, dim: int) -> torch.Tensor:
    INDUCTOR.check_scaled(x, dim, scale, bias)
    return compiled(biased_expression)(x, bias, scale, dim)


def inductor_causal_softmax(x: torch.Tensor, scale: float) -> torch.Tensor:
    INDUCTOR.check_scaled(x, -1, scale)
    if x.dim() < 2:
        raise ValueError(f"x must have at least 2 dims (rows and columns of the causal mask); got {x.dim()}")
    return compiled(causal_expression)(x, scale)


# ---------------------------------------------------------------------------- QuACK

# A row lives in shared memory, split over a cluster of up to 16 blocks: 2^18 is the longest row
# quack-kernels 0.6.5's own tests run (at 2^20, fp32 needs 256 KiB of shared memory per block,
# more than a Hopper block has).
QUACK_MAX_ROW = 1 << 18
QUACK = InputLimits(dtypes=HALF_AND_SINGLE, last_dim_only=True, max_row_length={"cuda": QUACK_MAX_ROW})
# It takes 2-D row-major tensors whose rows start on 16 bytes and are read in 16-byte vectors (it
# asserts that the row length is a multiple of one), so the adapter lays rows out so; a row of
# another length is padded with -inf, which adds nothing to the sum, as its kernel pads a tile's tail.
QUACK_VECTOR_BYTES = 16


def quack_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    QUACK.check(x, dim)
    if not x.numel():
        return torch.empty_like(x)
    rows = x.reshape(-1, x.size(-1)) if x.dim() else x.reshape(1, 1)
    length = rows.size(1)
    padding = -length % (QUACK_VECTOR_BYTES // x.element_size())
    if padding:
        rows = torch.nn.functional.pad(rows, (0, padding), value=-math.inf)
    elif not rows.is_contiguous() or rows.data_ptr() % QUACK_VECTOR_BYTES:
        rows = rows.clone(memory_format=torch.contiguous_format)
    y = importlib.import_module("quack").softmax(rows)
    return (y[:, :length] if padding else y).reshape(x.shape)
