"""Launches of full_softmax remembered by call: a repeated call skips its checks, its plan and Triton's binding.

On short rows each host microsecond shows (docs/speed.md): everything ``host._run``
checks and plans for a call that takes ``contiguous_rows_kernel``, and every
argument Triton specialises on, follows from the call's key alone, so a repeat
goes straight to the launch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..launch import interpreted
from .triton_code import contiguous_rows_kernel


@dataclass
class ContiguousLaunch:
    """How a call that takes contiguous_rows_kernel launches, and, once it has run on CUDA, the
    compiled kernel's own launcher: a repeat then skips Triton's binding of the arguments and
    its lookup of the variant they select."""

    grid: tuple[int]
    sizes: tuple[int, int, int, int]  # n_rows, n_cols and the row strides of x and y
    tile: dict  # the constexprs and num_warps, by name
    launcher: object = None  # the compiled kernel's launcher (CUDA), after the first call
    constexprs: tuple = ()  # the launcher takes them positionally, after the other arguments

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.launcher is not None:
            self.launcher(y, x, *self.sizes, *self.constexprs)
            return y
        compiled = contiguous_rows_kernel[self.grid](y, x, *self.sizes, **self.tile)
        if x.device.type == "cuda" and not interpreted():
            names = contiguous_rows_kernel.arg_names[2 + len(self.sizes):]
            self.constexprs = tuple(self.tile[name] for name in names)
            self.launcher = compiled[self.grid + (1, 1)]
        return y


# Calls already checked and planned that take contiguous_rows_kernel, by call_key.
CONTIGUOUS_CALLS: dict[tuple, ContiguousLaunch] = {}
MAX_CONTIGUOUS_CALLS = 4096


def call_key(x: torch.Tensor, dim: int, log: bool, out_dtype: torch.dtype | None) -> tuple:
    """What a call's launch depends on; with whether x starts 16-byte aligned, which Triton
    specialises on (a view of a tensor, of the same shape and strides, may not)."""
    return x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16 == 0, dim, log, out_dtype


def remember_contiguous_call(call: tuple, launch: ContiguousLaunch) -> None:
    if len(CONTIGUOUS_CALLS) >= MAX_CONTIGUOUS_CALLS:
        CONTIGUOUS_CALLS.clear()
    CONTIGUOUS_CALLS[call] = launch
