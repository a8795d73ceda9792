"""full_softmax's launch plans on CUDA: the path a row length takes, and the launch settings of each shape class.

A shape class is what a plan may depend on without breaking batch invariance: the row length
rounded up to a power of two, the element size, and whether the call is masked; never the number
of rows, which sets only the program count.  The path follows from the class by the constants
below.  A class's settings (warps, rows of a tile, chunk or span) come from the card's tuned
table where it has one (``tuned_plans.py``, written by ``bench/tune_plans.py``), and are derived
otherwise from the constants below, tuned by hand on an H100 (docs/speed.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import triton

from .plan import Plan, split_plan
from .triton_code import FIXED_POINT_COLUMNS

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
GPU_MAX_WARPS = 32  # a CUDA block's 1024 threads
# The cluster path (cluster_code.py: Triton 3.9 and later, sm_90 and sm_100), for rows longer than GPU_ROW_ELEMENTS:
# a row over a cluster of blocks, each staging its span in shared memory (the longest spans, partly).  Its settings
# follow from the card (ClusterCard), each constant measured on an H100 (docs/speed.md):
GPU_CLUSTER_SPANS_PER_SM = 3  # spans as long as this many share an SM's shared memory (a power of two of bytes,
# a share), staged whole: one block's loads run under another's arithmetic (a span an SM ran no faster than the
# chunked path);
GPU_CLUSTER_THREAD_VALUES = 128  # a thread's share of a span (in warps: fp32 spans of 64 KB 4, half ones 8),
GPU_CLUSTER_TILE_THREAD_BYTES = 32  # and of a tile: two 16-byte copies.
# Spans of up to twice that share hold a quarter of their columns in registers and stage the rest, two blocks an SM
# (fp32 2^19 0.64 -> 0.68 of a copy, bf16 2^20 0.61 -> 0.82, where the row was split over programs):
GPU_CLUSTER_HELD_SPANS = 2  # a span of up to this many shares,
GPU_CLUSTER_HELD_PART = 4  # 1 / this of it held,
GPU_CLUSTER_HELD_WARPS = 8  # in this many warps (of 4, 8 and 16 swept; 16, with the 64 registers a thread that two
# blocks an SM leave them, ran at 0.51 (fp32) and 0.70 (bf16) of a copy: docs/bench/cluster-sweep-h100-held.json)
GPU_RESERVED_SHARED_BYTES = 1024  # what CUDA keeps of an SM's shared memory for each block (sm_80 on)
GPU_REGISTER_UNIT = 8  # a thread's registers are given in units of this many,
GPU_MAX_REGISTERS = 255  # up to this many


@dataclass(frozen=True)
class ClusterCard:
    """What the cluster path's settings follow from: a card's shared memory and the blocks a cluster may take."""

    shared_bytes: int  # shared memory of an SM (H100, H200: 228 KB)
    max_ctas: int  # blocks of a cluster (sm_90: 16, beyond the 8 every card allows)
    registers: int = 65536  # 32-bit registers of an SM, shared by its blocks' threads (sm_90, sm_100: 64 K)


HOPPER_CLUSTERS = ClusterCard(228 * 1024, 16)  # H100 and H200


def longest_cluster_row(card: ClusterCard, element_size: int, exact: bool = False, held: bool = True) -> int:
    """The longest row that takes the cluster path on ``card`` (0 if none does); ``exact``: for a call that sums
    exactly (fp32 outputs); not ``held``: the longest whose spans are staged whole."""
    bucket = GPU_ROW_ELEMENTS * 2
    while (settings := cluster_settings(ShapeClass(bucket, element_size, False), card, exact)) and (
            held or not settings.held):
        bucket *= 2
    return bucket // 2 if bucket > GPU_ROW_ELEMENTS * 2 else 0


@dataclass(frozen=True)
class Cluster:
    """A row over a cluster of ``ctas`` blocks, each taking a span of bucket / ctas elements: its first ``held`` in
    registers, the rest staged in shared memory and read back in tiles of ``columns``."""

    ctas: int
    num_warps: int
    columns: int
    held: int = 0  # columns of a span held in registers
    per_sm: int = GPU_CLUSTER_SPANS_PER_SM  # blocks that share an SM's shared memory (and its registers)
    registers: int | None = None  # the most a thread may take, so that per_sm blocks fit (None: no limit)


class ShapeClass(NamedTuple):
    """What a plan may depend on: never the number of rows (batch invariance)."""

    row_bucket: int  # the row length rounded up to a power of two
    element_size: int  # bytes of an input element
    masked: bool


@dataclass(frozen=True)
class OnePass:
    """A row in one pass: a tile of ``rows`` rows of the bucket's length a program."""

    rows: int
    num_warps: int

    def tile(self, bucket: int) -> int:
        """Elements of a tile."""
        return self.rows * bucket


@dataclass(frozen=True)
class Chunked:
    """A row in chunks of ``chunk`` elements, read twice by one program (the second time from L2)."""

    chunk: int
    num_warps: int

    def tile(self, bucket: int) -> int:
        return self.chunk


@dataclass(frozen=True)
class Split:
    """A row in spans of ``span`` elements (one tile) over programs: statistics, then writes."""

    span: int
    num_warps: int  # the statistics kernel's
    write_warps: int

    def tile(self, bucket: int) -> int:
        return self.span


Settings = OnePass | Chunked | Split
SETTINGS = {"single": OnePass, "chunked": Chunked, "split": Split}  # by the path that takes them


def shape_class(n: int, element_size: int, masked: bool) -> ShapeClass:
    return ShapeClass(triton.next_power_of_2(max(n, 1)), element_size, masked)


def path_of(shape: ShapeClass) -> str:
    """Rows of up to GPU_ROW_ELEMENTS take one pass (masked rows: GPU_MASKED_ROW_BYTES); longer rows are
    chunked, the second pass rereading what L2 still holds; rows longer than GPU_CHUNKED_ROW_BYTES are
    split over programs.  Each limit is a power of two, so a row and its bucket take the same path."""
    bucket, element_size, masked = shape
    if bucket <= (GPU_MASKED_ROW_BYTES // element_size if masked else GPU_ROW_ELEMENTS):
        return "single"
    return "chunked" if bucket * element_size <= GPU_CHUNKED_ROW_BYTES else "split"


def derived_settings(shape: ShapeClass) -> Settings:
    """A class's settings from the constants: a program holds GPU_THREAD_BYTES a thread (fp32 rows of 1024
    and shorter: a warp; of 16384 and longer: GPU_WIDE_FP32_THREAD_BYTES); short rows share a tile of
    GPU_TILE_BYTES; chunks of GPU_CHUNK (masked rows: GPU_MASKED_CHUNK); spans of GPU_SPLIT_SPAN."""
    bucket, element_size, masked = shape
    path = path_of(shape)
    if path == "single":
        block_bytes = bucket * element_size
        if block_bytes <= GPU_WARP_ROW_BYTES:
            return OnePass(GPU_TILE_BYTES // block_bytes, GPU_TILE_BYTES // (32 * GPU_TILE_THREAD_BYTES))
        if block_bytes < GPU_SHORT_ROW_BYTES:
            return OnePass(GPU_SHORT_ROW_BYTES // block_bytes, 1)
        return OnePass(1, gpu_row_warps(bucket, element_size, masked))
    if path == "chunked":
        chunk = GPU_MASKED_CHUNK if masked else GPU_CHUNK
        return Chunked(chunk, gpu_row_warps(chunk, element_size, masked))
    return Split(GPU_SPLIT_SPAN, GPU_SPLIT_STATS_WARPS, GPU_SPLIT_WRITE_WARPS)


def cluster_settings(shape: ShapeClass, card: ClusterCard, exact: bool = False) -> Cluster | None:
    """The cluster path's settings for a class on ``card``, or None where the class does not take it: masked rows,
    rows of one pass, and rows whose spans would pass GPU_CLUSTER_HELD_SPANS shares of an SM's shared memory (a share:
    the largest power of two of bytes within 1 / GPU_CLUSTER_SPANS_PER_SM of it), or, where the call sums exactly
    (``exact``: fp32 outputs, whose fixed-point sums add a span's values), FIXED_POINT_COLUMNS columns.  A row
    takes 2 to the card's most blocks; a span within a share is staged whole, GPU_CLUSTER_THREAD_VALUES of it a
    thread, GPU_CLUSTER_TILE_THREAD_BYTES of a tile; a longer one holds 1 / GPU_CLUSTER_HELD_PART of its columns in
    the registers of GPU_CLUSTER_HELD_WARPS warps, as many blocks an SM as its staged part allows, each thread's
    registers limited so that their threads fit too."""
    bucket, element_size, masked = shape
    if masked or bucket <= GPU_ROW_ELEMENTS:
        return None
    share = 1 << ((card.shared_bytes // GPU_CLUSTER_SPANS_PER_SM).bit_length() - 1)
    ctas = min(card.max_ctas, max(2, bucket * element_size // share))
    span = bucket // ctas
    if span * element_size > GPU_CLUSTER_HELD_SPANS * share or (exact and span > FIXED_POINT_COLUMNS.value):
        return None
    if span * element_size <= card.shared_bytes // GPU_CLUSTER_SPANS_PER_SM:
        warps = min(GPU_MAX_WARPS, max(1, span // (32 * GPU_CLUSTER_THREAD_VALUES)))
        return Cluster(ctas, warps, warps * 32 * GPU_CLUSTER_TILE_THREAD_BYTES // element_size)
    held = span // GPU_CLUSTER_HELD_PART
    per_sm = blocks_per_sm(card, (span - held) * element_size)
    threads = 32 * GPU_CLUSTER_HELD_WARPS
    registers = register_limit(card, per_sm, threads)
    return Cluster(ctas, GPU_CLUSTER_HELD_WARPS, threads * GPU_CLUSTER_TILE_THREAD_BYTES // element_size, held,
                   per_sm, registers)


def blocks_per_sm(card: ClusterCard, staged_bytes: int) -> int:
    """Blocks staging ``staged_bytes`` each that an SM's shared memory holds at once (CUDA's reserve counted)."""
    return card.shared_bytes // (staged_bytes + GPU_RESERVED_SHARED_BYTES)


def register_limit(card: ClusterCard, blocks: int, threads: int) -> int:
    """The most registers a thread may take so that ``blocks`` blocks of ``threads`` threads share an SM's."""
    return min(GPU_MAX_REGISTERS, card.registers // (blocks * threads) // GPU_REGISTER_UNIT * GPU_REGISTER_UNIT)


def gpu_row_warps(block: int, element_size: int, masked: bool) -> int:
    """Warps for a program holding a block of one row (at least GPU_SHORT_ROW_BYTES)."""
    block_bytes = block * element_size
    if element_size == 4 and block_bytes <= GPU_WARP_FP32_ROW_BYTES and not masked:
        return 1
    wide_fp32 = element_size == 4 and block_bytes >= GPU_WIDE_FP32_BYTES and not masked
    return min(GPU_MAX_WARPS, block_bytes // (32 * (GPU_WIDE_FP32_THREAD_BYTES if wide_fp32 else GPU_THREAD_BYTES)))


def gpu_plan(n: int, n_rows: int, units: int, element_size: int, masked: bool = False,
             tuned: Mapping[ShapeClass, Settings] | None = None, clusters: ClusterCard | None = None,
             exact: bool = False) -> Plan:
    """CUDA: the plan of rows of n: the cluster path where ``clusters`` (the card's, where the path runs) admits
    their shape class (``exact``: for a call that sums exactly); else the settings of the class in ``tuned`` (the
    card's table), else derived; as many programs as the rows allow (chunked rows: GPU_PROGRAMS_PER_UNIT an SM at
    most, of ``units``)."""
    shape = shape_class(n, element_size, masked)
    cluster = cluster_settings(shape, clusters, exact) if clusters else None
    if cluster:
        return Plan("cluster", cluster.columns, 1, cluster.num_warps, splits=cluster.ctas, programs=n_rows,
                    held=cluster.held, registers=cluster.registers)
    settings = (tuned or {}).get(shape) or derived_settings(shape)
    if isinstance(settings, OnePass):
        return Plan("single", shape.row_bucket, settings.rows, settings.num_warps,
                    programs=math.ceil(n_rows / settings.rows))
    if isinstance(settings, Chunked):
        return Plan("chunked", settings.chunk, 1, settings.num_warps,
                    programs=min(n_rows, units * GPU_PROGRAMS_PER_UNIT))
    return split_plan(Plan("split", settings.span, 1, settings.num_warps,
                           splits=triton.next_power_of_2(math.ceil(n / settings.span)),
                           write_warps=settings.write_warps), n, n_rows)
