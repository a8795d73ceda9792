"""The mutation catalog: a correct kernel with one known bug planted at a time.

Each mutant is a parent, ``kernels.rowwise`` (one block per row, and its backward) or
``kernels.online`` (an online two-pass softmax, for the bugs of that
algorithm), compiled with one ``MUTATION`` switch, and declares its parent's
record (capabilities and precision profile: ``specs.rowwise``, ``specs.online``),
so only the bug differs; a mutant of one operation's kernel declares, of that kernel's operations, those
its bug reaches (``reaches``: a log_softmax backward's bug leaves the softmax backward correct, whose tests would
only pass it).  They are not registered: ``--kernel specs.mutants:NAME``
selects one, as a user would select their own kernel.  ``tests/suite/test_mutation.py`` runs
the suite against every one of them and expects each to be caught.
"""

from dataclasses import replace

from kernels import online, rowwise

from . import online as online_record
from . import rowwise as rowwise_record
from .operations import OPERATIONS

BUG_CLASSES = {
    "ignore_column_stride": "column stride ignored",
    "zero_padding": "masked lanes loaded with 0 instead of -inf",
    "no_max_subtraction": "no max subtraction",
    "half_accumulation": "fp16/bf16 accumulation of the sum",
    "low_precision_reciprocal": "a low-precision (bf16) reciprocal",
    "mask_off_by_one": "mask off by one column",
    "offset_wrap": "row offsets wrap (at 2^14 here, standing for 2^31)",
    "nan_dropped_by_max": "NaN dropped before the max",
    "row_count_dependent_sum": "reduction order that depends on the number of rows",
    "last_row_skipped": "last row of the grid-stride loop skipped for some row counts",
    "output_with_input_stride": "output stored with the input's strides",
    "all_neg_inf_uniform": "an all -inf row returns a uniform row",
    "row_left_unwritten": "a row of the output left uninitialised for some shapes",
    "subnormal_flush": "subnormal results flushed where the profile says they are not",
    "half_precision_exp": "exp of a gap rounded to fp16",
    "partial_row_max": "max taken over half of the row",
    "finite_fill": "padding lanes filled with a finite -1e4 instead of -inf",
    "exp2_fma": "exp(x - m) as 2^(x log2e - m log2e) with m log2e in an FMA: x log2e rounded, |x| u error",
    "bf16_sum": "the sum accumulated in bf16 whatever the input dtype",
    "skip_last_of_long_rows": "the sum skips the last element of rows longer than 1024",
    "bf16_truncation": "bf16 outputs truncated instead of rounded to nearest",
    "fp16_reciprocal": "the reciprocal of the sum rounded to fp16",
    "row_index_wrap": "the row index wraps (at 2^8 here, standing for a 16-bit index)",
    "rows_past_512_forgotten": "rows past the 512th never computed (a persistent grid sized for 512 rows)",
    "online_neg_inf_head": "online softmax: a leading tile of -inf makes the rescale exp(-inf + inf) = NaN",
    "backward_bf16_dot": "softmax backward: the dot product sum(grad * y) accumulated in bf16",
    "backward_sum_of_grad": "softmax backward: sum(grad) for sum(grad * y), log_softmax's backward formula",
    "backward_dot_misses_last": "softmax backward: the dot product drops the row's last column (mask off by one)",
    "backward_half_difference": "softmax backward: grad - sum(grad * y) rounded to the input dtype before "
                                "the product with y",
    "log_backward_softmax_dot": "log_softmax backward: sum(grad * exp(y)) for sum(grad), the softmax's formula",
    "log_backward_y_for_exp": "log_softmax backward: y for exp(y), the exp forgotten",
    "log_backward_half_exp": "log_softmax backward: exp(y) rounded to the input dtype before the product",
    "backward_grad_with_y_strides": "softmax backward: grad read with y's strides",
    "scale_after_max_in_input_dtype": "scaled softmax: x - max rounded to the input dtype, then scaled",
    "scale_in_input_dtype": "scaled softmax: scale * x rounded to the input dtype (declared: formed in fp32)",
    "causal_diagonal_off_by_one": "causal softmax: the mask keeps one entry past the diagonal",
    "bias_of_first_row": "biased softmax: every row takes the first row's bias (a broadcast assumed)",
    "bias_neg_inf_as_finite": "biased softmax: a -inf bias clamped to -10000, so a row padded whole is uniform",
    "bias_unit_column_stride": "biased softmax: the bias's column stride taken as 1 (a bias laid out column-major "
                               "read as dense)",
}

# The test each mutant is caught by first, its kernel left out of its id, as measured on the CPU (2026-12-07):
# tests/suite/test_mutation.py runs it alone first, and the other catching tests only for a mutant it did not catch,
# so that catching a mutant costs one test (row_count_dependent_sum ran every accuracy test, each compiling its
# shapes on a card, before the batch invariance test caught it).
ACCURACY = "tests/kernel/test_accuracy.py::test_output_within_derived_bound"
CAUGHT_FIRST_BY = {
    **{name: f"{ACCURACY}[softmax-float32]" for name in (
        "ignore_column_stride", "zero_padding", "no_max_subtraction", "low_precision_reciprocal", "mask_off_by_one",
        "offset_wrap", "nan_dropped_by_max", "last_row_skipped", "output_with_input_stride", "all_neg_inf_uniform",
        "row_left_unwritten", "subnormal_flush", "half_precision_exp", "partial_row_max", "finite_fill", "exp2_fma",
        "bf16_sum", "skip_last_of_long_rows", "fp16_reciprocal", "row_index_wrap", "online_neg_inf_head",
        "rows_past_512_forgotten")},
    "half_accumulation": f"{ACCURACY}[softmax-float16]",
    "bf16_truncation": f"{ACCURACY}[softmax-bfloat16]",
    "row_count_dependent_sum": "tests/kernel/test_metamorphic.py::test_batch_invariance_is_bitwise[2]",
    **{name: f"{ACCURACY}[softmax_backward-float32]" for name in (
        "backward_bf16_dot", "backward_dot_misses_last", "backward_grad_with_y_strides", "backward_sum_of_grad")},
    "backward_half_difference": f"{ACCURACY}[softmax_backward-float16]",
    "log_backward_half_exp": f"{ACCURACY}[log_softmax_backward-float16]",
    "log_backward_softmax_dot": f"{ACCURACY}[log_softmax_backward-float32]",
    "log_backward_y_for_exp": f"{ACCURACY}[log_softmax_backward-float32]",
    "bias_neg_inf_as_finite": f"{ACCURACY}[biased_softmax-float32]",
    "bias_of_first_row": f"{ACCURACY}[biased_softmax-float32]",
    "bias_unit_column_stride": f"{ACCURACY}[biased_softmax-float32]",
    "causal_diagonal_off_by_one": f"{ACCURACY}[causal_softmax-float32]",
    "scale_after_max_in_input_dtype": f"{ACCURACY}[scaled_softmax-float32]",
    "scale_in_input_dtype": f"{ACCURACY}[scaled_softmax-float16]",
}


def first_catch(name: str) -> str:
    """The node id of the test that catches mutant ``name`` first, for ``--kernel specs.mutants:name``."""
    test, _, parameters = CAUGHT_FIRST_BY[name].partition("[")
    return f"{test}[specs.mutants:{name}-{parameters}"


# How ``--kernel`` selects each parent itself, correct: the control its mutants' catches are checked against.
PARENTS = {rowwise: "rowwise", online: "specs.online:softmax"}


def mutant(code, parent=rowwise, record=rowwise_record, reaches: tuple[str, ...] = ()):
    """A kernel callable: ``parent`` with bug ``code`` planted, declaring the parent's ``record``, less the operations
    of its bug's kernel that it does not reach where ``reaches`` names those it does."""

    def softmax(x, dim=-1):
        return parent.launch(x, dim, code)

    def softmax_backward(grad, y, dim=-1):
        return parent.launch_backward(grad, y, dim, code)

    def log_softmax_backward(grad, y, dim=-1):
        return parent.launch_backward(grad, y, dim, code, log=True)

    def scaled_softmax(x, scale, dim=-1):
        return parent.launch_scaled(x, scale, dim, code)

    def biased_softmax(x, bias, scale, dim=-1):
        return parent.launch_scaled(x, scale, dim, code, bias=bias)

    def causal_softmax(x, scale):
        return parent.launch_scaled(x, scale, -1, code, causal=True)

    if record.CAPABILITIES.backward:  # a code of the forward leaves the backward correct, and the reverse
        softmax.softmax_backward = softmax_backward
    if record.CAPABILITIES.log_softmax_backward:
        softmax.log_softmax_backward = log_softmax_backward
    for flag, function in (("scaled", scaled_softmax), ("biased", biased_softmax), ("causal", causal_softmax)):
        if getattr(record.CAPABILITIES, flag):
            setattr(softmax, function.__name__, function)
    # The kernel its bug lives in: "forward", or rowwise's "backward" or "scaled", whose operations' tests alone can
    # catch it (tests/suite/test_mutation.py runs only those).
    softmax.kernel = getattr(parent, "kernel_of", lambda code: "forward")(code.value)
    unreached = [op for op in OPERATIONS.values()
                 if reaches and getattr(op, softmax.kernel, False) and op.name not in reaches]
    softmax.capabilities = replace(record.CAPABILITIES, **{flag: False for op in unreached for flag in op.flags})
    softmax.precision = record.precision
    softmax.parent = PARENTS[parent]
    return softmax


# The operations a bug of one of them reaches (the others' tests skip its mutant).
SOFTMAX_BACKWARD = ("softmax_backward",)
LOG_BACKWARD = ("log_softmax_backward",)
BIASED = ("biased_softmax",)
CAUSAL = ("causal_softmax",)

ignore_column_stride = mutant(rowwise.IGNORE_COLUMN_STRIDE)
zero_padding = mutant(rowwise.ZERO_PADDING)
no_max_subtraction = mutant(rowwise.NO_MAX_SUBTRACTION)
half_accumulation = mutant(rowwise.HALF_ACCUMULATION)
low_precision_reciprocal = mutant(rowwise.LOW_PRECISION_RECIPROCAL)
mask_off_by_one = mutant(rowwise.MASK_OFF_BY_ONE)
offset_wrap = mutant(rowwise.OFFSET_WRAP)
nan_dropped_by_max = mutant(rowwise.NAN_DROPPED_BY_MAX)
row_count_dependent_sum = mutant(rowwise.ROW_COUNT_DEPENDENT_SUM)
last_row_skipped = mutant(rowwise.LAST_ROW_SKIPPED)
output_with_input_stride = mutant(rowwise.OUTPUT_WITH_INPUT_STRIDE)
all_neg_inf_uniform = mutant(rowwise.ALL_NEG_INF_UNIFORM)
row_left_unwritten = mutant(rowwise.ROW_LEFT_UNWRITTEN)
subnormal_flush = mutant(rowwise.SUBNORMAL_FLUSH)
half_precision_exp = mutant(rowwise.HALF_PRECISION_EXP)
partial_row_max = mutant(rowwise.PARTIAL_ROW_MAX)
finite_fill = mutant(rowwise.FINITE_FILL)
exp2_fma = mutant(rowwise.EXP2_FMA)
bf16_sum = mutant(rowwise.BF16_SUM)
skip_last_of_long_rows = mutant(rowwise.SKIP_LAST_OF_LONG_ROWS)
bf16_truncation = mutant(rowwise.BF16_TRUNCATION)
fp16_reciprocal = mutant(rowwise.FP16_RECIPROCAL)
row_index_wrap = mutant(rowwise.ROW_INDEX_WRAP)
rows_past_512_forgotten = mutant(rowwise.ROWS_PAST_512_FORGOTTEN)
online_neg_inf_head = mutant(online.NEG_INF_HEAD_NAN, online, online_record)
backward_bf16_dot = mutant(rowwise.BACKWARD_BF16_DOT, reaches=SOFTMAX_BACKWARD)
backward_sum_of_grad = mutant(rowwise.BACKWARD_SUM_OF_GRAD, reaches=SOFTMAX_BACKWARD)
backward_dot_misses_last = mutant(rowwise.BACKWARD_DOT_MISSES_LAST, reaches=SOFTMAX_BACKWARD)
backward_half_difference = mutant(rowwise.BACKWARD_DIFFERENCE_IN_INPUT_DTYPE, reaches=SOFTMAX_BACKWARD)
log_backward_softmax_dot = mutant(rowwise.LOG_BACKWARD_SOFTMAX_DOT, reaches=LOG_BACKWARD)
log_backward_y_for_exp = mutant(rowwise.LOG_BACKWARD_Y_FOR_EXP, reaches=LOG_BACKWARD)
log_backward_half_exp = mutant(rowwise.LOG_BACKWARD_EXP_IN_INPUT_DTYPE, reaches=LOG_BACKWARD)
backward_grad_with_y_strides = mutant(rowwise.BACKWARD_GRAD_WITH_Y_STRIDES)
scale_after_max_in_input_dtype = mutant(rowwise.SCALE_AFTER_MAX_IN_INPUT_DTYPE)
scale_in_input_dtype = mutant(rowwise.SCALE_IN_INPUT_DTYPE)
causal_diagonal_off_by_one = mutant(rowwise.CAUSAL_DIAGONAL_OFF_BY_ONE, reaches=CAUSAL)
bias_of_first_row = mutant(rowwise.BIAS_OF_FIRST_ROW, reaches=BIASED)
bias_neg_inf_as_finite = mutant(rowwise.BIAS_NEG_INF_AS_FINITE, reaches=BIASED)
bias_unit_column_stride = mutant(rowwise.BIAS_UNIT_COLUMN_STRIDE, reaches=BIASED)
