"""No systematic error: the mean signed error of many outputs lies within the statistical bound of oracles.bias.

Every element within its bound is not enough: a kernel that truncates bf16
outputs, or rounds fp32 outputs toward +inf, stays within one ulp of each, yet
errs one way on nearly all of them.  The inputs are rows of ordinary logits:
thousands of distinct outputs each, and for fp32 at least
:data:`oracles.bias.MIN_ROWS` rows (fp32 outputs computed in fp32 are judged
by their rows' means, each row's sum erring on its own).  For fp32 also rows
of k tied maxima (:data:`TIED`), whose only error is the quotient 1/k: no exp
bias hides a directed rounding there, where Triton's biased exp on NVIDIA
lets a kernel of unknown construction err by more than half an ulp on
ordinary rows.  The attention softmaxes (scaled, biased, causal) are judged on
the same rows, their logits made exact in every construction (a power-of-two
scale, a bias of 0 and -inf), so that their outputs' rounding alone is judged
as the plain softmax's.  The bound comes from :mod:`oracles.bias`.  One fp32 example
holds 32 to 42 rows of 97 to 1000 ordinary logits (4k to 32k elements), or
128 tied rows of 256 to 1000: under the interpreter a one-program-per-row
kernel takes ~0.01 s a row, so ~0.3 to 1.3 s, and the oracle 0.01 to 0.1 s.
"""

import math

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from harness.inputs.fixed_inputs import longest_fixed_row, rows_rank
from harness.inputs.strategies import (ATTENTION_SCALES, BIAS_LAYOUTS, BIAS_SPANS, SIZE_CAPS, Bias, Case, Values,
                                      for_operation, longest_row)
from harness.judging.judge import as_rows, describe_input
from harness.plugins import timebox
from oracles import correctly_rounded
from oracles.bias import MIN_ROWS, measure_bias
from oracles.call import Operation
from oracles.formats import format_of
from specs.operations import BIASED_SOFTMAX, CAUSAL_SOFTMAX, SCALED_SOFTMAX, SOFTMAX
from specs.registry import known_arithmetics

BIAS_ELEMENTS = 4096  # per example: enough outputs for a statistical bound of a few hundredths of an ulp
LENGTHS = (97, 256, 781, 1000)
ORDINARY = (Values("normal", 1.0), Values("normal", 4.0))
# fp32 rows of k tied maxima, the rest 1e4 below (exp underflows in every dtype), k in [n/2, n] distinct per row:
# TIED_ROWS quotients 1/k, t s / sqrt(R) ~ 6.9 x 0.29 / 11.3 = 0.18 ulp, below the half ulp a directed rounding adds.
TIED = Values("tied-max", 1e4)
TIED_ROWS = 128
ATTENTION = (SCALED_SOFTMAX, BIASED_SOFTMAX, CAUSAL_SOFTMAX)
# Attention's scales 1/sqrt(d) that are powers of two: scale * x is exact in every dtype (but where it falls to a
# subnormal, far below what moves an output), so no construction of the logits adds an error of its own.
EXACT_SCALES = tuple(scale for scale in ATTENTION_SCALES if math.frexp(scale)[0] == 0.5)
EXACT_BIAS = "neg_inf_padding"  # 0 and -inf (a key-padding mask): scale * x + bias exact


def bias_rows(dtype: torch.dtype, n: int, values: Values, op: Operation = SOFTMAX) -> int:
    """Rows of n drawn: ~BIAS_ELEMENTS elements, and for fp32 (judged by row means) at least MIN_ROWS rows;
    TIED_ROWS of tied rows; a causal softmax's at least n, so that its rows (row i keeps i + 1 entries) reach n."""
    if values == TIED:
        return TIED_ROWS
    return max(BIAS_ELEMENTS // n, MIN_ROWS if dtype == torch.float32 else 1, n if op.causal else 1)


def bias_rank(capabilities) -> int:
    """The rank drawn: one that holds rows (:func:`harness.inputs.fixed_inputs.rows_rank`), else single rows (rank 1)."""
    return rows_rank(capabilities, 2) or 1


def bias_dtypes(capabilities, values: Values) -> list[torch.dtype]:
    """The kernel's half and single dtypes; fp32 only with rows to average (inputs of rank 2 or more); tied rows
    in fp32 only (half outputs are judged one by one, and a tied row has one)."""
    rows = {torch.float32} if bias_rank(capabilities) > 1 else set()
    judged = rows if values == TIED else {torch.float16, torch.bfloat16} | rows
    return sorted(judged & set(capabilities.dtypes), key=str)


def bias_lengths(capabilities, backend: str, dtype: torch.dtype, values: Values, op: Operation = SOFTMAX) -> list[int]:
    """The row lengths drawn: those of :data:`LENGTHS` whose :func:`bias_rows` rows fit the size caps and the kernel's
    limits, else for ordinary logits the longest row below them that fits (a kernel of short rows is judged on more
    of them); tied rows only where their k can differ from row to row (n >= 2 TIED_ROWS - 1)."""
    caps = SIZE_CAPS[backend]

    def fits(n: int) -> bool:
        rows = bias_rows(dtype, n, values, op) if bias_rank(capabilities) > 1 else 1
        return (n <= longest_row(capabilities, backend, dtype, caps) and rows * n <= caps.elements(dtype)
                and n <= (longest_fixed_row(capabilities, backend, rows) or n))

    if values == TIED:
        return [n for n in LENGTHS if n >= 2 * TIED_ROWS - 1 and fits(n)]
    return [n for n in LENGTHS if fits(n)] or [n for n in range(min(LENGTHS) - 1, 0, -1) if fits(n)][:1]


def drawable(capabilities, backend: str, choices: tuple[Values, ...],
             op: Operation = SOFTMAX) -> list[tuple[torch.dtype, Values]]:
    """The (dtype, values) pairs of ``choices`` the kernel can be judged on: some length of rows fits."""
    return [(dtype, values) for values in choices for dtype in bias_dtypes(capabilities, values)
            if bias_lengths(capabilities, backend, dtype, values, op)]


@st.composite
def bias_cases(draw, capabilities, backend: str, choices: tuple[Values, ...], op: Operation = SOFTMAX) -> Case:
    """Rows of one of the :func:`drawable` pairs, :func:`bias_rows` of them, of one of :func:`bias_lengths`; for an
    attention softmax, with one of :data:`EXACT_SCALES` and a bias of :data:`EXACT_BIAS` in any span and layout."""
    rank = bias_rank(capabilities)
    dtype, values = draw(st.sampled_from(drawable(capabilities, backend, choices, op)))
    n = draw(st.sampled_from(bias_lengths(capabilities, backend, dtype, values, op)))
    shape = ((1,) * (rank - 2) + (bias_rows(dtype, n, values, op),) if rank > 1 else ()) + (n,)
    scale = draw(st.sampled_from(EXACT_SCALES)) if op.scaled else None
    bias = (Bias(EXACT_BIAS, draw(st.sampled_from(BIAS_SPANS)), draw(st.sampled_from(BIAS_LAYOUTS))) if op.biased
            else None)
    return Case(shape, rank - 1, dtype, values, seed=draw(st.integers(0, 2**32 - 1)), scale=scale, bias=bias)


def judge_bias(kernel, backend, note, choices: tuple[Values, ...], op: Operation = SOFTMAX) -> None:
    """Every drawn example's mean signed error within its allowance; notes the worst ratio per dtype and values."""
    worst = {}  # (dtype, values) -> the largest |mean| / allowance seen, and its example's figures

    @given(case=bias_cases(for_operation(kernel.capabilities, op), backend.name, choices, op))
    @timebox.timeboxed
    def one_case(case):
        call = case.call(op, backend.name, backend.device)
        assume(kernel.capabilities.call_refusal(call) is None)
        x = call.x
        y = kernel.run(call)
        oracle = correctly_rounded.softmax(call)
        logits = call.logits if op.scaled else x
        bias = measure_bias(as_rows(logits, case.dim).double().numpy(), as_rows(y, case.dim).double().numpy(),
                            oracle.exact, format_of(x.dtype), kernel.precision(call),
                            known_arithmetics(backend.name))
        assert bias.ok, (f"{kernel.name} {op.name}: mean signed error {bias.mean:+.4g} ulp of {x.dtype}, beyond the "
                         f"allowance of {bias.allowance}: its outputs are biased "
                         f"{'low' if bias.mean < 0 else 'high'}\ninput: {case!r}.call({op.name}, "
                         f"{backend.name!r}, {str(backend.device)!r}) -> {describe_input(x, case.dim)}")
        ratio = abs(bias.mean) / bias.allowance.total
        kind = f"{x.dtype}, {case.values.kind}"
        if ratio >= worst.get(kind, (-1.0,))[0]:
            worst[kind] = (ratio, f"{bias.mean:+.3g} ulp of {bias.allowance.total:.3g}, shape {tuple(x.shape)}, "
                                  f"scale {case.values.scale:g}")

    one_case()
    for kind, (ratio, figures) in sorted(worst.items()):
        note(f"{kind}: worst |mean signed error| / allowance {ratio:.3f} ({figures})")


@pytest.mark.first
def test_mean_signed_error_is_within_the_statistical_bound(kernel, backend, note):
    if not drawable(kernel.capabilities, backend.name, ORDINARY):
        pytest.skip(f"{kernel.name} takes no fp16 or bf16 inputs, nor fp32 ones of rank 2 or more: no bias to judge")
    judge_bias(kernel, backend, note, ORDINARY)


@pytest.mark.first
def test_mean_signed_error_of_rows_tied_at_their_max_is_within_the_statistical_bound(kernel, backend, note):
    """Rows whose only error is the quotient 1/k: a directed rounding of fp32 outputs shows there on every backend."""
    if torch.float32 not in kernel.capabilities.dtypes:
        pytest.skip(f"{kernel.name} declares no float32: tied rows are judged in fp32 (half outputs one by one)")
    if not drawable(kernel.capabilities, backend.name, (TIED,)):
        pytest.skip(f"{kernel.name} takes no fp32 inputs of {TIED_ROWS} rows of {2 * TIED_ROWS - 1} or more "
                    f"within the size caps: no tied rows to judge")
    judge_bias(kernel, backend, note, (TIED,))


@pytest.mark.parametrize("op", ATTENTION, ids=lambda op: op.name)
def test_mean_signed_error_of_an_attention_softmax_is_within_the_statistical_bound(kernel, backend, op, note):
    """fp32 outputs of a scaled, biased or causal softmax rounded upward stay within their bounds: caught here."""
    if not kernel.declares(op):
        pytest.skip(f"{kernel.name} declares no {op.what}")
    if not drawable(for_operation(kernel.capabilities, op), backend.name, ORDINARY, op):
        pytest.skip(f"{kernel.name} takes no fp16 or bf16 inputs, nor fp32 ones of rank 2 or more, for its {op.what}: "
                    f"no bias to judge")
    judge_bias(kernel, backend, note, ORDINARY, op)
