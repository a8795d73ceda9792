"""A full-domain Triton softmax: any rank, dim and strides, rows of any length, log and masked variants.

A *row* is one slice along ``dim``; the other dims (up to three after merging)
index the rows.  Each program takes a tile of ROWS rows by BLOCK columns, so
short rows share a program and long rows get all of its lanes:

* ``rows_kernel``, single pass: the row fits one block; one read, one write.
* ``rows_kernel``, chunked: the row is longer than a block; a first pass keeps
  a running maximum and a sum rescaled whenever the maximum grows (online
  softmax), a second pass writes.  The second read mostly hits L2.
* ``split_stats_kernel`` + ``split_write_kernel``: very long rows and too few of
  them to fill the device; several programs share a row, each computing the
  maximum and rescaled sum of its span, and the write pass combines them.

Loads follow the strides (no hidden copy); offsets are 64-bit; arithmetic is
fp32 whatever the input dtype; the output is contiguous in ``x``'s logical
order, in ``x``'s dtype or fp32 (``out_dtype``).  Semantics are the oracle's
(``oracles/semantics.py``): ``tl.max`` skips NaN, but a NaN still reaches the
sum through its own exponential, so the whole row becomes NaN, as it should.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from oracles.bounds import PrecisionProfile, Reduction
from oracles.profiles import FULL_SOFTMAX_ARITHMETIC, TILE_SUM

from .launch import cache_bytes, compute_units, float64_math, interpreted, require_triton_device
from .registry import ALL_INVARIANCES, HALF_AND_SINGLE, Capabilities, KernelSpec, dense, register

# The rounding of x - max, not exp itself, dominates the error of a plain fp32
# softmax (|x - max| u relative).  Every kernel takes its arithmetic as ARITH:
#   WIDE: the gap, its exp and the row sum in float64, one rounding at the store
#         (upstream Triton's interpreter; log_softmax on CUDA, whose result near 0 needs an
#         exact sum); never on Ascend, whose math has no float64;
#   PRECISE (fp32 output on CUDA): fp32, with the gap's exact rounding error recovered
#         (TwoSum) and multiplied back in, libdevice's expf, the exps summed exactly
#         (_fixed_point_sums) and multiplied by the float64 reciprocal of the sum: no order
#         of the additions (which Triton's register layout decides, and which may differ
#         between two launches) can change a bit, so batch and shift invariance hold;
#   FAST (fp32 output on Ascend): the gap's error recovered, tl.exp and a division;
#   HALF (half output, unless WIDE): tl.exp of the rounded gap and a division.  Their
#         errors, 2^-24 |x - max| relative and a few fp32 ulps, vanish in the rounding
#         to fp16 or bf16, and dropping the recovery halves the arithmetic per element,
#         which bounds half rows: on the H100 a prototype without it (and reusing the
#         exps) ran bf16 rows of 16384 at 0.99 of a copy, against 0.63 with it;
#   HALF_RECIPROCAL (half output on CUDA): the same, but a product by the row's correctly
#         rounded reciprocal instead of a division: 1.5 ulps of fp32 against div.full's 2,
#         and bf16 rows of 32768 went from 0.94 to 0.99 of Liger on the H100.

# Ordered: from PRECISE on, the sums are float64 (ARITH >= PRECISE); below FAST, half outputs.
HALF = tl.constexpr(0)
HALF_RECIPROCAL = tl.constexpr(1)
FAST = tl.constexpr(2)
PRECISE = tl.constexpr(3)
WIDE = tl.constexpr(4)
ARITHMETIC_NAMES = {HALF.value: "half", HALF_RECIPROCAL.value: "half", FAST.value: "fast", PRECISE.value: "precise",
                    WIDE.value: "wide"}

MAX_OUTER_DIMS = 3
NPU_GRID_LIMIT = 65535
NPU_UB_BYTES = 192 * 1024
INTERPRETER_BLOCK = 1024
CHUNK_BYTES = 16384  # a chunk of a long row (interpreter, NPU)
TILE_BYTES = 16384  # a tile of short rows (interpreter, NPU)
PROGRAMS_PER_UNIT = 4  # persistent one-pass programs per vector core (and under the interpreter)
SPLIT_SPAN = 1 << 14  # elements of a split row per program (NPU; under the interpreter: 1024)
# CUDA, from sweeps of launch parameters on an H100 (README, "Speed"):
GPU_ROW_ELEMENTS = 32768  # the longest row one program holds in registers, as fp32 values
GPU_SHORT_ROW_BYTES = 2048  # shorter rows share a tile of GPU_TILE_BYTES, GPU_TILE_THREAD_BYTES a thread,
GPU_TILE_BYTES = 4096
GPU_TILE_THREAD_BYTES = 32
GPU_WARP_ROW_BYTES = 512  # but longer ones two a warp: in 4 warps a row of 1 KB spans two, and its three
# reductions meet through shared memory (fp32 rows of 256: 9 barriers, 0.86x torch so, 1.00x two a warp)
GPU_THREAD_BYTES = 64  # a longer row: one a program, each thread holding four 16-byte loads of it,
GPU_WIDE_FP32_BYTES = 65536  # but fp32 rows from 16384 (three block-wide reductions each, their
GPU_WIDE_FP32_THREAD_BYTES = 256  # exact sum's among them) run faster in fewer warps: 64 values a thread
GPU_WARP_FP32_ROW_BYTES = 4096  # and fp32 rows of 1024 in one warp: their three reductions, one in int64,
# cost more across two warps than a warp's 32 values a thread (H100, 4096 rows: 2450 GB/s in 2 warps,
# 2579 in one); bf16 rows of 2048 run faster in more (2388 GB/s in one warp, 2451 in 2, 2499 in 4).
# A tile a program: persistent programs looping over tiles (32 an SM) ran slower on many rows
# (H100, 65536 rows, fp32 of 1024: 2735 GB/s, 2980 a tile a program; of 512: 2705, 2947).
GPU_PROGRAMS_PER_UNIT = 32  # chunked rows: programs per SM at most; beyond that, programs loop over rows
GPU_CHUNK = 32768  # longer rows: chunks of this many elements, a program a row, warps as for a row of it
# Masked rows add a third stream (the mask) and run faster in more warps, as before the changes
# above (H100, 4096 masked fp32 rows of 32768: 1953 GB/s so, 1136 in one pass of 16 warps):
GPU_MASKED_ROW_BYTES = 65536  # one pass up to here (fp32 16384, half 32768), GPU_THREAD_BYTES a thread
GPU_MASKED_CHUNK = 16384
# Rows longer than this are split over programs instead (H100, GB/s chunked and split: bf16 rows
# of 140000 2040 and 1499, of 2^18 1929 and 1751; fp32 rows of 70000 1864 and 1841, of 2^18 1789 and 1868).
GPU_CHUNKED_ROW_BYTES = 1 << 19
# A split row: a program a span of one tile, a row's spans on neighbouring programs; its
# statistics summed in 4 warps, written in 8 (H100, 256 rows of 2^18, the two kernels timed
# apart: fp32 127 + 195 us in spans of 8192 and 8 warps, 104 + 185 us so; bf16 67 + 100, 59 + 96).
GPU_SPLIT_SPAN = 4096
GPU_SPLIT_STATS_WARPS = 4
GPU_SPLIT_WRITE_WARPS = 8


@triton.jit
def _row_bases(rows, size1, size2, stride0, stride1, stride2):
    """Offsets of rows' first elements: row = (i0 * size1 + i1) * size2 + i2."""
    i2 = rows % size2
    rest = rows // size2
    return (rest // size1) * stride0 + (rest % size1) * stride1 + i2 * stride2


@triton.jit
def _gap(x, shift):
    """fl(x - shift) and its exact rounding error (Knuth's TwoSum; 0 where the gap is not finite)."""
    gap = x - shift
    back = gap - x
    error = (x - (gap - back)) + (-shift - back)
    finite = (gap - gap) == 0.0  # inf - inf and NaN - NaN are NaN
    return gap, tl.where(finite, error, 0.0)


@triton.jit
def _exp_gap(x, shift, ARITH: tl.constexpr):
    """exp(x - shift): in float64 when WIDE, of the rounded gap for half outputs, else without the
    gap's rounding error."""
    if ARITH == WIDE:
        e = tl.exp(x.to(tl.float64) - shift.to(tl.float64))
    elif ARITH < FAST:
        e = tl.exp(x - shift)
    else:
        gap, error = _gap(x, shift)
        if ARITH == PRECISE:
            rounded = libdevice.exp(gap)
        else:
            rounded = tl.exp(gap)
        e = rounded + rounded * error  # e^(gap + error) to first order; error^2 < 2^-48
    return e


@triton.jit
def _load(x_ptr, m_ptr, x_base, m_base, cols, row_ok, n_cols, x_col_stride, m_col_stride, MASKED: tl.constexpr,
          POLICY: tl.constexpr):
    """A [ROWS, BLOCK] tile in fp32, -inf in padding and (masked softmax) in masked-out entries;
    POLICY, the L2 eviction policy of its loads."""
    valid = row_ok[:, None] & (cols < n_cols)[None, :]
    x = tl.load(x_ptr + x_base[:, None] + cols[None, :] * x_col_stride, mask=valid, other=-float("inf"),
                eviction_policy=POLICY)
    x = x.to(tl.float32)
    if MASKED:
        keep = tl.load(m_ptr + m_base[:, None] + cols[None, :] * m_col_stride, mask=valid, other=0)
        x = tl.where(keep != 0, x, -float("inf"))
    return x


@triton.jit
def _finish(x, e, row_max, total, LOG: tl.constexpr, MASKED: tl.constexpr, ARITH: tl.constexpr):
    """The output tile, in fp32, from the row's maximum and sum of exponentials and the tile's
    exponentials (softmax) or the tile itself (log_softmax)."""
    m = row_max[:, None]
    if LOG:
        if ARITH == WIDE:
            y = x.to(tl.float64) - m.to(tl.float64) - tl.log(total[:, None])
        elif ARITH < FAST:
            y = (x - m) - tl.log(total[:, None])
        else:  # the gap's rounding error added back: a second rounding
            gap, error = _gap(x, m)
            y = (gap - tl.log(total[:, None])) + error
    else:
        if ARITH == PRECISE:
            # e times the float64 reciprocal, split into two fp32 parts: as exact as the float64
            # product (both err by 2^-48 of y before the final rounding), and e stays fp32.
            reciprocal = (1.0 / total.to(tl.float64))[:, None]
            high = reciprocal.to(tl.float32)
            low = (reciprocal - high.to(tl.float64)).to(tl.float32)
            y = tl.fma(e, high, e * low)
        elif ARITH == HALF_RECIPROCAL:
            y = e * tl.math.div_rn(1.0, total)[:, None]
        else:
            y = e / total[:, None]
    if MASKED:
        # Nothing left to attend to: every kept entry is -inf.  tl.max skips NaN, so a row whose
        # kept entries are NaN and -inf has a -inf maximum too; its sum is NaN, and so is its output.
        empty = (row_max == -float("inf")) & (total == total)
        y = tl.where(empty[:, None], 0.0, y)
    return y.to(tl.float32)  # one rounding; the store rounds once more only for half outputs


@triton.jit
def _rescale(partial_max, shift, ARITH: tl.constexpr):
    """exp(partial_max - shift), the factor that brings a partial sum to the row's maximum: in
    float64 when the sums are (WIDE, PRECISE), or libdevice expf's error (2.5 ulps) would reach
    every output of a chunked or split row (fp32 rows of 65536 on the H100: 4.1 ulps at most)."""
    if ARITH >= PRECISE:
        factor = tl.exp(partial_max.to(tl.float64) - shift.to(tl.float64))
    else:
        factor = _exp_gap(partial_max, shift, ARITH)
    return factor


@triton.jit
def _online_update(row_max, total, x, ARITH: tl.constexpr, EXACT: tl.constexpr):
    """Fold a tile into a running maximum and a sum of exp(x - maximum) rescaled to it."""
    new_max = tl.maximum(row_max, tl.max(x, axis=1))
    # While a row holds only -inf, keep its sum at 0 instead of exp(-inf - -inf) = NaN.
    shift = tl.where(new_max == -float("inf"), 0.0, new_max)
    rescale = tl.where(new_max == -float("inf"), 0.0, _rescale(row_max, shift, ARITH))
    return new_max, total * rescale + _row_sums(_exp_gap(x, shift[:, None], ARITH), ARITH, EXACT)


@triton.jit
def _zeros(ROWS: tl.constexpr, ARITH: tl.constexpr):
    """A running sum: float64 when WIDE or PRECISE."""
    if ARITH >= PRECISE:
        total = tl.zeros([ROWS], tl.float64)
    else:
        total = tl.zeros([ROWS], tl.float32)
    return total


@triton.jit
def _row_sums(e, ARITH: tl.constexpr, EXACT: tl.constexpr):
    """Row sums of exponentials: in float64 when WIDE; exact when PRECISE, or when EXACT for half
    outputs on CUDA (_fixed_point_sums).  Triton lays a tile out by the alignment of the view it
    loads, and so may add a row's exps in another order in another call: a kernel that stores
    nothing of the tile (split_stats_kernel) did, for a misaligned view of bf16 rows of 2^18 on
    the H100 (838 of 2^26 outputs 1 ulp apart).  Where the tile is stored, the store's layout
    held, and exact sums there cost half rows up to 16 % (bf16 rows of 32768 on the H100)."""
    if ARITH == PRECISE:
        total = _fixed_point_sums(e)
    elif EXACT and ARITH == HALF_RECIPROCAL:
        total = _fixed_point_sums(e).to(tl.float32)  # rounded once, the same whatever the order
    else:
        total = tl.sum(e, axis=1)
    return total


FIXED_POINT_ONE = tl.constexpr(2.0**47)  # n (1 + 2^-23) 2^47 < 2^63 for rows of n <= 32768


@triton.jit
def _fixed_point_sums(e):
    """Row sums, as float64, of exponentials e in [0, 1] (or NaN), added exactly as 64-bit integers
    of 2^-47: no order of the additions, nor the register layout that decides it (which follows
    a view's alignment), can change a bit of the result.  e 2^47 is an integer already for
    e >= 2^-24, and the conversion truncates smaller ones by less than 2^-47, so the sum, at
    least 1, errs by at most n 2^-47 <= 2^-32 relative.  On the H100 this ran as fast as a
    float64 sum or faster (fp32 rows of 32768 in 16 warps: 0.98 of Liger against 0.57-0.61), and
    needs fewer registers: it keeps no float64 copy of e."""
    tl.static_assert(e.shape[1] <= 32768, "a row's fixed-point sum must fit 63 bits")
    total = tl.sum((e * FIXED_POINT_ONE).to(tl.int64), axis=1).to(tl.float64) * (1.0 / FIXED_POINT_ONE)
    nan_check = tl.sum(e, axis=1)  # the conversion takes NaN to some integer; a float sum keeps it
    return tl.where(nan_check == nan_check, total, float("nan"))


@triton.jit
def _rows(y_ptr, x_ptr, m_ptr, n_rows, n_cols, size1, size2, xs0, xs1, xs2, xsd, ys0, ys1, ys2, ysd,
          ms0, ms1, ms2, msd, ROWS: tl.constexpr, BLOCK: tl.constexpr, CHUNKED: tl.constexpr, LOG: tl.constexpr,
          MASKED: tl.constexpr, ARITH: tl.constexpr, ALIGNED: tl.constexpr):
    """Programs over tiles of ROWS rows, looping where there are fewer programs than tiles (NPU, the
    interpreter, CUDA's chunked rows): one pass, or an online pass and a write pass."""
    cols = tl.arange(0, BLOCK)
    tiles = tl.cdiv(n_rows, ROWS)
    for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0)):
        # 64-bit row indices, so that offsets past 2^31 stay exact.
        rows = (tile + tl.zeros([ROWS], tl.int64)) * ROWS + tl.arange(0, ROWS)
        row_ok = rows < n_rows
        x_base = _row_bases(rows, size1, size2, xs0, xs1, xs2)
        y_base = _row_bases(rows, size1, size2, ys0, ys1, ys2)
        m_base = _row_bases(rows, size1, size2, ms0, ms1, ms2)
        if ALIGNED:  # every outer stride a multiple of 16, as the host found: rows start aligned
            x_base = tl.multiple_of(x_base, 16)
            y_base = tl.multiple_of(y_base, 16)
            m_base = tl.multiple_of(m_base, 16)
        if not CHUNKED:
            x = _load(x_ptr, m_ptr, x_base, m_base, cols, row_ok, n_cols, xsd, msd, MASKED, "")
            row_max = tl.max(x, axis=1)
            # A row of -inf sums exp(x - 0) = 0 rather than NaN, as the online pass does: a NaN
            # sum then means a NaN entry (which masked softmax must tell from an empty row).
            shift = tl.where(row_max == -float("inf"), 0.0, row_max)
            # Kept for the output, not recomputed: in one sweep on the H100 this alone took fp32
            # rows of 4096 to 16384 from 0.65-0.85 of a copy to 0.85-0.99.  (A row of -inf: e is 0
            # and its sum 0, so its output is 0 * inf = NaN, as exp(-inf - -inf) made it before.)
            e = _exp_gap(x, shift[:, None], ARITH)
            total = _row_sums(e, ARITH, False)
            y = _finish(x, e, row_max, total, LOG, MASKED, ARITH)
            valid = row_ok[:, None] & (cols < n_cols)[None, :]
            tl.store(y_ptr + y_base[:, None] + cols[None, :] * ysd, y, mask=valid)
        else:
            # The first pass keeps the row in L2 for the second, which reads it a last time (H100, fp32
            # rows of 65536: 1944 -> 2318 GB/s, the same bits).  On CUDA only: whether Ascend's
            # compiler takes these hints is not known here.
            if ARITH == PRECISE or ARITH == HALF_RECIPROCAL:
                KEEP: tl.constexpr = "evict_last"
                DROP: tl.constexpr = "evict_first"
            else:
                KEEP: tl.constexpr = ""
                DROP: tl.constexpr = ""
            row_max = tl.full([ROWS], -float("inf"), tl.float32)
            total = _zeros(ROWS, ARITH)
            for start in tl.range(0, n_cols, BLOCK):
                x = _load(x_ptr, m_ptr, x_base, m_base, start + cols, row_ok, n_cols, xsd, msd, MASKED, KEEP)
                row_max, total = _online_update(row_max, total, x, ARITH, False)
            for start in tl.range(0, n_cols, BLOCK):
                x = _load(x_ptr, m_ptr, x_base, m_base, start + cols, row_ok, n_cols, xsd, msd, MASKED, DROP)
                y = _finish(x, _exp_gap(x, row_max[:, None], ARITH), row_max, total, LOG, MASKED, ARITH)
                valid = row_ok[:, None] & ((start + cols) < n_cols)[None, :]
                tl.store(y_ptr + y_base[:, None] + (start + cols)[None, :] * ysd, y, mask=valid)


# n_rows is never specialised: a lone row (n_rows == 1 becomes a constant otherwise) must run
# the very kernel a batch runs, or batch invariance breaks.
@triton.jit(do_not_specialize=["n_rows"])
def contiguous_rows_kernel(y_ptr, x_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                           ROWS: tl.constexpr, BLOCK: tl.constexpr, CHUNKED: tl.constexpr, LOG: tl.constexpr,
                           ARITH: tl.constexpr):
    """Rows along the last dim, each contiguous: six arguments, so the launch costs less."""
    # With both inner sizes 1, the row index is the outermost index: its stride is the row stride.
    _rows(y_ptr, x_ptr, x_ptr, n_rows, n_cols, 1, 1, x_row_stride, 0, 0, 1, y_row_stride, 0, 0, 1,
          0, 0, 0, 0, ROWS, BLOCK, CHUNKED, LOG, False, ARITH, False)


# The outer sizes and strides are not specialised either: Triton would compile a variant for
# every pattern of ones and multiples of 16 among them: the strided layouts an H100 gate draws
# made 908 variants of this kernel, half of its 1200 s of compiles (716 without).  What the
# loads need from them, whether rows start aligned, travels as ALIGNED.
@triton.jit(do_not_specialize=["n_rows", "size1", "size2", "xs0", "xs1", "xs2", "ys0", "ys1", "ys2",
                               "ms0", "ms1", "ms2"])
def rows_kernel(y_ptr, x_ptr, m_ptr, n_rows, n_cols, size1, size2,
                xs0, xs1, xs2, xsd, ys0, ys1, ys2, ysd, ms0, ms1, ms2, msd,
                ROWS: tl.constexpr, BLOCK: tl.constexpr, CHUNKED: tl.constexpr, LOG: tl.constexpr,
                MASKED: tl.constexpr, ARITH: tl.constexpr, ALIGNED: tl.constexpr):
    """Any layout: rows indexed by up to three outer dims, any strides, an optional mask."""
    _rows(y_ptr, x_ptr, m_ptr, n_rows, n_cols, size1, size2, xs0, xs1, xs2, xsd, ys0, ys1, ys2, ysd,
          ms0, ms1, ms2, msd, ROWS, BLOCK, CHUNKED, LOG, MASKED, ARITH, ALIGNED)


@triton.jit
def _span_columns(part, span, n_cols):
    """The columns [first, last) of span ``part`` of a split row."""
    first = part * span
    return first, tl.minimum(first + span, n_cols)


@triton.jit
def split_stats_kernel(stats_ptr, x_ptr, m_ptr, n_rows, n_cols, span, spans, size1, size2,
                       xs0, xs1, xs2, xsd, ms0, ms1, ms2, msd, BLOCK: tl.constexpr, MASKED: tl.constexpr,
                       ARITH: tl.constexpr):
    """Programs over (row, span) tasks, a row's spans in turn: the maximum and rescaled sum of each span."""
    cols = tl.arange(0, BLOCK)
    for task in tl.range(tl.program_id(0), n_rows * spans, tl.num_programs(0)):
        # Programs that run together read neighbouring spans of a row, rather than the same span
        # of neighbouring rows (H100, fp32 rows of 2^18: 2 % faster statistics, 5 % faster writes).
        part = task % spans
        first, last = _span_columns(part, span, n_cols)
        rows = task // spans + tl.zeros([1], tl.int64)  # one row, as a 1-row tile
        row_ok = rows >= 0
        x_base = _row_bases(rows, size1, size2, xs0, xs1, xs2)
        m_base = _row_bases(rows, size1, size2, ms0, ms1, ms2)
        row_max = tl.full([1], -float("inf"), tl.float32)
        total = _zeros(1, ARITH)
        for start in tl.range(first, last, BLOCK):
            x = _load(x_ptr, m_ptr, x_base, m_base, start + cols, row_ok, last, xsd, msd, MASKED, "")
            row_max, total = _online_update(row_max, total, x, ARITH, True)
        slot = (rows * spans + part) * 2
        tl.store(stats_ptr + slot, row_max)  # the store widens to the buffer's dtype: no float64 on NPUs
        tl.store(stats_ptr + slot + 1, total)


@triton.jit
def split_write_kernel(y_ptr, x_ptr, m_ptr, stats_ptr, n_rows, n_cols, span, spans, size1, size2,
                       xs0, xs1, xs2, xsd, ys0, ys1, ys2, ysd, ms0, ms1, ms2, msd,
                       SPLITS: tl.constexpr, FULL: tl.constexpr, BLOCK: tl.constexpr, LOG: tl.constexpr,
                       MASKED: tl.constexpr, ARITH: tl.constexpr):
    """Programs over (row, span) tasks, as split_stats_kernel: combine the row's partial sums, then write its span.

    The sums are added in a tree SPLITS wide (the plan's power of two, at least ``spans``), the
    slots past ``spans`` read as empty spans.
    """
    if FULL:  # every one of the SPLITS spans holds columns: a row of a power of two
        # The count known to the compiler (H100, fp32 rows of 2^18: 1868 GB/s so, 1783 with the
        # count a runtime value and the statistics' loads masked).
        spans = SPLITS
    cols = tl.arange(0, BLOCK)
    parts = tl.arange(0, SPLITS)[None, :]
    for task in tl.range(tl.program_id(0), n_rows * spans, tl.num_programs(0)):
        first, last = _span_columns(task % spans, span, n_cols)
        rows = task // spans + tl.zeros([1], tl.int64)  # one row, as a 1-row tile
        slots = (rows[:, None] * spans + parts) * 2
        if FULL:
            maxima = tl.load(stats_ptr + slots)
            sums = tl.load(stats_ptr + slots + 1)
        else:
            maxima = tl.load(stats_ptr + slots, mask=parts < spans, other=-float("inf"))
            sums = tl.load(stats_ptr + slots + 1, mask=parts < spans, other=0.0)
        maxima = maxima.to(tl.float32)  # fp32 values, stored exactly in float64
        if ARITH < PRECISE:
            sums = sums.to(tl.float32)
        # The one row's maximum and sum as scalars, which take whatever layout the tile needs: as
        # slices of the statistics' layout, Triton 3.6 broadcast the sum's reciprocal into that
        # layout and converted two whole tiles through shared memory (fp32 rows of 2^18: 12x slower).
        row_max = tl.max(maxima)
        shift = tl.where(row_max == -float("inf"), 0.0, row_max)
        rescale = _rescale(maxima, shift, ARITH)
        # A span of -inf adds nothing; a span holding NaN (which tl.max skipped) keeps its NaN sum.
        total = tl.sum(tl.where((maxima == -float("inf")) & (sums == sums), 0.0, sums * rescale))
        row_max = row_max + tl.zeros([1], tl.float32)
        total = total + tl.zeros([1], total.dtype)
        row_ok = rows >= 0
        x_base = _row_bases(rows, size1, size2, xs0, xs1, xs2)
        y_base = _row_bases(rows, size1, size2, ys0, ys1, ys2)
        m_base = _row_bases(rows, size1, size2, ms0, ms1, ms2)
        for start in tl.range(first, last, BLOCK):
            x = _load(x_ptr, m_ptr, x_base, m_base, start + cols, row_ok, last, xsd, msd, MASKED, "")
            y = _finish(x, _exp_gap(x, row_max[:, None], ARITH), row_max, total, LOG, MASKED, ARITH)
            valid = row_ok[:, None] & ((start + cols) < last)[None, :]
            tl.store(y_ptr + y_base[:, None] + (start + cols)[None, :] * ysd, y, mask=valid)


# ---------------------------------------------------------------------------- host side


@dataclass(frozen=True)
class Plan:
    """How one call runs: which path, the tile, the warps, and how many programs share a row."""

    path: str  # "single", "chunked" or "split"
    block: int
    rows: int
    num_warps: int  # of the kernel that sums the rows (for a split row, its statistics kernel)
    splits: int = 1
    programs: int = 1
    write_warps: int | None = None  # a split row's write kernel, where not num_warps

    def chunks(self, n: int) -> int:
        return max(1, math.ceil(n / (self.block * self.splits)))

    def span(self, n: int) -> int:
        """A split row's columns per program: whole tiles, so that no tile is cut at a span's end."""
        return self.block * self.chunks(n)

    def spans(self, n: int) -> int:
        """A split row's spans that hold columns: splits at most, fewer where the row falls short
        (CUDA, fp32 rows of 70000: 18 spans of one 4096-element tile, not 32 spans of 2188
        columns, each a tile half empty: 0.60x FlagGems so on the H100)."""
        return math.ceil(n / self.span(n))


def largest_block() -> int:
    """The widest row one pass holds in Ascend's 192 KB unified buffer; under the interpreter, a
    small one, so that tests of modest size reach the chunked and split paths too."""
    if interpreted():
        return INTERPRETER_BLOCK
    return 1 << int(math.log2(NPU_UB_BYTES // (3 * 4)))  # the tile, its exponentials, the output, in fp32


@functools.lru_cache(maxsize=4096)  # a pure function of its arguments, and on every call's path
def plan(shape: tuple[int, ...], dim: int, device: torch.device, element_size: int, masked: bool = False) -> Plan:
    """The path and tile for a call.

    The tile, the warps and the path follow from the row length (and, on CUDA,
    whether the call is masked) alone: a row's sum must not change with the
    number of rows around it (batch invariance).
    Only the program count may.
    """
    n = shape[dim]
    n_rows = max(math.prod(shape) // max(n, 1), 1)
    if device.type == "cuda" and not interpreted():
        return gpu_plan(n, n_rows, compute_units(device), element_size, masked)
    return buffer_plan(n, n_rows, device, element_size)


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


def buffer_plan(n: int, n_rows: int, device: torch.device, element_size: int) -> Plan:
    """The interpreter and Ascend: tiles of TILE_BYTES (the unified buffer's scale), persistent programs.

    Rows up to the largest block stay on chip (one pass); longer rows are
    chunked, with as many persistent programs as keep the rows in flight
    within half of the cache, so that the second pass rereads the cache;
    rows too long for that, or too few to fill the device, are split across
    programs (two passes over memory).
    """
    units = compute_units(device)
    widest = largest_block()
    interpret = interpreted()
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


def split_plan(split: Plan, n: int, row_programs: int) -> Plan:
    """A split plan's programs: a task for each span holding columns, of row_programs rows at once."""
    return replace(split, programs=row_programs * split.spans(n))


def arithmetic(device: torch.device, log: bool, out_dtype: torch.dtype) -> int:
    """A call's ARITH (see the top of this module): float64 where the interpreter's math has it
    (triton-ascend's computes as its NPUs do) and for log_softmax on CUDA; otherwise the output's
    dtype decides, since what a half output rounds away an fp32 one shows (half in, fp32 out)."""
    if (interpreted() and float64_math()) or (device.type == "cuda" and log):
        return WIDE.value
    if out_dtype != torch.float32:
        return HALF_RECIPROCAL.value if device.type == "cuda" else HALF.value
    return PRECISE.value if device.type == "cuda" else FAST.value


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


CAPABILITIES = Capabilities(
    dtypes=HALF_AND_SINGLE,
    log_softmax=True,
    masked=True,
    out_dtype=True,
    path_boundaries={"cpu": (INTERPRETER_BLOCK, 2 * INTERPRETER_BLOCK), "npu": (16384,),
                     # one pass -> chunked in fp32 and in half, chunked -> split in fp32
                     "cuda": (GPU_MASKED_ROW_BYTES // 4, GPU_ROW_ELEMENTS, GPU_CHUNKED_ROW_BYTES // 4)},
    # The tile, warps and path follow from the row length alone; fp32 sums are exact on CUDA.
    promises=ALL_INVARIANCES,
)


@dataclass
class ContiguousLaunch:
    """How a call that takes contiguous_rows_kernel launches, and, once it has run on CUDA, the
    compiled kernel's own launcher: a repeat then skips Triton's binding of the arguments and
    its lookup of the variant they select (on the H100's host a bare launch took 22 us a call,
    the launcher alone 12)."""

    grid: tuple[int]
    sizes: tuple[int, int, int, int]
    tile: dict
    launcher: object = None
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


# Calls already checked and planned that take contiguous_rows_kernel, by call_key.  Everything
# _run checks and plans for such a call, and every argument Triton specialises on, follows
# from the key alone, so a repeat skips straight to the launch: on short rows each host
# microsecond shows (on the CI machine's CPU, the launch stubbed out, 14.3 -> 6.3 us a call,
# 3.6 of them torch.empty).
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


def _run(x: torch.Tensor, dim: int, *, log: bool, mask: torch.Tensor | None,
         out_dtype: torch.dtype | None) -> torch.Tensor:
    if mask is None and isinstance(x, torch.Tensor) and dense(x):  # call_key reads strides
        launch = CONTIGUOUS_CALLS.get(call_key(x, dim, log, out_dtype))
        if launch is not None:
            return launch(x, torch.empty(x.shape, dtype=out_dtype or x.dtype, device=x.device))
    CAPABILITIES.check(x, dim)
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
    p = plan(tuple(x.shape), dim, x.device, x.element_size(), mask is not None)
    arith = arithmetic(x.device, log, y.dtype)
    tile = dict(ROWS=p.rows, BLOCK=p.block, CHUNKED=p.path == "chunked", LOG=log, ARITH=arith, num_warps=p.num_warps)
    if (mask is None and p.path != "split" and dim == x.dim() - 1 and x.stride(dim) == 1
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
    aligned = all(stride % 16 == 0 for stride in xs + ys + ms)
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


def reduction(p: Plan, n: int, kind: str) -> Reduction:
    """The tree in which a plan sums a row of n: one block, or blocks folded with rescales.

    A split row's spans are added in the write kernel, in more warps than the statistics kernel's
    num_warps: counted over the fewer threads, their tree is at least as deep.
    """
    return Reduction(kind, num_warps=p.num_warps, rows=p.rows, block=None if p.path == "single" else p.block,
                     chunks=1 if p.path == "single" else p.chunks(n), spans=p.splits)


def precision(backend: str, x: torch.Tensor, dim: int, log: bool = False) -> PrecisionProfile:
    """The call's arithmetic, and the reduction of its path.

    The judge does not say whether a call is masked, and on CUDA a masked call may take another
    plan (gpu_plan): the reduction given bounds both, with the fewer warps, the wider tile and
    the more chunks and spans of the two (tests/suite/test_devices.py checks its depth and rescales).
    """
    shape = tuple(x.shape) or (1,)
    n = shape[dim % len(shape)]
    kind = TILE_SUM.get(backend, "sequential")
    trees = [reduction(plan(shape, dim % len(shape), x.device, x.element_size(), masked), n, kind)
             for masked in (False, True)]
    chunks, spans = max(tree.chunks for tree in trees), max(tree.spans for tree in trees)
    widest = max(tree.block or triton.next_power_of_2(max(n, 1)) for tree in trees)
    # For a half input with fp32 output this names the half output's (looser, still valid) arithmetic.
    mode = ARITHMETIC_NAMES[arithmetic(x.device, log, x.dtype)]
    return PrecisionProfile(FULL_SOFTMAX_ARITHMETIC[backend, mode],
                            Reduction(kind, num_warps=min(tree.num_warps for tree in trees),
                                      rows=max(tree.rows for tree in trees),
                                      block=None if chunks == spans == 1 else widest, chunks=chunks, spans=spans))


SPEC = register(KernelSpec(
    name="full_softmax",
    softmax=softmax,
    capabilities=CAPABILITIES,
    log_softmax=log_softmax,
    masked_softmax=masked_softmax,
    precision=precision,
    description="full-domain Triton softmax: any rank, dim and strides, any row length, log and masked",
))
