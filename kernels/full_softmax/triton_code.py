"""full_softmax's Triton code: the three paths of a row, and the arithmetic helpers they share.

* ``rows_kernel`` (``contiguous_rows_kernel`` for rows along the last dim, each
  contiguous), single pass: the row fits one block; one read, one write.
* ``rows_kernel``, chunked: the row is longer than a block; a first pass keeps
  a running maximum and a sum rescaled whenever the maximum grows (online
  softmax), a second pass writes.  The second read mostly hits L2.
* ``split_stats_kernel`` + ``split_write_kernel``: very long rows and too few of
  them to fill the device; several programs share a row, each computing the
  maximum and rescaled sum of its span, and the write pass combines them.

Each program takes a tile of ROWS rows by BLOCK columns, so short rows share a
program and long rows get all of its lanes.  Loads follow the strides (no
hidden copy); offsets are 64-bit; arithmetic is fp32 or float64 whatever the
input dtype (ARITH, :mod:`.arithmetic`).  Semantics are the oracle's
(``oracles/semantics.py``): ``tl.max`` skips NaN, but a NaN still reaches the
sum through its own exponential, so the whole row becomes NaN, as it should.
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice

from .arithmetic import FAST, HALF_RECIPROCAL, PRECISE, WIDE


@triton.jit
def _row_bases(rows, size1, size2, stride0, stride1, stride2):
    """Offsets of rows' first elements: row = (i0 * size1 + i1) * size2 + i2."""
    i2 = rows % size2
    rest = rows // size2
    return (rest // size1) * stride0 + (rest % size1) * stride1 + i2 * stride2


@triton.jit
def _shift(maximum):
    """What a row's (or span's) values are shifted by: its maximum, or 0 where that is -inf, so that a row of -inf
    takes exp(-inf - 0) = 0 rather than exp(-inf - -inf) = NaN."""
    return tl.where(maximum == -float("inf"), 0.0, maximum)


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
            y = _times_float64(e, (1.0 / total.to(tl.float64))[:, None])
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
def _times_float64(e, factor):
    """fp32 e times a float64 factor, the factor split into two fp32 parts: as exact as the float64
    product (both err by 2^-48 of it before the final rounding), and e stays fp32."""
    high = factor.to(tl.float32)
    low = (factor - high.to(tl.float64)).to(tl.float32)
    return tl.fma(e, high, e * low)


@triton.jit
def _rescale(partial_max, shift, ARITH: tl.constexpr):
    """exp(partial_max - shift), the factor that brings a partial sum to the row's maximum: in
    float64 when the sums are (WIDE, PRECISE), or libdevice expf's error (2.5 ulps) would reach
    every output of a chunked or split row (measured: docs/speed.md)."""
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
    shift = _shift(new_max)
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
    nothing of the tile (split_stats_kernel) does, for misaligned views (docs/speed.md).  Where
    the tile is stored, the store's layout holds the order, and exact sums there would slow
    half rows."""
    if ARITH == PRECISE:
        total = _fixed_point_sums(e)
    elif EXACT and ARITH == HALF_RECIPROCAL:
        total = _fixed_point_sums(e).to(tl.float32)  # rounded once, the same whatever the order
    else:
        total = tl.sum(e, axis=1)
    return total


FIXED_POINT_ONE = tl.constexpr(2.0**47)  # n (1 + 2^-23) 2^47 < 2^63 for rows of n <= FIXED_POINT_COLUMNS
FIXED_POINT_COLUMNS = tl.constexpr(32768)  # the most values one fixed-point sum adds


@triton.jit
def _fixed_point_sums(e):
    """Row sums, as float64, of exponentials e in [0, 1] (or NaN), added exactly as 64-bit integers
    of 2^-47: no order of the additions, nor the register layout that decides it (which follows
    a view's alignment), can change a bit of the result.  e 2^47 is an integer already for
    e >= 2^-24, and the conversion truncates smaller ones by less than 2^-47, so the sum, at
    least 1, errs by at most n 2^-47 <= 2^-32 relative.  It runs as fast as a float64 sum or
    faster (docs/speed.md), and needs fewer registers: it keeps no float64 copy of e."""
    tl.static_assert(e.shape[1] <= FIXED_POINT_COLUMNS, "a row's fixed-point sum must fit 63 bits")
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
            shift = _shift(row_max)
            # Kept for the output, not recomputed: the exps are the costly step (docs/speed.md).
            # (A row of -inf: e is 0 and its sum 0, so its output is 0 * inf = NaN, as
            # exp(-inf - -inf) made it before.)
            e = _exp_gap(x, shift[:, None], ARITH)
            total = _row_sums(e, ARITH, False)
            y = _finish(x, e, row_max, total, LOG, MASKED, ARITH)
            valid = row_ok[:, None] & (cols < n_cols)[None, :]
            tl.store(y_ptr + y_base[:, None] + cols[None, :] * ysd, y, mask=valid)
        else:
            # The first pass keeps the row in L2 for the second, which reads it a last time: the
            # same bits, faster (docs/speed.md).  On CUDA only: whether Ascend's compiler takes
            # these hints is not known here.
            if ARITH == PRECISE or ARITH == HALF_RECIPROCAL:
                KEEP: tl.constexpr = "evict_last"
                DROP: tl.constexpr = "evict_first"
            else:
                KEEP: tl.constexpr = ""
                DROP: tl.constexpr = ""
            # The second pass rereads the row last chunk first, the likeliest still in L2: the same
            # bits, faster in fp32 (docs/speed.md).
            last = (tl.cdiv(n_cols, BLOCK) - 1) * BLOCK
            row_max = tl.full([ROWS], -float("inf"), tl.float32)
            total = _zeros(ROWS, ARITH)
            for start in tl.range(0, n_cols, BLOCK):
                x = _load(x_ptr, m_ptr, x_base, m_base, start + cols, row_ok, n_cols, xsd, msd, MASKED, KEEP)
                row_max, total = _online_update(row_max, total, x, ARITH, False)
            for back in tl.range(0, n_cols, BLOCK):
                start = last - back
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
# every pattern of ones and multiples of 16 among them, hundreds for the strided layouts a gate
# draws, and compiles would dominate its time (docs/speed.md).  What the loads need from them,
# whether rows start aligned, travels as ALIGNED.
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
        # of neighbouring rows: both kernels run faster so (docs/speed.md).
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
        # The count known to the compiler, so the statistics' loads need no mask (docs/speed.md).
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
        # layout and converted two whole tiles through shared memory, many times slower (docs/speed.md).
        row_max = tl.max(maxima)
        shift = _shift(row_max)
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
