"""Long softmax rows over a thread-block cluster, in Gluon (Triton 3.9 and later, NVIDIA sm_90 and later): the
designs tried before full_softmax's cluster path (``kernels/full_softmax/cluster_code.py``), timed against it,
QuACK and a copy by ``bench/cluster_sweep.py`` (docs/speed.md).

A row takes a cluster of C blocks, block k its span k of SPAN columns; the blocks meet in the row's maximum
and sum through distributed shared memory.  Two kernels that hold a span in registers rather than staging it
in shared memory as the adopted path does:

* ``held_kernel``: each block holds its span in registers, so the row is read from memory once and written
  once, as a copy does.
* ``reread_kernel``: a span too long for the registers is read in tiles of TILE columns twice, an online
  maximum and rescaled sum the first time, the write the second; the second read finds the span in L1 or L2,
  read a moment before by the same block.

EXCHANGE says how the blocks meet: "twice", the blocks' maxima, then their rescaled sums, two reductions
across the cluster (the compiler writing the exchange for a reduction across the cluster's dim of a layout),
each a rendezvous of all its blocks; "merged", the (maximum, sum) pairs merged in one such reduction;
"posted", the adopted path's exchange, as QuACK's.  Measured on an H100 (docs/speed.md): "posted" is the
fastest; held in registers, a span leaves one block an SM, whose loads wait on its arithmetic, and none of
these reach the staged path's speed.

The arithmetic is full_softmax's but for the sums: for fp32 outputs the gap's rounding error recovered,
libdevice expf, the sum compensated (an fp32 pair, its error some n 2^-46 of the sum) and the product by the
float64 reciprocal; for half outputs ``exp`` and the correctly rounded reciprocal.
"""

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import constexpr_function

from kernels.full_softmax.arithmetic import HALF_RECIPROCAL, PRECISE as PRECISE_ARITH, arithmetic
from kernels.full_softmax.cluster_code import (_mailbox, _merge_spans, _posted_pairs, _row_base, _span_columns,
                                               cluster_layout, launch_cluster)
from kernels.full_softmax.triton_code import _exp_gap, _rescale, _times_float64


@constexpr_function
def _arith(precise):
    """full_softmax's ARITH for an fp32 output (PRECISE) or a half one (HALF_RECIPROCAL)."""
    return PRECISE_ARITH.value if precise else HALF_RECIPROCAL.value




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


def launch(setting: tuple, x: torch.Tensor, y: torch.Tensor) -> None:
    """y = softmax(x) over the rows of 2-D ``x`` (contiguous columns), a cluster a row, with ``setting``: ("held",
    blocks, warps, None) or ("reread", blocks, warps, tile), a kind ending in "-merged" or "-posted" meeting so;
    ("staged-posted", blocks, warps, tile): full_softmax's cluster path (kernels/full_softmax/cluster_code.py);
    ("staged-grid", blocks, warps, tile): its row over blocks of the grid, meeting through global memory."""
    kind, ctas, warps, tile = setting
    rows, n = x.shape
    span = triton.next_power_of_2(n) // ctas
    aligned = x.stride(0) % 16 == 0 and y.stride(0) % 16 == 0
    if kind.startswith("staged"):
        grid = kind == "staged-grid"
        launch_cluster(y, x, rows, n, (rows, 1, 1), (x.stride(0), 0, 0), (y.stride(0), 0, 0), 1, 1,
                       ctas=1 if grid else ctas, groups=ctas if grid else 1, span=span, tile=tile, num_warps=warps,
                       arith=arithmetic(y.device, False, y.dtype), aligned=aligned)
        return
    common = dict(C=ctas, SPAN=span, LAYOUT=cluster_layout(ctas, warps, x.element_size()),
                  PRECISE=y.dtype == torch.float32, ALIGNED=aligned, UNIT=True, EXCHANGE=exchange_of(kind),
                  num_warps=warps, num_ctas=ctas)
    args = (y, x, n, 1, 1, x.stride(0), 0, 0, 1, y.stride(0), 0, 0, 1)
    if kind.startswith("held"):
        held_kernel[(rows,)](*args, **common)
    else:
        reread_kernel[(rows,)](*args, TILE=tile, **common)


def exchange_of(kind: str) -> str:
    """A setting's EXCHANGE: "held-merged" -> "merged", "held" -> "twice"."""
    return kind.partition("-")[2] or "twice"
