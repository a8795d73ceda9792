"""full_softmax's launch plans on CUDA, and the constants they take (tuned on an H100: docs/speed.md)."""

from __future__ import annotations

import math

import triton

from .plan import Plan, split_plan

GPU_ROW_ELEMENTS = 32768  # the longest row one program holds in registers, as fp32 values
GPU_SHORT_ROW_BYTES = 2048  # shorter rows share a tile of GPU_TILE_BYTES, GPU_TILE_THREAD_BYTES a thread,
GPU_TILE_BYTES = 4096
GPU_TILE_THREAD_BYTES = 32
GPU_WARP_ROW_BYTES = 512  # but longer ones two a warp: in 4 warps a row of 1 KB spans two, and its three
# reductions would meet through shared memory
GPU_THREAD_BYTES = 64  # a longer row: one a program, each thread holding four 16-byte loads of it,
GPU_WIDE_FP32_BYTES = 65536  # but fp32 rows from 16384 (three block-wide reductions each, their
GPU_WIDE_FP32_THREAD_BYTES = 256  # exact sum's among them) run faster in fewer warps: 64 values a thread
GPU_WARP_FP32_ROW_BYTES = 4096  # and fp32 rows of 1024 in one warp: their three reductions, one in int64,
# cost more across two warps than a warp's 32 values a thread; bf16 rows of 2048 run faster in more.
# A tile a program: persistent programs looping over tiles ran slower on many rows.
GPU_PROGRAMS_PER_UNIT = 32  # chunked rows: programs per SM at most; beyond that, programs loop over rows
GPU_CHUNK = 32768  # longer rows: chunks of this many elements, a program a row, warps as for a row of it
# Masked rows add a third stream (the mask) and run faster in more warps:
GPU_MASKED_ROW_BYTES = 65536  # one pass up to here (fp32 16384, half 32768), GPU_THREAD_BYTES a thread
GPU_MASKED_CHUNK = 16384
# Rows longer than this are split over programs instead of chunked:
GPU_CHUNKED_ROW_BYTES = 1 << 19
# A split row: a program a span of one tile, a row's spans on neighbouring programs; its
# statistics summed in GPU_SPLIT_STATS_WARPS, written in GPU_SPLIT_WRITE_WARPS.
GPU_SPLIT_SPAN = 4096
GPU_SPLIT_STATS_WARPS = 4
GPU_SPLIT_WRITE_WARPS = 8


def gpu_plan(n: int, n_rows: int, units: int, element_size: int, masked: bool = False) -> Plan:
    """CUDA: as many programs as the rows allow, each holding GPU_THREAD_BYTES a thread (fp32 rows
    of 1024 and shorter: a warp; of 16384 and longer: GPU_WIDE_FP32_THREAD_BYTES).

    Rows of up to GPU_ROW_ELEMENTS take one program and one pass (short rows share
    a tile of GPU_TILE_BYTES); longer rows are chunked, a program a row, the
    second pass rereading what L2 still holds; rows longer than
    GPU_CHUNKED_ROW_BYTES are split over programs, each taking a span.  Masked
    rows: GPU_MASKED_ROW_BYTES and GPU_MASKED_CHUNK.
    """
    row_bytes = n * element_size
    if n <= (GPU_MASKED_ROW_BYTES // element_size if masked else GPU_ROW_ELEMENTS):
        block = triton.next_power_of_2(max(n, 1))
        block_bytes = block * element_size
        if block_bytes <= GPU_WARP_ROW_BYTES:
            rows, warps = GPU_TILE_BYTES // block_bytes, GPU_TILE_BYTES // (32 * GPU_TILE_THREAD_BYTES)
        elif block_bytes < GPU_SHORT_ROW_BYTES:
            rows, warps = GPU_SHORT_ROW_BYTES // block_bytes, 1
        else:
            rows, warps = 1, gpu_row_warps(block, element_size, masked)
        return Plan("single", block, rows, warps, programs=math.ceil(n_rows / rows))
    if row_bytes <= GPU_CHUNKED_ROW_BYTES:
        chunk = GPU_MASKED_CHUNK if masked else GPU_CHUNK
        return Plan("chunked", chunk, 1, gpu_row_warps(chunk, element_size, masked),
                    programs=min(n_rows, units * GPU_PROGRAMS_PER_UNIT))
    return split_plan(Plan("split", GPU_SPLIT_SPAN, 1, GPU_SPLIT_STATS_WARPS,
                           splits=triton.next_power_of_2(math.ceil(n / GPU_SPLIT_SPAN)),
                           write_warps=GPU_SPLIT_WRITE_WARPS), n, n_rows)


def gpu_row_warps(block: int, element_size: int, masked: bool) -> int:
    """Warps for a program holding a block of one row (at least GPU_SHORT_ROW_BYTES)."""
    block_bytes = block * element_size
    if element_size == 4 and block_bytes <= GPU_WARP_FP32_ROW_BYTES and not masked:
        return 1
    wide_fp32 = element_size == 4 and block_bytes >= GPU_WIDE_FP32_BYTES and not masked
    return min(32, block_bytes // (32 * (GPU_WIDE_FP32_THREAD_BYTES if wide_fp32 else GPU_THREAD_BYTES)))
