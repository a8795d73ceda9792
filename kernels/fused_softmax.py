"""The fused-softmax kernel of the source documents, as they wrote it.

Each program walks rows with a grid-stride loop (the Ascend tutorial's
persistent form), loads a whole row into one block of
``BLOCK_SIZE = next_power_of_2(n_cols)`` lanes with -inf in the padding,
subtracts the row maximum, exponentiates, sums, divides and stores.

The kernel body is the documents'; only the host function differs.  It takes the
program count from the device instead of a fixed 32, and it refuses, with a
clear error, every input the kernel would get wrong: the kernel ignores the
column stride, indexes with 32-bit offsets, and needs the row in one block.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import compute_units, require_triton_device
from .limits import HALF_AND_SINGLE, InputLimits


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    # Persistent programs: program p handles rows p, p + P, p + 2P, ...
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        # BLOCK_SIZE >= n_cols, so one block holds the whole row.
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        # Padding lanes read -inf: they cannot win the max and exp(-inf) adds 0.
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
        # Subtracting the maximum keeps exp from overflowing.
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output, mask=mask)


LIMITS = InputLimits(
    dtypes=HALF_AND_SINGLE,
    ranks=frozenset({2}),
    last_dim_only=True,
    unit_row_stride=True,  # the kernel adds col_offsets to the row pointer as if stride were 1
    # One block per row.  The interpreter takes Triton's largest block.  On an H100
    # (Triton 3.6) compiling the block takes 3.8 s at 2^16, 11 s at 2^17, 60 s at
    # 2^18 and over 8 minutes at 2^20 (docs/h100-precision-probe.log), so CUDA
    # stops at 2^17.  On Ascend the row, its exponentials and the output must fit
    # the 192 KB unified buffer.
    max_row_length={"cpu": tl.TRITON_MAX_TENSOR_NUMEL, "cuda": 1 << 17, "npu": 1 << 14},
    max_offset=2**31 - 1,  # row_idx * input_row_stride is 32-bit arithmetic
)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Row-wise softmax of a 2-D tensor with the documents' kernel."""
    LIMITS.check(x, dim)
    require_triton_device(x)
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    if y.numel() == 0:
        return y
    num_programs = min(compute_units(x.device), n_rows)
    softmax_kernel[(num_programs, 1, 1)](
        y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols)
    )
    return y
