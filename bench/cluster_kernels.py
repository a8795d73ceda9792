"""Long softmax rows over a thread-block cluster, in Gluon (Triton 3.9 and later, NVIDIA sm_90 and later): the
designs tried beside full_softmax's cluster path (``kernels/full_softmax/cluster_code.py``), timed against it,
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

Tried after it, for rows of more spans than a cluster holds: ``grid_kernel``, the cluster path's staged block
(its helpers, its arithmetic) over G blocks of the grid, which meet through global memory.  Each block stores its
(maximum, sum) pair in the row's slot and raises the slot's flag (a release), then polls the row's G flags
(``gl.atomic_poll``, an acquire, for at most GRID_WAIT_NS); the spans whose pairs have not come by then it reads
from memory and sums itself in the same layout, to the same bits, so that no block waits forever on one that has
not started, and every block merges the pairs in the same order.  Measured on an H100 (docs/speed.md): right, and
slower than the cluster: a row's blocks are not scheduled together, and a block keeps its share of an SM while it
waits for the others.

The held and reread kernels' arithmetic is full_softmax's but for the sums: for fp32 outputs the gap's rounding
error recovered, libdevice expf, the sum compensated (an fp32 pair, its error some n 2^-46 of the sum) and the
product by the float64 reciprocal; for half outputs ``exp`` and the correctly rounded reciprocal.
"""

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import constexpr_function

from kernels.full_softmax.arithmetic import HALF_RECIPROCAL, PRECISE as PRECISE_ARITH, arithmetic
from kernels.full_softmax.cluster_code import (_mailbox, _merge_spans, _posted_pairs, _row_base, _span_columns,
                                               _scaled, _span_factor, _span_max, _span_sum, _stage_span,
                                               _write_span, cluster_layout, copies, launch_cluster)
from kernels.full_softmax.triton_code import _exp_gap, _rescale, _shift, _times_float64

GRID_WAIT_NS = 200_000  # a block of grid_kernel waits this long for its row's other blocks' pairs, many times a
# block's life, then reads the spans whose pairs have not come (a block that has not started: the grid past what
# the card holds at once)


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
        shift = _shift(row_max)
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
        part_shift = gl.expand_dims(_shift(part_max), 1)
        e = _exp_gap(x, part_shift, _arith(PRECISE))
        row_max, total = _row_total(part_max, _block_sums(e, PRECISE), mailbox, PRECISE, EXCHANGE, C, LAYOUT)
        shift = _shift(row_max)
        # A row of -inf: its sum is 0 and its outputs 0 * (0 / 0), NaN, as torch's.
        y = _scaled(e, gl.expand_dims(_rescale(part_max, shift, _arith(PRECISE)) / total, 1), _arith(PRECISE))
    else:
        row_max = gl.max(gl.max(x, axis=1), axis=0)
        # A row of -inf sums exp(x - 0) = 0, and its output 0 * inf is NaN, as torch's.
        shift = _shift(row_max)
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
        shift = _shift(new_max)
        rescale = gl.where(new_max == -float("inf"), 0.0, _rescale(part_max, shift, _arith(PRECISE)))
        part_sum = part_sum * rescale + _block_sums(_exp_gap(x, gl.expand_dims(shift, 1), _arith(PRECISE)), PRECISE)
        part_max = new_max
    row_max, total = _row_total(part_max, part_sum, mailbox, PRECISE, EXCHANGE, C, LAYOUT)
    shift = _shift(row_max)
    if EXCHANGE == "posted":  # [C], block k holding element k
        shift = gl.expand_dims(shift, 1)
        total = gl.expand_dims(total, 1)
    for start in range(0, SPAN, TILE):
        inside = (cols + start) < n_cols
        x = gl.load(x_row + (cols + start) * xsd, mask=inside, other=-float("inf"),
                    eviction_policy="evict_first").to(gl.float32)
        y = _normalised(_exp_gap(x, shift, _arith(PRECISE)), total, PRECISE)
        gl.store(y_row + (cols + start) * ysd, y.to(y_ptr.dtype.element_ty), mask=inside)


@gluon.jit
def _grid_pairs(part_max, part_sum, pairs_ptr, flags_ptr, row, g, wait_ns, x_row, n_cols, xsd, G: gl.constexpr,
                SPAN: gl.constexpr, TILE: gl.constexpr, LAYOUT: gl.constexpr, ARITH: gl.constexpr,
                UNIT: gl.constexpr):
    """The row's maximum and sum from its G blocks' pairs, met through global memory: each block stores its pair
    in the row's slot g and raises its flag (a release), then waits up to ``wait_ns`` for the G flags (an
    acquire each); a span whose pair has not come by then it reads from memory itself (``_span_max``,
    ``_span_sum``: the same bits).  So no block waits on one that has not started, whatever the order the blocks run
    in, and the pairs merge in the order of g in every block.  Returned as scalars."""
    W: gl.constexpr = gl.num_warps()
    slots: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
    first = row * G
    own = gl.arange(0, 1, layout=gl.SliceLayout(1, LAYOUT))
    gl.store(pairs_ptr + (first + g) * 2 + own, part_max.to(pairs_ptr.dtype.element_ty))
    gl.store(pairs_ptr + (first + g) * 2 + 1 + own, part_sum)
    gl.barrier()  # the stores of the pair, whichever threads made them, before the release
    gl.atomic_store(flags_ptr + first + g, 1, sem="release")
    j = gl.arange(0, G, layout=slots)
    arrived = gl.atomic_poll(flags_ptr + first + j, 1, timeout_ns=wait_ns)
    maxima = gl.load(pairs_ptr + (first + j) * 2, mask=arrived, other=0.0).to(gl.float32)
    sums = gl.load(pairs_ptr + (first + j) * 2 + 1, mask=arrived, other=0.0)
    if gl.sum((arrived == 0).to(gl.int32), axis=0) > 0:
        for k in range(G):
            if gl.sum(((j == k) & (arrived == 0)).to(gl.int32), axis=0) > 0:
                cols = _span_columns(1, SPAN, TILE, LAYOUT, UNIT) + k * SPAN
                late_max, late_shift = _span_max(x_row, None, x_row, cols, n_cols, xsd, SPAN // TILE, TILE, LAYOUT,
                                                 False, False)
                late_sum = _span_sum(x_row, None, x_row, cols, n_cols, xsd, late_shift, SPAN // TILE, TILE, LAYOUT,
                                     ARITH, False)
                maxima = gl.where(j == k, gl.max(late_max, axis=0), maxima)
                sums = gl.where(j == k, gl.max(late_sum, axis=0).to(sums.dtype), sums)
    return gl.reduce((maxima, sums), 0, _merge_spans)


@gluon.jit(do_not_specialize=["row_stride_x", "row_stride_y", "wait_ns"])
def grid_kernel(y_ptr, x_ptr, n_cols, row_stride_x, row_stride_y, pairs_ptr, flags_ptr, wait_ns, G: gl.constexpr,
                SPAN: gl.constexpr, TILE: gl.constexpr, LAYOUT: gl.constexpr, ARITH: gl.constexpr,
                ALIGNED: gl.constexpr, ASYNC: gl.constexpr):
    """The cluster path's staged block, a row over G blocks of the grid (G programs a row, contiguous columns;
    ``pairs_ptr`` and ``flags_ptr`` the rows' slots, the flags zeroed; ALIGNED: row strides of 16 elements)."""
    TILES: gl.constexpr = SPAN // TILE
    staged = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [TILES, 1, TILE],
                                       gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    row = gl.program_id(0).to(gl.int64) // G
    g = gl.program_id(0) % G
    cols = _span_columns(1, SPAN, TILE, LAYOUT, True) + g * SPAN
    x_row = x_ptr + _row_base(row, 1, 1, row_stride_x, 0, 0, ALIGNED)
    _stage_span(staged, x_row, cols, n_cols, 1, TILES, TILE, ASYNC)
    part_max, part_shift = _span_max(staged, None, x_row, cols, n_cols, 1, TILES, TILE, LAYOUT, True, ASYNC)
    part_sum = _span_sum(staged, None, x_row, cols, n_cols, 1, part_shift, TILES, TILE, LAYOUT, ARITH, True)
    row_max, total = _grid_pairs(part_max, part_sum, pairs_ptr, flags_ptr, row, g, wait_ns, x_row, n_cols, 1, G,
                                 SPAN, TILE, LAYOUT, ARITH, True)
    factor = _span_factor(part_max, row_max, total, ARITH)
    y_row = y_ptr + _row_base(row, 1, 1, row_stride_y, 0, 0, ALIGNED)
    _write_span(y_row, staged, x_row, cols, n_cols, 1, 1, factor, part_shift, TILES, TILE, LAYOUT, ARITH)


def launch_grid(y: torch.Tensor, x: torch.Tensor, *, blocks: int, tile: int, num_warps: int,
                wait_ns: int = GRID_WAIT_NS) -> None:
    """grid_kernel over the rows of 2-D ``x`` (contiguous columns), ``blocks`` a row; ``wait_ns``: how long a block
    waits for the others' pairs before reading their spans itself."""
    rows, n = x.shape
    arith = arithmetic(y.device, False, y.dtype)
    pairs = torch.empty(rows * blocks * 2, dtype=torch.float64 if arith == PRECISE_ARITH.value else torch.float32,
                        device=x.device)
    flags = torch.zeros(rows * blocks, dtype=torch.int32, device=x.device)
    aligned = x.stride(0) % 16 == 0 and y.stride(0) % 16 == 0
    grid_kernel[(rows * blocks,)](y, x, n, x.stride(0), y.stride(0), pairs, flags, wait_ns, G=blocks,
                                  SPAN=triton.next_power_of_2(n) // blocks, TILE=tile,
                                  LAYOUT=cluster_layout(1, num_warps, x.element_size()), ARITH=arith,
                                  ALIGNED=aligned, ASYNC=copies(x, n, 1, 1, aligned), num_warps=num_warps)


def launch(setting: tuple, x: torch.Tensor, y: torch.Tensor) -> None:
    """y = softmax(x) over the rows of 2-D ``x`` (contiguous columns), a cluster a row, with ``setting``: ("held",
    blocks, warps, None) or ("reread", blocks, warps, tile), a kind ending in "-merged" or "-posted" meeting so;
    ("staged-posted", blocks, warps, tile): full_softmax's cluster path (kernels/full_softmax/cluster_code.py);
    ("staged-held", blocks, warps, tile, held, even, registers): its kernel with held columns and the rest;
    ("staged-grid", blocks, warps, tile): its row over blocks of the grid, meeting through global memory."""
    kind, ctas, warps, tile = setting[:4]
    rows, n = x.shape
    span = triton.next_power_of_2(n) // ctas
    aligned = x.stride(0) % 16 == 0 and y.stride(0) % 16 == 0
    if kind == "staged-grid":
        launch_grid(y, x, blocks=ctas, tile=tile, num_warps=warps)
        return
    if kind.startswith("staged"):
        held, even, registers = setting[4:] if kind == "staged-held" else (0, True, None)
        launch_cluster(y, x, rows, n, (rows, 1, 1), (x.stride(0), 0, 0), (y.stride(0), 0, 0), 1, 1, ctas=ctas,
                       span=span, tile=tile, num_warps=warps, arith=arithmetic(y.device, False, y.dtype),
                       aligned=aligned, held=held, even=even and n == ctas * span, registers=registers)
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
