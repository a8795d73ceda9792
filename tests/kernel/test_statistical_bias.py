"""No systematic error: the mean signed error of many outputs lies within the statistical bound of oracles.bias.

Every element within its bound is not enough: a kernel that truncates bf16
outputs, or rounds fp32 outputs toward +inf, stays within one ulp of each, yet
errs one way on nearly all of them.  The inputs are rows of ordinary logits:
thousands of distinct outputs each, and for fp32 at least
:data:`oracles.bias.MIN_ROWS` rows (fp32 outputs computed in fp32 are judged
by their rows' means, each row's sum erring on its own).  The bound comes from
:mod:`oracles.bias`.  One fp32 example holds 32 to 42 rows of 97 to 1000
logits (4k to 32k elements): under the interpreter a one-program-per-row
kernel takes ~0.01 s a row, so ~0.3 to 0.6 s, and the oracle 0.01 to 0.03 s.
"""

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from harness import timebox
from harness.fixed_inputs import longest_fixed_row, rows_rank
from harness.judge import as_rows, describe_input
from harness.strategies import SIZE_CAPS, Case, Values, longest_row
from oracles import correctly_rounded
from oracles.bias import MIN_ROWS, measure_bias
from oracles.call import Call
from oracles.formats import format_of
from specs.operations import SOFTMAX
from specs.registry import known_arithmetics

BIAS_ELEMENTS = 4096  # per example: enough outputs for a statistical bound of a few hundredths of an ulp
LENGTHS = (97, 256, 781, 1000)



def bias_rows(dtype: torch.dtype, n: int) -> int:
    """Rows of n drawn: ~BIAS_ELEMENTS elements, and for fp32 (judged by row means) at least MIN_ROWS rows."""
    return max(BIAS_ELEMENTS // n, MIN_ROWS if dtype == torch.float32 else 1)


def bias_rank(capabilities) -> int:
    """The rank drawn: one that holds rows (:func:`harness.fixed_inputs.rows_rank`), else single rows (rank 1)."""
    return rows_rank(capabilities, 2) or 1


def bias_dtypes(capabilities) -> list[torch.dtype]:
    """The kernel's half and single dtypes; fp32 only with rows to average (inputs of rank 2 or more)."""
    judged = {torch.float16, torch.bfloat16} | ({torch.float32} if bias_rank(capabilities) > 1 else set())
    return sorted(judged & set(capabilities.dtypes), key=str)


def bias_lengths(capabilities, backend: str, dtype: torch.dtype) -> list[int]:
    """The row lengths drawn: those of :data:`LENGTHS` whose :func:`bias_rows` rows fit the size caps and the kernel's
    limits, else the longest row below them that fits (a kernel of short rows is judged on more of them)."""
    caps = SIZE_CAPS[backend]

    def fits(n: int) -> bool:
        rows = bias_rows(dtype, n) if bias_rank(capabilities) > 1 else 1
        return (n <= longest_row(capabilities, backend, dtype, caps) and rows * n <= caps.elements(dtype)
                and n <= (longest_fixed_row(capabilities, backend, rows) or n))

    return [n for n in LENGTHS if fits(n)] or [n for n in range(min(LENGTHS) - 1, 0, -1) if fits(n)][:1]


@st.composite
def ordinary_rows(draw, capabilities, backend: str) -> Case:
    """Rows of normal logits (scale 1 or 4) in one of :func:`bias_dtypes`, :func:`bias_rows` of them."""
    rank = bias_rank(capabilities)
    dtype = draw(st.sampled_from(bias_dtypes(capabilities)))
    lengths = bias_lengths(capabilities, backend, dtype)
    assume(lengths)
    n = draw(st.sampled_from(lengths))
    shape = ((1,) * (rank - 2) + (bias_rows(dtype, n),) if rank > 1 else ()) + (n,)
    return Case(shape, rank - 1, dtype, Values("normal", draw(st.sampled_from([1.0, 4.0]))),
                seed=draw(st.integers(0, 2**32 - 1)))


@pytest.mark.first
def test_mean_signed_error_is_within_the_statistical_bound(kernel, backend, note):
    if not bias_dtypes(kernel.capabilities):
        pytest.skip(f"{kernel.name} takes no fp16 or bf16 inputs, nor fp32 ones of rank 2 or more: no bias to judge")
    worst = {}  # dtype -> the largest |mean| / allowance seen, and its example's figures

    @given(case=ordinary_rows(kernel.capabilities, backend.name))
    @timebox.timeboxed
    def one_case(case):
        x, _ = case.make(backend.device)
        assume(kernel.capabilities.refusal(x, case.dim) is None)
        y = kernel.softmax(x, case.dim)
        call = Call(x, case.dim, SOFTMAX, backend.name)
        oracle = correctly_rounded.softmax(call)
        bias = measure_bias(as_rows(x, case.dim).double().numpy(), as_rows(y, case.dim).double().numpy(),
                            oracle.exact, format_of(x.dtype), kernel.precision(call),
                            known_arithmetics(backend.name))
        assert bias.ok, (f"{kernel.name}: mean signed error {bias.mean:+.4g} ulp of {x.dtype}, beyond the "
                         f"allowance of {bias.allowance}: its outputs are biased "
                         f"{'low' if bias.mean < 0 else 'high'}\ninput: {case!r}.make({str(backend.device)!r}) "
                         f"-> {describe_input(x, case.dim)}")
        ratio = abs(bias.mean) / bias.allowance.total
        if ratio >= worst.get(x.dtype, (-1.0,))[0]:
            worst[x.dtype] = (ratio, f"{bias.mean:+.3g} ulp of {bias.allowance.total:.3g}, shape {tuple(x.shape)}, "
                                     f"scale {case.values.scale:g}")

    one_case()
    for dtype, (ratio, figures) in sorted(worst.items(), key=str):
        note(f"{dtype}: worst |mean signed error| / allowance {ratio:.3f} ({figures})")
