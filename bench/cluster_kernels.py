"""Long softmax rows over a thread-block cluster, in Gluon (Triton 3.9 and later, NVIDIA sm_90 and later): an
experiment timed by ``bench/cluster_sweep.py`` against full_softmax, QuACK and a copy, not adopted (docs/speed.md).

A row takes a cluster of C blocks, block k its span k of SPAN columns; the blocks meet in the row's maximum
and sum through distributed shared memory, the compiler writing that exchange for a reduction across the
cluster's dim of a layout.  Two kernels:

* ``held_kernel``: each block holds its span in registers, so the row is read from memory once and written
  once, as a copy does.
* ``reread_kernel``: a span too long for the registers is read in tiles of TILE columns twice, an online
  maximum and rescaled sum the first time, the write the second; the second read finds the span in L1 or L2,
  read a moment before by the same block.

EXCHANGE says how the blocks meet: "twice", the blocks' maxima, then their rescaled sums, two reductions
across the cluster, each a rendezvous of all its blocks; "merged", the (maximum, sum) pairs merged in one such
reduction; "posted", each block storing its pair into every block's shared memory (one ``st.async`` a block
and receiver, completing the receiver's mbarrier), each waiting on its own mbarrier alone, as QuACK does.
Measured on an H100 (docs/speed.md): "posted" is the fastest, level with full_softmax's two passes at 2^18,
and no exchange comes near QuACK.

Each block's part of a tile is a [C, columns] tensor whose row k lives in block k, so a reduction along dim 1
stays within a block and one along dim 0 crosses the cluster.  The layout is explicit: the order in which a
row's exponentials are added is the layout's, the same for every launch, alignment and batch.  The arithmetic
is full_softmax's (``kernels/full_softmax/arithmetic.py``; its exps, rescales and row offsets are its own
helpers of ``triton_code.py``, which Gluon calls): for fp32 outputs the gap's rounding error recovered,
libdevice expf, the sum compensated (an fp32 pair, its error some n 2^-46 of the sum) and the product by the
float64 reciprocal; for half outputs ``exp`` and the correctly rounded reciprocal.
"""

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import constexpr_function
from triton.experimental.gluon.language.nvidia.hopper import async_store, mbarrier

from kernels.full_softmax.arithmetic import HALF_RECIPROCAL, PRECISE as PRECISE_ARITH
from kernels.full_softmax.triton_code import _exp_gap, _rescale, _row_bases

VECTOR_BYTES = 16  # a thread's piece of a row: one 16-byte load


@constexpr_function
def _arith(precise):
    """full_softmax's ARITH for an fp32 output (PRECISE) or a half one (HALF_RECIPROCAL)."""
    return PRECISE_ARITH.value if precise else HALF_RECIPROCAL.value


@gluon.jit
def _row_base(row, size1, size2, stride0, stride1, stride2, ALIGNED: gl.constexpr):
    """full_softmax's offset of a row's first element; ALIGNED: a multiple of 16, as the host found every outer
    stride, so that loads take 16 bytes at a time."""
    base = _row_bases(row, size1, size2, stride0, stride1, stride2)
    if ALIGNED:
        base = gl.multiple_of(base, 16)
    return base


@gluon.jit
def _add_compensated(high_a, low_a, high_b, low_b):
    """The sum of two (high, low) pairs, the rounding error of the highs' sum kept (TwoSum)."""
    high = high_a + high_b
    back = high - high_a
    return high, (low_a + low_b) + ((high_a - (high - back)) + (high_b - back))


@gluon.jit
def _block_sums(e, PRECISE: gl.constexpr):
    """Each block's sum of its exponentials (along dim 1): compensated, as float64, for fp32 outputs."""
    if PRECISE:
        high, low = gl.reduce((e, gl.zeros_like(e)), 1, _add_compensated)
        total = high.to(gl.float64) + low.to(gl.float64)
    else:
        total = gl.sum(e, axis=1)
    return total


@gluon.jit
def _times_float64(e, factor):
    """e times a float64 factor, rounded once: the factor in two fp32 parts, e stays fp32."""
    high = factor.to(gl.float32)
    low = (factor - high.to(gl.float64)).to(gl.float32)
    return gl.fma(e, high, e * low)


@gluon.jit
def _scaled(e, factor, PRECISE: gl.constexpr):
    """e times each block's factor ([C]): as the float64 product rounded once, or in fp32."""
    factor = gl.expand_dims(factor, 1)
    if PRECISE:
        y = _times_float64(e, factor)
    else:
        y = e * factor
    return y


@gluon.jit
def _normalised(e, total, PRECISE: gl.constexpr):
    """e / total: by the float64 reciprocal (fp32 outputs), or the correctly rounded fp32 one."""
    if PRECISE:
        y = _times_float64(e, 1.0 / total)
    else:
        y = e * gl.div_rn(1.0, total)
    return y


@gluon.jit
def _merge_spans(max_a, sum_a, max_b, sum_b):
    """Two spans' (maximum, sum of exp(x - maximum)) as one: the sums rescaled to the larger maximum (in the
    sums' precision).  A span of -inf adds 0, not exp(-inf - -inf) = NaN; a NaN sum stays NaN."""
    top = gl.maximum(max_a, max_b)
    shift = gl.where(top == -float("inf"), 0.0, top).to(sum_a.dtype)
    return top, sum_a * gl.exp(max_a.to(sum_a.dtype) - shift) + sum_b * gl.exp(max_b.to(sum_b.dtype) - shift)


@constexpr_function
def _blocks_bases(ctas, dim, rank):
    """The bases of a layout's blocks: block k holds index k of ``dim``."""
    return [[1 << k if d == dim else 0 for d in range(rank)] for k in range(ctas.bit_length() - 1)]


@gluon.jit
def _mailbox(C: gl.constexpr, PRECISE: gl.constexpr):
    """A block's mbarrier for the C (maximum, sum) pairs its cluster posts to it, expecting their bytes: set up
    before the loads, so that the barrier across the cluster that follows its init (the compiler's) waits on
    blocks that have just started, not on their loads."""
    boxes: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0], _blocks_bases(C, 0, 3))
    pairs = gl.allocate_shared_memory(gl.float64 if PRECISE else gl.float32, [C, C, 2], boxes)
    arrived = mbarrier.allocate_mbarrier()
    mbarrier.init(arrived, count=1)
    mbarrier.expect(arrived, C * 2 * (8 if PRECISE else 4))
    return pairs, arrived


@gluon.jit
def _posted_pairs(part_max, part_sum, mailbox, C: gl.constexpr, LAYOUT: gl.constexpr):
    """The row's maximum and sum from the blocks' pairs: each block stores its pair into slot j of every block's
    [C, 2] buffer (j its own index) with one ``st.async``, then reads its own buffer once its mbarrier has counted
    the bytes of all C pairs.  Returned as [C], block k holding element k."""
    W: gl.constexpr = gl.num_warps()
    senders: gl.constexpr = gl.BlockedLayout([1, 1, 2], [32, 1, 1], [W, 1, 1], [2, 0, 1], _blocks_bases(C, 1, 3))
    receivers: gl.constexpr = gl.BlockedLayout([1, 1, 2], [1, 32, 1], [1, W, 1], [2, 1, 0], _blocks_bases(C, 0, 3))
    pairs, arrived = mailbox
    mine = gl.join(part_max.to(part_sum.dtype), part_sum)  # [C, 2]: block k's pair at k
    posted = gl.expand_dims(gl.convert_layout(mine, gl.SliceLayout(0, senders)), 0)
    async_store(pairs, posted + gl.zeros([C, C, 2], part_sum.dtype, layout=senders), arrived)  # (i, j): j's, to i
    mbarrier.wait(arrived, 0)
    maxima, sums = gl.split(pairs.load(receivers))
    row_max, total = gl.reduce((maxima.to(gl.float32), sums), 1, _merge_spans)
    return (gl.convert_layout(row_max, gl.SliceLayout(1, LAYOUT)),
            gl.convert_layout(total, gl.SliceLayout(1, LAYOUT)))


@gluon.jit
def _row_total(part_max, part_sum, mailbox, PRECISE: gl.constexpr, EXCHANGE: gl.constexpr, C: gl.constexpr,
               LAYOUT: gl.constexpr):
    """The row's maximum and sum of exp(x - maximum) from its blocks' (maximum, sum) pairs, met as EXCHANGE says
    (the posted exchange gives them as [C], block k holding element k; the others as scalars)."""
    if EXCHANGE == "posted":
        row_max, total = _posted_pairs(part_max, part_sum, mailbox, C, LAYOUT)
    elif EXCHANGE == "merged":
        row_max, total = gl.reduce((part_max, part_sum), 0, _merge_spans)
    else:
        row_max = gl.max(part_max, axis=0)
        shift = gl.where(row_max == -float("inf"), 0.0, row_max)
        # A span of -inf adds nothing; a span holding NaN (which max skipped) keeps its NaN sum.
        total = gl.sum(gl.where((part_max == -float("inf")) & (part_sum == part_sum), 0.0,
                                part_sum * _rescale(part_max, shift, _arith(PRECISE))), axis=0)
    return row_max, total


@gluon.jit
def _span_columns(C: gl.constexpr, SPAN: gl.constexpr, COLUMNS: gl.constexpr, LAYOUT: gl.constexpr,
                  UNIT: gl.constexpr):
    """[C, COLUMNS] column indices: row k, in block k, starts span k.  64-bit unless the columns are
    contiguous (UNIT), so that a column times a long stride stays exact past 2^31."""
    part = gl.arange(0, C, layout=gl.SliceLayout(1, LAYOUT))
    cols = gl.expand_dims(part * SPAN, 1) + gl.expand_dims(gl.arange(0, COLUMNS, layout=gl.SliceLayout(0, LAYOUT)), 0)
    if not UNIT:
        cols = cols.to(gl.int64)
    return cols


@gluon.jit(do_not_specialize=["size1", "size2", "xs0", "xs1", "xs2", "ys0", "ys1", "ys2"])
def held_kernel(y_ptr, x_ptr, n_cols, size1, size2, xs0, xs1, xs2, xsd, ys0, ys1, ys2, ysd,
                C: gl.constexpr, SPAN: gl.constexpr, LAYOUT: gl.constexpr, PRECISE: gl.constexpr,
                ALIGNED: gl.constexpr, UNIT: gl.constexpr, EXCHANGE: gl.constexpr):
    """A row a cluster, its spans held in registers: one read, one write."""
    mailbox = _mailbox(C, PRECISE) if EXCHANGE == "posted" else None
    row = gl.program_id(0).to(gl.int64)
    cols = _span_columns(C, SPAN, SPAN, LAYOUT, UNIT)
    inside = cols < n_cols
    x_row = x_ptr + _row_base(row, size1, size2, xs0, xs1, xs2, ALIGNED)
    x = gl.load(x_row + cols * xsd, mask=inside, other=-float("inf")).to(gl.float32)
    if EXCHANGE != "twice":  # each block's exps from its own maximum, rescaled after the one exchange
        part_max = gl.max(x, axis=1)
        part_shift = gl.expand_dims(gl.where(part_max == -float("inf"), 0.0, part_max), 1)
        e = _exp_gap(x, part_shift, _arith(PRECISE))
        row_max, total = _row_total(part_max, _block_sums(e, PRECISE), mailbox, PRECISE, EXCHANGE, C, LAYOUT)
        shift = gl.where(row_max == -float("inf"), 0.0, row_max)
        # A row of -inf: its sum is 0 and its outputs 0 * (0 / 0), NaN, as torch's.
        y = _scaled(e, _rescale(part_max, shift, _arith(PRECISE)) / total, PRECISE)
    else:
        row_max = gl.max(gl.max(x, axis=1), axis=0)
        # A row of -inf sums exp(x - 0) = 0, and its output 0 * inf is NaN, as torch's.
        shift = gl.where(row_max == -float("inf"), 0.0, row_max)
        e = _exp_gap(x, shift, _arith(PRECISE))
        y = _normalised(e, gl.sum(_block_sums(e, PRECISE), axis=0), PRECISE)
    y_row = y_ptr + _row_base(row, size1, size2, ys0, ys1, ys2, ALIGNED)
    gl.store(y_row + cols * ysd, y.to(y_ptr.dtype.element_ty), mask=inside)


@gluon.jit(do_not_specialize=["size1", "size2", "xs0", "xs1", "xs2", "ys0", "ys1", "ys2"])
def reread_kernel(y_ptr, x_ptr, n_cols, size1, size2, xs0, xs1, xs2, xsd, ys0, ys1, ys2, ysd,
                  C: gl.constexpr, SPAN: gl.constexpr, TILE: gl.constexpr, LAYOUT: gl.constexpr,
                  PRECISE: gl.constexpr, ALIGNED: gl.constexpr, UNIT: gl.constexpr, EXCHANGE: gl.constexpr):
    """A row a cluster, each span read twice in tiles: an online maximum and sum, then the write."""
    mailbox = _mailbox(C, PRECISE) if EXCHANGE == "posted" else None
    row = gl.program_id(0).to(gl.int64)
    cols = _span_columns(C, SPAN, TILE, LAYOUT, UNIT)
    x_row = x_ptr + _row_base(row, size1, size2, xs0, xs1, xs2, ALIGNED)
    y_row = y_ptr + _row_base(row, size1, size2, ys0, ys1, ys2, ALIGNED)
    part_max = gl.full([C], -float("inf"), gl.float32, layout=gl.SliceLayout(1, LAYOUT))
    part_sum = gl.zeros([C], gl.float64 if PRECISE else gl.float32, layout=gl.SliceLayout(1, LAYOUT))
    for start in range(0, SPAN, TILE):
        inside = (cols + start) < n_cols
        x = gl.load(x_row + (cols + start) * xsd, mask=inside, other=-float("inf"),
                    eviction_policy="evict_last").to(gl.float32)
        new_max = gl.maximum(part_max, gl.max(x, axis=1))
        # While a span holds only -inf, its sum stays 0 rather than exp(-inf - -inf) = NaN.
        shift = gl.where(new_max == -float("inf"), 0.0, new_max)
        rescale = gl.where(new_max == -float("inf"), 0.0, _rescale(part_max, shift, _arith(PRECISE)))
        part_sum = part_sum * rescale + _block_sums(_exp_gap(x, gl.expand_dims(shift, 1), _arith(PRECISE)), PRECISE)
        part_max = new_max
    row_max, total = _row_total(part_max, part_sum, mailbox, PRECISE, EXCHANGE, C, LAYOUT)
    shift = gl.where(row_max == -float("inf"), 0.0, row_max)
    if EXCHANGE == "posted":  # [C], block k holding element k
        shift = gl.expand_dims(shift, 1)
        total = gl.expand_dims(total, 1)
    for start in range(0, SPAN, TILE):
        inside = (cols + start) < n_cols
        x = gl.load(x_row + (cols + start) * xsd, mask=inside, other=-float("inf"),
                    eviction_policy="evict_first").to(gl.float32)
        y = _normalised(_exp_gap(x, shift, _arith(PRECISE)), total, PRECISE)
        gl.store(y_row + (cols + start) * ysd, y.to(y_ptr.dtype.element_ty), mask=inside)


def cluster_layout(ctas: int, warps: int, vector: int) -> gl.BlockedLayout:
    """[C, columns] over a cluster of ``ctas`` blocks of ``warps`` warps: block k holds row k, its columns in
    ``vector``-element (16-byte) pieces, consecutive threads on consecutive pieces."""
    cga = [[1 << k, 0] for k in range(ctas.bit_length() - 1)]
    return gl.BlockedLayout([1, vector], [1, 32], [1, warps], [1, 0], cga)


def launch(setting: tuple, x: torch.Tensor, y: torch.Tensor) -> None:
    """y = softmax(x) over the rows of 2-D ``x`` (contiguous columns), a cluster a row, with ``setting``: ("held",
    blocks, warps, None) or ("reread", blocks, warps, tile), a kind ending in "-merged" or "-posted" meeting so."""
    kind, ctas, warps, tile = setting
    rows, n = x.shape
    common = dict(C=ctas, SPAN=triton.next_power_of_2(n) // ctas,
                  LAYOUT=cluster_layout(ctas, warps, VECTOR_BYTES // x.element_size()), PRECISE=y.dtype == torch.float32,
                  ALIGNED=x.stride(0) % 16 == 0 and y.stride(0) % 16 == 0, UNIT=True, EXCHANGE=exchange_of(kind),
                  num_warps=warps, num_ctas=ctas)
    args = (y, x, n, 1, 1, x.stride(0), 0, 0, 1, y.stride(0), 0, 0, 1)
    if kind.startswith("held"):
        held_kernel[(rows,)](*args, **common)
    else:
        reread_kernel[(rows,)](*args, TILE=tile, **common)


def exchange_of(kind: str) -> str:
    """A setting's EXCHANGE: "held-merged" -> "merged", "held" -> "twice"."""
    return kind.partition("-")[2] or "twice"
