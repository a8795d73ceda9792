"""full_softmax's cluster path, in Gluon (Triton 3.9 and later, NVIDIA sm_90 and sm_100): a long row over a
thread-block cluster, read from memory once and written once, as a copy is.

A row takes a cluster of C blocks, block k its span k of SPAN columns.  Each block copies its span (but for the
HELD columns below) into its shared memory (``cp.async``, a copy group a tile: no register waits on a load in
flight, so that a few blocks of small tiles share an SM and one block's arithmetic runs while another's span
arrives), then reads it from there in tiles of TILE columns: the span's maximum as its tiles land; its exps
and their sum (an fp32 span's exps replace it in place, so that the write multiplies them rather than computing
them again); the blocks' (maximum, sum) pairs met through distributed shared memory; the write.  The blocks
meet as QuACK's do: each block stores its pair into every block's shared memory (one ``st.async`` a receiver,
counted by the receiver's mbarrier) and waits on its own mbarrier alone, not at a barrier of the whole cluster.

Each block's part of a tile is a [C, TILE] tensor whose row k lives in block k, its columns in 16-byte pieces
over the threads; its layout is explicit, so the order of a span's additions is the layout's, the same for
every call of a shape class whatever the view's strides or alignment (a view that cannot take ``cp.async``
is staged by ordinary loads into the same layout).  The arithmetic is the other paths'
(:mod:`.arithmetic`, the helpers of :mod:`.triton_code`, which Gluon calls): for fp32 outputs the gap's
rounding error recovered, libdevice expf, exact sums (``_fixed_point_sums``' integers of 2^-47, here kept
per thread across a span's tiles) and the product by the float64 factor; for half outputs ``exp`` and the
correctly rounded reciprocal.  Measured on an H100 (docs/speed.md).

A row of C x SPAN columns (EVEN: a power of two, its class's longest) compiles without masks, which fold away:
4 to 6 fewer instructions a value, 3 to 5 % faster (docs/speed.md).  A span's first HELD columns may be held in
registers, loaded before the copies, the rest staged: the plans of spans of 128 KB (twice a block's share of an SM's
shared memory) hold a quarter so, two blocks an SM, each thread's registers limited so that both fit
(``cuda_plan.cluster_settings``; ``bench/cluster_sweep.py`` times other settings, "staged-held").
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import constexpr_function
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import async_store, mbarrier

from .arithmetic import HALF_RECIPROCAL, PRECISE
from .triton_code import FIXED_POINT_COLUMNS, FIXED_POINT_ONE, _exp_gap, _rescale, _row_bases, _shift, _times_float64

VECTOR_BYTES = 16  # a thread's piece of a row: one 16-byte copy


@gluon.jit
def _row_base(row, size1, size2, stride0, stride1, stride2, ALIGNED: gl.constexpr):
    """The offset of a row's first element; ALIGNED: a multiple of 16, as the host found every outer stride."""
    base = _row_bases(row, size1, size2, stride0, stride1, stride2)
    if ALIGNED:
        base = gl.multiple_of(base, 16)
    return base


@constexpr_function
def _blocks_bases(ctas, dim, rank):
    """The bases of a layout's blocks: block k holds index k of ``dim``."""
    return [[1 << k if d == dim else 0 for d in range(rank)] for k in range(ctas.bit_length() - 1)]


@gluon.jit
def _span_columns(C: gl.constexpr, SPAN: gl.constexpr, TILE: gl.constexpr, LAYOUT: gl.constexpr,
                  UNIT: gl.constexpr):
    """[C, TILE] column indices of a span's first tile: row k, in block k, starts span k.  64-bit unless the
    columns are contiguous (UNIT), so that a column times a long stride stays exact past 2^31."""
    part = gl.arange(0, C, layout=gl.SliceLayout(1, LAYOUT))
    cols = gl.expand_dims(part * SPAN, 1) + gl.expand_dims(gl.arange(0, TILE, layout=gl.SliceLayout(0, LAYOUT)), 0)
    if not UNIT:
        cols = cols.to(gl.int64)
    return cols


@gluon.jit
def _merge_spans(max_a, sum_a, max_b, sum_b):
    """Two spans' (maximum, sum of exp(x - maximum)) as one: the sums rescaled to the larger maximum (in the
    sums' precision).  A span of -inf adds 0, not exp(-inf - -inf) = NaN; a NaN sum stays NaN."""
    top = gl.maximum(max_a, max_b)
    shift = _shift(top).to(sum_a.dtype)
    return top, sum_a * gl.exp(max_a.to(sum_a.dtype) - shift) + sum_b * gl.exp(max_b.to(sum_b.dtype) - shift)


@gluon.jit
def _mailbox(C: gl.constexpr, PRECISE_SUMS: gl.constexpr):
    """A block's mbarrier for the C (maximum, sum) pairs its cluster posts to it, expecting their bytes: set up
    before the loads, so that the barrier across the cluster that follows its init (the compiler's) waits on
    blocks that have just started, not on their loads."""
    boxes: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0], _blocks_bases(C, 0, 3))
    pairs = gl.allocate_shared_memory(gl.float64 if PRECISE_SUMS else gl.float32, [C, C, 2], boxes)
    arrived = mbarrier.allocate_mbarrier()
    mbarrier.init(arrived, count=1)
    mbarrier.expect(arrived, C * 2 * (8 if PRECISE_SUMS else 4))
    return pairs, arrived


@gluon.jit
def _posted_pairs(part_max, part_sum, mailbox, C: gl.constexpr, LAYOUT: gl.constexpr):
    """The row's maximum and sum from the blocks' pairs: each block stores its pair into slot j of every block's
    [C, 2] buffer (j its own index) with one ``st.async``, then reads its own buffer once its mbarrier has counted
    the bytes of all C pairs, and merges them in the order of j.  Returned as [C], block k holding element k."""
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
def _stage_span(staged, x_row, cols, n_cols, xsd, TILES: gl.constexpr, TILE: gl.constexpr, ASYNC: gl.constexpr):
    """Copy a block's span into its shared memory: by ``cp.async``, a copy group a tile, all in flight together
    (ASYNC); else by ordinary loads into the same layout."""
    for t in gl.static_range(TILES):
        inside = (cols + t * TILE) < n_cols
        if ASYNC:
            async_copy.async_load(staged.index(t), x_row + (cols + t * TILE) * xsd, mask=inside)
            async_copy.commit_group()
        else:
            staged.index(t).store(gl.load(x_row + (cols + t * TILE) * xsd, mask=inside))


@gluon.jit
def _tile(staged, x_row, t: gl.constexpr, cols, n_cols, xsd, TILE: gl.constexpr, LAYOUT: gl.constexpr,
          STAGED: gl.constexpr):
    """Tile t of a span in fp32, -inf past the row's end: from the block's shared memory (STAGED) or from memory."""
    inside = (cols + t * TILE) < n_cols
    if STAGED:
        values = staged.index(t).load(LAYOUT)
    else:
        values = gl.load(x_row + (cols + t * TILE) * xsd, mask=inside)
    return gl.where(inside, values.to(gl.float32), -float("inf"))


@gluon.jit
def _held_span(x_row, held_cols, n_cols, xsd):
    """A span's first columns, held in registers: loaded before the staged tiles' copies, -inf past the row's end."""
    return gl.load(x_row + held_cols * xsd, mask=held_cols < n_cols, other=-float("inf"))


@gluon.jit
def _span_max(staged, held, x_row, cols, n_cols, xsd, TILES: gl.constexpr, TILE: gl.constexpr,
              LAYOUT: gl.constexpr, STAGED: gl.constexpr, ASYNC: gl.constexpr):
    """A span's maximum ([C]) and shift ([C, 1]: the maximum, 0 for a span of -inf): of its held columns
    (``held``, in registers, or None) and its staged tiles (STAGED; ASYNC: waiting on each tile's copy group as it
    lands), or of its tiles read from memory in the same layout (bench/cluster_kernels.py's grid kernel: a span
    another block has not posted in time)."""
    top = gl.full([cols.shape[0], TILE], -float("inf"), gl.float32, layout=LAYOUT)
    for t in gl.static_range(TILES):
        if ASYNC:
            async_copy.wait_group(TILES - 1 - t)
        top = gl.maximum(top, _tile(staged, x_row, t, cols, n_cols, xsd, TILE, LAYOUT, STAGED))
    part_max = gl.max(top, axis=1)
    if held is not None:
        part_max = gl.maximum(part_max, gl.max(held.to(gl.float32), axis=1))
    return part_max, gl.expand_dims(_shift(part_max), 1)


@gluon.jit
def _span_sum(staged, held_exps, x_row, cols, n_cols, xsd, part_shift, TILES: gl.constexpr, TILE: gl.constexpr,
              LAYOUT: gl.constexpr, ARITH: gl.constexpr, STAGED: gl.constexpr):
    """A span's sum of exp(x - shift) ([C]): its held columns' exps (``held_exps`` or None) and its tiles' (an
    fp32 span's staged exps replace it in place), the tiles staged (STAGED) or read from memory, to the same bits."""
    floats = gl.zeros([cols.shape[0], TILE], gl.float32, layout=LAYOUT)
    fixed = gl.zeros([cols.shape[0], TILE], gl.int64, layout=LAYOUT)
    for t in gl.static_range(TILES):
        e = _exp_gap(_tile(staged, x_row, t, cols, n_cols, xsd, TILE, LAYOUT, STAGED), part_shift, ARITH)
        floats += e  # for an fp32 output, only to keep a NaN the integers lose
        if ARITH == PRECISE:
            fixed += (e * FIXED_POINT_ONE).to(gl.int64)
        if STAGED:
            if x_row.dtype.element_ty == gl.float32:
                staged.index(t).store(e)
    if ARITH == PRECISE:
        fixed_sum = gl.sum(fixed, axis=1)
        if held_exps is not None:
            fixed_sum += gl.sum((held_exps * FIXED_POINT_ONE).to(gl.int64), axis=1)
        exact = fixed_sum.to(gl.float64) * (1.0 / FIXED_POINT_ONE)
    float_sum = gl.sum(floats, axis=1)
    if held_exps is not None:
        float_sum += gl.sum(held_exps, axis=1)
    if ARITH == PRECISE:
        part_sum = gl.where(float_sum == float_sum, exact, float("nan"))
    else:
        part_sum = float_sum
    return part_sum


@gluon.jit
def _span_factor(part_max, row_max, total, ARITH: gl.constexpr):
    """The factor that takes a block's exps from its span's maximum to the row's and divides them by the row's sum,
    [C, 1]."""
    shift = _shift(row_max)
    # A row of -inf: its sum is 0 and its outputs 0 * (1 / 0), NaN, as torch's.
    if ARITH == PRECISE:
        factor = gl.expand_dims(_rescale(part_max, shift, ARITH) / total, 1)
    else:
        factor = gl.expand_dims(_rescale(part_max, shift, ARITH) * gl.div_rn(1.0, total), 1)
    return factor


@gluon.jit
def _write_span(y_row, staged, x_row, cols, n_cols, xsd, ysd, factor, part_shift, TILES: gl.constexpr,
                TILE: gl.constexpr, LAYOUT: gl.constexpr, ARITH: gl.constexpr):
    """Write a block's span of the output: its exps (an fp32 span's, kept in place; a half span's, computed again)
    times its factor."""
    for t in gl.static_range(TILES):
        if x_row.dtype.element_ty == gl.float32:
            e = staged.index(t).load(LAYOUT)
        else:
            e = _exp_gap(_tile(staged, x_row, t, cols, n_cols, xsd, TILE, LAYOUT, True), part_shift, ARITH)
        y = _scaled(e, factor, ARITH)
        gl.store(y_row + (cols + t * TILE) * ysd, y.to(y_row.dtype.element_ty), mask=(cols + t * TILE) < n_cols)


@gluon.jit
def _scaled(e, factor, ARITH: gl.constexpr):
    """Exps times a span's factor."""
    if ARITH == PRECISE:
        y = _times_float64(e, factor)
    else:
        y = e * factor
    return y


@gluon.jit(do_not_specialize=["size1", "size2", "xs0", "xs1", "xs2", "ys0", "ys1", "ys2"])
def cluster_kernel(y_ptr, x_ptr, n_cols, size1, size2, xs0, xs1, xs2, xsd, ys0, ys1, ys2, ysd,
                   C: gl.constexpr, SPAN: gl.constexpr, TILE: gl.constexpr, HELD: gl.constexpr,
                   LAYOUT: gl.constexpr, ARITH: gl.constexpr, ALIGNED: gl.constexpr, UNIT: gl.constexpr,
                   ASYNC: gl.constexpr, EVEN: gl.constexpr):
    """A row a cluster of C blocks (the grid: a cluster a row); a span's first HELD columns held in registers (0:
    none), the rest staged.  ASYNC: staged by ``cp.async`` (unit column stride, rows and row length in 16-byte
    units); else by ordinary loads into the same layout.  EVEN: rows of C * SPAN, whose masks fold away."""
    if EVEN:
        n_cols = C * SPAN
    gl.static_assert(ARITH == PRECISE or ARITH == HALF_RECIPROCAL, "the cluster path computes as CUDA's fp32 or half")
    gl.static_assert(ARITH != PRECISE or SPAN <= FIXED_POINT_COLUMNS, "a span's fixed-point sum must fit 63 bits")
    gl.static_assert(HELD + TILE <= SPAN and (SPAN - HELD) % TILE == 0, "a span stages one whole tile or more")
    TILES: gl.constexpr = (SPAN - HELD) // TILE
    mailbox = _mailbox(C, ARITH == PRECISE)
    staged = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [TILES, C, TILE],
                                       gl.SwizzledSharedLayout(1, 1, 1, [1, 0], _blocks_bases(C, 0, 2)))
    row = gl.program_id(0).to(gl.int64)
    cols = _span_columns(C, SPAN, TILE, LAYOUT, UNIT) + HELD
    x_row = x_ptr + _row_base(row, size1, size2, xs0, xs1, xs2, ALIGNED)
    held = None
    held_exps = None
    if HELD > 0:
        held_cols = _span_columns(C, SPAN, HELD, LAYOUT, UNIT)
        held = _held_span(x_row, held_cols, n_cols, xsd)
    _stage_span(staged, x_row, cols, n_cols, xsd, TILES, TILE, ASYNC)
    # Maxima and sums run elementwise over the tiles, reduced across the block's threads once.
    part_max, part_shift = _span_max(staged, held, x_row, cols, n_cols, xsd, TILES, TILE, LAYOUT, True, ASYNC)
    if HELD > 0:
        held_exps = _exp_gap(held.to(gl.float32), part_shift, ARITH)
    part_sum = _span_sum(staged, held_exps, x_row, cols, n_cols, xsd, part_shift, TILES, TILE, LAYOUT, ARITH, True)
    row_max, total = _posted_pairs(part_max, part_sum, mailbox, C, LAYOUT)
    factor = _span_factor(part_max, row_max, total, ARITH)
    y_row = y_ptr + _row_base(row, size1, size2, ys0, ys1, ys2, ALIGNED)
    if HELD > 0:
        if ARITH == PRECISE:
            y = _scaled(held_exps, factor, ARITH)
        else:  # a half output keeps its inputs, not their exps: exps of the row's maximum, times 1 / sum
            row_shift = gl.expand_dims(_shift(row_max), 1)
            y = _exp_gap(held.to(gl.float32), row_shift, ARITH) * gl.expand_dims(gl.div_rn(1.0, total), 1)
        gl.store(y_row + held_cols * ysd, y.to(y_ptr.dtype.element_ty), mask=held_cols < n_cols)
    _write_span(y_row, staged, x_row, cols, n_cols, xsd, ysd, factor, part_shift, TILES, TILE, LAYOUT, ARITH)


def cluster_layout(ctas: int, warps: int, element_size: int) -> gl.BlockedLayout:
    """[C, columns] over a cluster of ``ctas`` blocks of ``warps`` warps: block k holds row k, its columns in
    16-byte pieces, consecutive threads on consecutive pieces."""
    cga = [[1 << k, 0] for k in range(ctas.bit_length() - 1)]
    return gl.BlockedLayout([1, VECTOR_BYTES // element_size], [1, 32], [1, warps], [1, 0], cga)


def launch_cluster(y, x, n_rows: int, n_cols: int, sizes, xs, ys, xsd: int, ysd: int, *, ctas: int, span: int,
                   tile: int, num_warps: int, arith: int, aligned: bool, held: int = 0, even: bool | None = None,
                   registers: int | None = None) -> None:
    """Launch cluster_kernel over the rows of x, a cluster a row (``sizes`` and the strides ``xs``, ``ys``: the
    merged dims that index the rows, as ``layout.row_layout`` gives them; ``aligned``: every outer stride a
    multiple of 16; ``held``: columns of a span in registers; ``even``: compile without masks, by default where the
    rows are ctas * span long; ``registers``: the most a thread may take)."""
    if even and n_cols != ctas * span:
        raise ValueError(f"even: rows of {n_cols} columns need their masks (only rows of ctas * span = "
                         f"{ctas * span} go without)")
    cluster_kernel[(n_rows,)](y, x, n_cols, sizes[1], sizes[2], *xs, xsd, *ys, ysd, C=ctas, SPAN=span, TILE=tile,
                              HELD=held, LAYOUT=cluster_layout(ctas, num_warps, x.element_size()), ARITH=arith,
                              ALIGNED=aligned, UNIT=xsd == 1 and ysd == 1, ASYNC=copies(x, n_cols, xsd, ysd, aligned),
                              EVEN=n_cols == ctas * span if even is None else even, num_warps=num_warps,
                              num_ctas=ctas, maxnreg=registers)


def copies(x, n_cols: int, xsd: int, ysd: int, aligned: bool) -> bool:
    """Whether a span may be staged by ``cp.async``: unit column strides, rows and row length in 16-byte units."""
    return xsd == 1 and ysd == 1 and aligned and n_cols % 16 == 0 and x.data_ptr() % VECTOR_BYTES == 0
