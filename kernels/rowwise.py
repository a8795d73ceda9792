"""A row-wise Triton softmax over strided 2-D input, and the parent of the mutation catalog.

Like the documents' kernel it keeps a whole row in one block and walks rows
with persistent programs, but it follows both strides of the input and of the
output, forms offsets in 64 bits, and computes in fp32 whatever the input dtype.
It rounds bf16 outputs to nearest itself, in integer arithmetic: Triton's
interpreter truncates its own fp32 -> bf16 conversion, which would hide a kernel
that truncates (one of the mutants) on the CPU.

Its backward (:func:`softmax_backward`) computes y * (grad - sum(grad * y)) per row in fp32, the row in one
block, from the forward's output and the gradient with respect to it; :func:`log_softmax_backward` computes
grad - exp(y) * sum(grad) from a log_softmax's output.

``MUTATION`` plants one known bug at a time, in the forward or the backward (:mod:`specs.mutants`).  With
``MUTATION = CORRECT`` every switch below compiles away and the kernel is
correct; each mutant is this source with exactly one switch flipped, so a
mutant differs from its parent by its bug alone.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import compute_units, require_triton_device
from .limits import HALF_AND_SINGLE, InputLimits

# Mutation codes: constexpr globals, which @triton.jit code may read.
CORRECT = tl.constexpr(0)
IGNORE_COLUMN_STRIDE = tl.constexpr(1)
ZERO_PADDING = tl.constexpr(2)
NO_MAX_SUBTRACTION = tl.constexpr(3)
HALF_ACCUMULATION = tl.constexpr(4)
LOW_PRECISION_RECIPROCAL = tl.constexpr(5)
MASK_OFF_BY_ONE = tl.constexpr(6)
OFFSET_WRAP = tl.constexpr(7)
NAN_DROPPED_BY_MAX = tl.constexpr(8)
ROW_COUNT_DEPENDENT_SUM = tl.constexpr(9)
LAST_ROW_SKIPPED = tl.constexpr(10)
OUTPUT_WITH_INPUT_STRIDE = tl.constexpr(11)
ALL_NEG_INF_UNIFORM = tl.constexpr(12)
ROW_LEFT_UNWRITTEN = tl.constexpr(13)
SUBNORMAL_FLUSH = tl.constexpr(14)
HALF_PRECISION_EXP = tl.constexpr(15)
PARTIAL_ROW_MAX = tl.constexpr(16)
FINITE_FILL = tl.constexpr(17)
EXP2_FMA = tl.constexpr(18)
BF16_SUM = tl.constexpr(19)
SKIP_LAST_OF_LONG_ROWS = tl.constexpr(20)
BF16_TRUNCATION = tl.constexpr(21)
FP16_RECIPROCAL = tl.constexpr(22)
ROW_INDEX_WRAP = tl.constexpr(23)
# Bugs of the backward (rowwise_softmax_backward_kernel):
BACKWARD_BF16_DOT = tl.constexpr(24)
BACKWARD_SUM_OF_GRAD = tl.constexpr(25)
BACKWARD_DOT_MISSES_LAST = tl.constexpr(26)
BACKWARD_DIFFERENCE_IN_INPUT_DTYPE = tl.constexpr(27)
LOG_BACKWARD_SOFTMAX_DOT = tl.constexpr(28)
LOG_BACKWARD_Y_FOR_EXP = tl.constexpr(29)
LOG_BACKWARD_EXP_IN_INPUT_DTYPE = tl.constexpr(30)
BACKWARD_GRAD_WITH_Y_STRIDES = tl.constexpr(31)
# Bugs of the scaled softmax (rowwise_scaled_softmax_kernel):
SCALE_AFTER_MAX_IN_INPUT_DTYPE = tl.constexpr(32)
SCALE_IN_INPUT_DTYPE = tl.constexpr(33)
CAUSAL_DIAGONAL_OFF_BY_ONE = tl.constexpr(34)
BIAS_OF_FIRST_ROW = tl.constexpr(35)
BIAS_NEG_INF_AS_FINITE = tl.constexpr(36)
ROWS_PAST_512_FORGOTTEN = tl.constexpr(37)  # a forward bug, numbered after the others
BIAS_UNIT_COLUMN_STRIDE = tl.constexpr(38)
BACKWARD_MUTATIONS = frozenset(code.value for code in (
    BACKWARD_BF16_DOT, BACKWARD_SUM_OF_GRAD, BACKWARD_DOT_MISSES_LAST, BACKWARD_DIFFERENCE_IN_INPUT_DTYPE,
    LOG_BACKWARD_SOFTMAX_DOT, LOG_BACKWARD_Y_FOR_EXP, LOG_BACKWARD_EXP_IN_INPUT_DTYPE, BACKWARD_GRAD_WITH_Y_STRIDES))
SCALED_MUTATIONS = frozenset(code.value for code in (
    SCALE_AFTER_MAX_IN_INPUT_DTYPE, SCALE_IN_INPUT_DTYPE, CAUSAL_DIAGONAL_OFF_BY_ONE, BIAS_OF_FIRST_ROW,
    BIAS_NEG_INF_AS_FINITE, BIAS_UNIT_COLUMN_STRIDE))

WRAP = tl.constexpr(1 << 14)  # offsets wrap here instead of at 2^31, so that CPU-sized inputs show the bug
ROW_WRAP = tl.constexpr(1 << 8)  # a narrow row index wraps here (standing for 2^16), within CPU-sized inputs
LONG_ROW = tl.constexpr(1024)
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _to_bfloat16(y, TRUNCATE: tl.constexpr):
    """fp32 -> bf16 rounded to nearest, ties to even, in integer arithmetic (or truncated)."""
    bits = y.to(tl.uint32, bitcast=True)
    if not TRUNCATE:
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
    rounded = (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return tl.where(y == y, rounded, y.to(tl.bfloat16))  # a NaN's payload could carry into an infinity


# No integer argument is specialised: Triton would compile a variant per pattern of ones and
# multiples of 16 among them, for each mutant too (679 compiles in an H100 gate that
# specialised the column strides and the row length).  This kernel is judged, not timed.
@triton.jit(do_not_specialize=["n_rows", "n_cols", "x_row_stride", "x_col_stride", "y_row_stride", "y_col_stride",
                               "x_extent"])
def rowwise_softmax_kernel(y_ptr, x_ptr, n_rows, n_cols, x_row_stride, x_col_stride, y_row_stride, y_col_stride,
                           x_extent, BLOCK: tl.constexpr, MUTATION: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    wide_cols = cols.to(tl.int64)
    mask = cols < n_cols
    if MUTATION == MASK_OFF_BY_ONE:
        mask = cols < n_cols - 1
    last = n_rows
    if MUTATION == LAST_ROW_SKIPPED:
        last = tl.where(n_rows % 4 == 3, n_rows - 1, n_rows)
    if MUTATION == ROWS_PAST_512_FORGOTTEN:  # a grid sized for 512 rows at most, as a persistent launch may be
        last = tl.minimum(n_rows, 512)
    for row in tl.range(tl.program_id(0), last, tl.num_programs(0)):
        # 64-bit offsets: row * stride passes 2^31 on large inputs.  (Strides equal to 1 arrive
        # as Python ints, so the widening goes through the row index, not the strides.)
        row = row + tl.zeros([1], tl.int64)
        if MUTATION == ROW_INDEX_WRAP:
            row = row % ROW_WRAP
        x_offsets = row * x_row_stride + wide_cols * x_col_stride
        load_mask = mask
        if MUTATION == IGNORE_COLUMN_STRIDE:
            x_offsets = row * x_row_stride + cols
            load_mask = mask & (x_offsets < x_extent)  # read the wrong elements, never outside the storage
        if MUTATION == OFFSET_WRAP:
            x_offsets = x_offsets % WRAP
            load_mask = mask & (x_offsets < x_extent)
        # Padding lanes read -inf: they cannot win the max and exp(-inf) adds nothing to the sum.
        padding = -float("inf")
        if MUTATION == ZERO_PADDING:
            padding = 0.0
        if MUTATION == FINITE_FILL:
            padding = -1e4
        x = tl.load(x_ptr + x_offsets, mask=load_mask, other=padding).to(tl.float32)
        if MUTATION == NAN_DROPPED_BY_MAX:
            x = tl.where(x != x, -float("inf"), x)
        row_max = tl.max(x, axis=0)
        if MUTATION == PARTIAL_ROW_MAX:
            row_max = tl.max(tl.where(cols < (n_cols + 1) // 2, x, -float("inf")), axis=0)
        if MUTATION == ALL_NEG_INF_UNIFORM:
            x = tl.where(row_max == -float("inf"), tl.where(mask, 0.0, x), x)
            row_max = tl.max(x, axis=0)
        gap = x - row_max
        if MUTATION == NO_MAX_SUBTRACTION:
            gap = x
        if MUTATION == HALF_PRECISION_EXP:
            gap = gap.to(tl.float16).to(tl.float32)
        numerator = tl.exp(gap)
        if MUTATION == EXP2_FMA:  # 2^(x log2e - m log2e), m log2e contracted into an FMA, x log2e rounded
            numerator = tl.exp2(tl.fma(-row_max, LOG2E, x * LOG2E))
        denominator = tl.sum(numerator, axis=0)
        if MUTATION == HALF_ACCUMULATION:
            denominator = tl.sum(numerator.to(x_ptr.dtype.element_ty), axis=0).to(tl.float32)
        if MUTATION == BF16_SUM:
            denominator = tl.sum(numerator.to(tl.bfloat16), axis=0).to(tl.float32)
        if MUTATION == SKIP_LAST_OF_LONG_ROWS:
            denominator = tl.sum(tl.where((cols < n_cols - 1) | (n_cols <= LONG_ROW), numerator, 0.0), axis=0)
        if MUTATION == ROW_COUNT_DEPENDENT_SUM:
            if n_rows % 2 == 1:
                halves = tl.sum(tl.where(cols < BLOCK // 2, numerator, 0.0), axis=0)
                denominator = halves + tl.sum(tl.where(cols >= BLOCK // 2, numerator, 0.0), axis=0)
        y = numerator / denominator
        if MUTATION == LOW_PRECISION_RECIPROCAL:
            y = numerator * (1.0 / denominator).to(tl.bfloat16).to(tl.float32)
        if MUTATION == FP16_RECIPROCAL:
            y = numerator * (1.0 / denominator).to(tl.float16).to(tl.float32)
        if MUTATION == SUBNORMAL_FLUSH:
            y = tl.where(y < 1.1754943508222875e-38, 0.0, y)
        y_offsets = row * y_row_stride + wide_cols * y_col_stride
        store_mask = mask
        if MUTATION == ROW_LEFT_UNWRITTEN:
            store_mask = mask & ((row + (n_cols % 5 != 2).to(tl.int64)) != 0)  # row 0 when n_cols % 5 == 2
        if y_ptr.dtype.element_ty == tl.bfloat16:
            tl.store(y_ptr + y_offsets, _to_bfloat16(y, MUTATION == BF16_TRUNCATION), mask=store_mask)
        else:
            tl.store(y_ptr + y_offsets, y, mask=store_mask)


@triton.jit(do_not_specialize=["n_rows", "n_cols", "y_row_stride", "y_col_stride", "g_row_stride", "g_col_stride",
                               "dx_row_stride", "dx_col_stride"])
def rowwise_softmax_backward_kernel(dx_ptr, g_ptr, y_ptr, n_rows, n_cols, g_row_stride, g_col_stride, y_row_stride,
                                    y_col_stride, dx_row_stride, dx_col_stride, BLOCK: tl.constexpr,
                                    LOG: tl.constexpr, MUTATION: tl.constexpr):
    """dx = y * (g - sum(g * y)) per row (LOG: dx = g - exp(y) * sum(g), y a log_softmax), in fp32, the row in one
    block."""
    cols = tl.arange(0, BLOCK)
    wide_cols = cols.to(tl.int64)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row = row + tl.zeros([1], tl.int64)
        g_offsets = row * g_row_stride + wide_cols * g_col_stride
        if MUTATION == BACKWARD_GRAD_WITH_Y_STRIDES:  # as if grad were laid out as y
            g_offsets = row * y_row_stride + wide_cols * y_col_stride
        g = tl.load(g_ptr + g_offsets, mask=mask, other=0.0).to(tl.float32)
        y = tl.load(y_ptr + row * y_row_stride + wide_cols * y_col_stride, mask=mask, other=0.0).to(tl.float32)
        if LOG:
            e = tl.exp(y)
            if MUTATION == LOG_BACKWARD_Y_FOR_EXP:
                e = y
            if MUTATION == LOG_BACKWARD_EXP_IN_INPUT_DTYPE:
                e = e.to(g_ptr.dtype.element_ty).to(tl.float32)
            total = tl.sum(g, axis=0)
            if MUTATION == LOG_BACKWARD_SOFTMAX_DOT:  # the softmax backward's sum(g * y), with y = exp(log_softmax)
                total = tl.sum(tl.where(mask, g * e, 0.0), axis=0)
            dx = g - e * total
        else:
            dx = _softmax_backward_row(g, y, cols, n_cols, g_ptr, MUTATION)
        offsets = row * dx_row_stride + wide_cols * dx_col_stride
        if dx_ptr.dtype.element_ty == tl.bfloat16:
            tl.store(dx_ptr + offsets, _to_bfloat16(dx, False), mask=mask)
        else:
            tl.store(dx_ptr + offsets, dx, mask=mask)


@triton.jit
def _softmax_backward_row(g, y, cols, n_cols, g_ptr, MUTATION: tl.constexpr):
    """y * (g - sum(g * y)) of one row, the padding lanes 0."""
    products = g * y
    if MUTATION == BACKWARD_SUM_OF_GRAD:  # log_softmax's backward sums the gradient alone
        products = g
    if MUTATION == BACKWARD_DOT_MISSES_LAST:
        products = tl.where(cols < n_cols - 1, products, 0.0)
    dot = tl.sum(products, axis=0)
    if MUTATION == BACKWARD_BF16_DOT:
        dot = tl.sum(products.to(tl.bfloat16), axis=0).to(tl.bfloat16).to(tl.float32)
    difference = g - dot
    if MUTATION == BACKWARD_DIFFERENCE_IN_INPUT_DTYPE:
        difference = difference.to(g_ptr.dtype.element_ty).to(tl.float32)
    return y * difference


# A scale arrives as an fp32 argument: none is specialised (Triton would compile another variant for a scale of 1).
@triton.jit(do_not_specialize=["scale", "n_rows", "n_cols", "x_row_stride", "x_col_stride", "b_row_stride",
                               "b_col_stride", "y_row_stride", "y_col_stride"])
def rowwise_scaled_softmax_kernel(y_ptr, x_ptr, b_ptr, scale, n_rows, n_cols, x_row_stride, x_col_stride, b_row_stride,
                                  b_col_stride, y_row_stride, y_col_stride, BLOCK: tl.constexpr,
                                  BIASED: tl.constexpr, CAUSAL: tl.constexpr, MUTATION: tl.constexpr):
    """softmax(scale * x + bias) per row in fp32 (the product and the sum formed in fp32), entries past the diagonal
    -inf where CAUSAL (column j of row i, j > i), the row in one block."""
    cols = tl.arange(0, BLOCK)
    wide_cols = cols.to(tl.int64)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row = row + tl.zeros([1], tl.int64)
        x = tl.load(x_ptr + row * x_row_stride + wide_cols * x_col_stride, mask=mask, other=-float("inf"))
        if MUTATION == SCALE_AFTER_MAX_IN_INPUT_DTYPE:  # (x - max) in the input dtype, then scaled
            x = x.to(tl.float32)
            z = (x - tl.max(x, axis=0)).to(x_ptr.dtype.element_ty).to(tl.float32) * scale
        else:
            z = x.to(tl.float32) * scale
        if MUTATION == SCALE_IN_INPUT_DTYPE:
            z = z.to(x_ptr.dtype.element_ty).to(tl.float32)
        if BIASED:
            bias_row = row
            if MUTATION == BIAS_OF_FIRST_ROW:  # as if the bias were one row broadcast over all
                bias_row = row * 0
            bias_cols = wide_cols * b_col_stride
            if MUTATION == BIAS_UNIT_COLUMN_STRIDE:  # the bias's columns taken as adjacent, as a dense bias's are
                bias_cols = wide_cols
            bias = tl.load(b_ptr + bias_row * b_row_stride + bias_cols, mask=mask, other=0.0)
            bias = bias.to(tl.float32)
            if MUTATION == BIAS_NEG_INF_AS_FINITE:
                bias = tl.maximum(bias, -1e4)
            z = z + bias
        if CAUSAL:
            above = cols > row
            if MUTATION == CAUSAL_DIAGONAL_OFF_BY_ONE:
                above = cols > row + 1
            z = tl.where(above, -float("inf"), z)
        z = tl.where(mask, z, -float("inf"))
        numerator = tl.exp(z - tl.max(z, axis=0))
        y = numerator / tl.sum(numerator, axis=0)
        offsets = row * y_row_stride + wide_cols * y_col_stride
        if y_ptr.dtype.element_ty == tl.bfloat16:
            tl.store(y_ptr + offsets, _to_bfloat16(y, False), mask=mask)
        else:
            tl.store(y_ptr + offsets, y, mask=mask)


LIMITS = InputLimits(
    dtypes=HALF_AND_SINGLE,
    ranks=frozenset({2}),
    last_dim_only=True,
    # One program of 4 warps holds the row: past 2^14 elements on CUDA it spills registers, and
    # compiles for 7 s (2^16) to 38 s (2^17) on the H100's host, for the parent and each mutant.
    max_row_length={"cpu": tl.TRITON_MAX_TENSOR_NUMEL, "cuda": 1 << 14, "npu": 1 << 14},
)


def storage_extent(x: torch.Tensor) -> int:
    """Elements from x's data pointer to the end of its storage."""
    return x.untyped_storage().nbytes() // x.element_size() - x.storage_offset()


def launch(x: torch.Tensor, dim: int, mutation: tl.constexpr) -> torch.Tensor:
    LIMITS.check(x, dim)
    require_triton_device(x)
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    y_strides = y.stride()
    if mutation.value == OUTPUT_WITH_INPUT_STRIDE.value:  # write with x's strides into a buffer roomy enough for them
        span = 1 + sum((n - 1) * s for n, s in zip(x.shape, x.stride())) if x.numel() else 0
        y = torch.empty(max(span, y.numel()), dtype=x.dtype, device=x.device).as_strided(
            (n_rows, n_cols), (max(n_cols, 1), 1))
        y_strides = x.stride()
    if x.numel() == 0:
        return y
    programs = min(compute_units(x.device), n_rows)
    rowwise_softmax_kernel[(programs,)](
        y, x, n_rows, n_cols, *x.stride(), *y_strides, storage_extent(x),
        BLOCK=triton.next_power_of_2(n_cols), MUTATION=own(mutation, "forward"),
    )
    return y


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Row-wise softmax of a 2-D tensor of any strides."""
    return launch(x, dim, CORRECT)


def launch_backward(grad: torch.Tensor, y: torch.Tensor, dim: int, mutation: tl.constexpr,
                    log: bool = False) -> torch.Tensor:
    LIMITS.check_backward(grad, y, dim)
    require_triton_device(y)
    n_rows, n_cols = y.shape
    dx = torch.empty((n_rows, n_cols), dtype=y.dtype, device=y.device)
    if y.numel() == 0:
        return dx
    rowwise_softmax_backward_kernel[(min(compute_units(y.device), n_rows),)](
        dx, grad, y, n_rows, n_cols, *grad.stride(), *y.stride(), *dx.stride(),
        BLOCK=triton.next_power_of_2(n_cols), LOG=log, MUTATION=own(mutation, "backward"),
    )
    return dx


def kernel_of(code: int) -> str:
    """Which kernel a mutation code plants its bug in: "forward", "backward" or "scaled"."""
    return "backward" if code in BACKWARD_MUTATIONS else "scaled" if code in SCALED_MUTATIONS else "forward"


def own(mutation: tl.constexpr, kernel: str) -> int:
    """The code ``kernel`` (:func:`kernel_of`) compiles with: ``mutation`` where it is one of that kernel's bugs,
    else CORRECT, so that the mutants of the other kernels share its correct compile (each code is a compile of its
    own per dtype and block: 37 mutants, compiled again on every device run)."""
    return mutation.value if kernel_of(mutation.value) == kernel else CORRECT.value


def softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The logits' gradient from the softmax's output ``y`` and the gradient ``grad`` with respect to it (2-D, any
    strides): y * (grad - sum(grad * y)) per row."""
    return launch_backward(grad, y, dim, CORRECT)


def log_softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The logits' gradient from the log_softmax's output ``y`` and the gradient ``grad`` with respect to it (2-D,
    any strides): grad - exp(y) * sum(grad) per row."""
    return launch_backward(grad, y, dim, CORRECT, log=True)


def launch_scaled(x: torch.Tensor, scale: float, dim: int, mutation: tl.constexpr, bias: torch.Tensor | None = None,
                  causal: bool = False) -> torch.Tensor:
    LIMITS.check_scaled(x, dim, scale, bias)
    require_triton_device(x)
    if bias is not None:
        bias = bias.expand(x.shape)  # a view: stride 0 along the dims it broadcasts over
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return y
    # No fused multiply-add: contracted into the max subtraction, scale * x would go unrounded against its rounded
    # maximum, and the row's largest entry would get the product's rounding error as its gap, |scale * x| 2^-24:
    # past 2^31 that overflows exp, and a row of one logit of 2e37 came out NaN on an H100.
    rowwise_scaled_softmax_kernel[(min(compute_units(x.device), n_rows),)](
        y, x, x if bias is None else bias, scale, n_rows, n_cols, *x.stride(), *(x if bias is None else bias).stride(),
        *y.stride(), BLOCK=triton.next_power_of_2(n_cols), BIASED=bias is not None, CAUSAL=causal,
        MUTATION=own(mutation, "scaled"), enable_fp_fusion=False,
    )
    return y


def scaled_softmax(x: torch.Tensor, scale: float, dim: int = -1) -> torch.Tensor:
    """softmax(scale * x) of a 2-D tensor of any strides, the product in fp32."""
    return launch_scaled(x, scale, dim, CORRECT)


def biased_softmax(x: torch.Tensor, bias: torch.Tensor, scale: float, dim: int = -1) -> torch.Tensor:
    """softmax(scale * x + bias), ``bias`` broadcast to x's shape, the product and the sum in fp32."""
    return launch_scaled(x, scale, dim, CORRECT, bias=bias)


def causal_softmax(x: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(scale * x) over the last dim, column j of row i masked where j > i."""
    return launch_scaled(x, scale, -1, CORRECT, causal=True)
