"""No systematic error: the mean signed error of many outputs lies within the statistical bound of oracles.bias.

Every element within its bound is not enough: a kernel that truncates bf16
outputs stays within one ulp of each, yet errs low on nearly all of them.  The
inputs are rows of ordinary logits, thousands of distinct outputs each; the
bound comes from :mod:`oracles.bias`.
"""

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from harness import soak
from harness.judge import as_rows, describe_input
from harness.strategies import SIZE_CAPS, Case, Values, longest_row
from oracles import correctly_rounded
from oracles.bias import measure_bias
from oracles.bounds import PrecisionProfile, Reduction
from oracles.formats import format_of
from oracles.profiles import TORCH_CUDA, UNKNOWN

BIAS_ELEMENTS = 4096  # per example: enough outputs for a statistical bound of a few hundredths of an ulp
LENGTHS = (97, 256, 781, 1000)


@st.composite
def ordinary_rows(draw, capabilities, backend: str) -> Case:
    """Rows of normal logits (scale 1 or 4) in one of the kernel's half or single dtypes, ~4096 elements."""
    dtypes = sorted({torch.float32, torch.float16, torch.bfloat16} & set(capabilities.dtypes), key=str)
    assume(dtypes)
    dtype = draw(st.sampled_from(dtypes))
    lengths = [n for n in LENGTHS if n <= longest_row(capabilities, backend, dtype, SIZE_CAPS[backend])]
    assume(lengths)
    n = draw(st.sampled_from(lengths))
    rank = 2 if capabilities.ranks is None or 2 in capabilities.ranks else min(capabilities.ranks)
    shape = ((1,) * (rank - 2) + (max(BIAS_ELEMENTS // n, 1),) if rank > 1 else ()) + (n,)
    return Case(shape, rank - 1, dtype, Values("normal", draw(st.sampled_from([1.0, 4.0]))),
                seed=draw(st.integers(0, 2**32 - 1)))


def test_mean_signed_error_is_within_the_statistical_bound(kernel, backend):
    @given(case=ordinary_rows(kernel.capabilities, backend.name))
    @soak.timeboxed
    def one_case(case):
        x, _ = case.make(backend.device)
        assume(kernel.capabilities.refusal(x, case.dim) is None)
        y = kernel.softmax(x, case.dim)
        oracle = correctly_rounded.softmax(x, case.dim)
        bias = measure_bias(as_rows(x, case.dim).double().numpy(), as_rows(y, case.dim).double().numpy(),
                            oracle.exact, format_of(x.dtype), kernel.precision(backend.name, x, case.dim),
                            backend.name)
        assert bias.ok, (f"{kernel.name}: mean signed error {bias.mean:+.4g} ulp of {x.dtype}, beyond the "
                         f"allowance of {bias.allowance}: its outputs are biased "
                         f"{'low' if bias.mean < 0 else 'high'}\nreplay: {case!r}.make({str(backend.device)!r}) "
                         f"-> {describe_input(x, case.dim)}")

    one_case()


# ---------------------------------------------------------------------------- the bound itself


def synthetic(dtype, truncate: bool):
    """Softmax rows of normal logits, their exact values, and outputs rounded to nearest or truncated."""
    x = torch.randn(8, 512, generator=torch.Generator().manual_seed(7), dtype=torch.float64) * 2
    exact = torch.softmax(x, 1)
    y = exact.to(dtype)
    if truncate:  # the largest value of the format not above the exact (positive) one
        y = torch.where(y.double() > exact, (y.view(torch.int16) - 1).view(dtype), y)
    return x.numpy(), y.double().numpy(), exact.numpy(), format_of(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_truncated_outputs_fail_and_rounded_ones_pass_where_every_arithmetic_rounds_to_nearest(dtype):
    profile = PrecisionProfile(TORCH_CUDA, Reduction("sequential"))
    for known in (profile, PrecisionProfile(UNKNOWN, Reduction("sequential"))):
        x, nearest, exact, fmt = synthetic(dtype, truncate=False)
        assert measure_bias(x, nearest, exact, fmt, known, "cuda").ok
        x, truncated, exact, fmt = synthetic(dtype, truncate=True)
        bias = measure_bias(x, truncated, exact, fmt, known, "cuda")
        assert not bias.ok and bias.mean < -0.3, bias


def test_truncation_to_bf16_passes_for_unknown_kernels_where_the_interpreter_truncates():
    """The interpreter's own fp32 -> bf16 conversion truncates: an unknown kernel may too, on the CPU."""
    x, truncated, exact, fmt = synthetic(torch.bfloat16, truncate=True)
    assert measure_bias(x, truncated, exact, fmt, PrecisionProfile(UNKNOWN, Reduction("sequential")), "cpu").ok
    x, truncated, exact, fmt = synthetic(torch.float16, truncate=True)
    assert not measure_bias(x, truncated, exact, fmt, PrecisionProfile(UNKNOWN, Reduction("sequential")), "cpu").ok
