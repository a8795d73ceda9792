"""full_softmax's launch plans under the Triton interpreter and on Ascend, and the constants they take.

Ascend's vector cores compute out of a 192 KB unified buffer: tiles are sized
to it, and programs are persistent, a few per vector core.  The interpreter
takes the same plans with small blocks, so that tests of modest size reach
the chunked and split paths too.
"""

from __future__ import annotations

import math

import torch
import triton

from ..launch import cache_bytes
from .plan import Plan, split_plan

NPU_GRID_LIMIT = 65535
NPU_UB_BYTES = 192 * 1024
INTERPRETER_BLOCK = 1024
CHUNK_BYTES = 16384  # a chunk of a long row (interpreter, NPU)
TILE_BYTES = 16384  # a tile of short rows (interpreter, NPU)
PROGRAMS_PER_UNIT = 4  # persistent one-pass programs per vector core (and under the interpreter)
SPLIT_SPAN = 1 << 14  # elements of a split row per program (NPU; under the interpreter: 1024)


def largest_block(interpret: bool) -> int:
    """The widest row one pass holds in Ascend's 192 KB unified buffer; under the interpreter, a
    small one, so that tests of modest size reach the chunked and split paths too."""
    if interpret:
        return INTERPRETER_BLOCK
    return 1 << int(math.log2(NPU_UB_BYTES // (3 * 4)))  # the tile, its exponentials, the output, in fp32


def buffer_plan(n: int, n_rows: int, device: torch.device, element_size: int, units: int, interpret: bool) -> Plan:
    """The interpreter and Ascend: tiles of TILE_BYTES (the unified buffer's scale), persistent programs,
    ``units`` vector cores (or the interpreter's program count).

    Rows up to the largest block stay on chip (one pass); longer rows are
    chunked, with as many persistent programs as keep the rows in flight
    within half of the cache, so that the second pass rereads the cache;
    rows too long for that, or too few to fill the device, are split across
    programs (two passes over memory).
    """
    widest = largest_block(interpret)
    if n <= widest:
        block = triton.next_power_of_2(max(n, 1))
        rows = max(1, min(64, TILE_BYTES // (block * element_size)))
        warps = 1 if interpret else min(16 if block >= 8192 else 8, max(4, block * rows // 512))
        tiles = math.ceil(n_rows / rows)
        return Plan("single", block, rows, warps, programs=min(tiles, units * PROGRAMS_PER_UNIT, NPU_GRID_LIMIT))
    block = max(widest // 4, 16) if interpret else CHUNK_BYTES // element_size
    warps = 1 if interpret else 8
    in_flight = min(4 * units, cache_bytes(device) // 2 // (n * element_size))
    if n <= 2 * widest if interpret else in_flight >= units:
        return Plan("chunked", block, 1, warps, programs=min(n_rows, max(in_flight, units), NPU_GRID_LIMIT))
    splits = triton.next_power_of_2(math.ceil(n / (INTERPRETER_BLOCK if interpret else SPLIT_SPAN)))
    row_programs = min(n_rows, NPU_GRID_LIMIT // splits) if device.type == "npu" else n_rows
    return split_plan(Plan("split", block, 1, warps, splits=splits), n, max(row_programs, 1))
