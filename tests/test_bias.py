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

from harness import soak
from harness.judge import as_rows, describe_input
from harness.strategies import SIZE_CAPS, Case, Values, longest_row
from oracles import correctly_rounded
from oracles.bias import MIN_ROWS, measure_bias, t_quantile
from oracles.bounds import PrecisionProfile, Reduction
from oracles.formats import format_of
from oracles.profiles import TORCH_CPU, TORCH_CUDA
from specs.registry import known_arithmetics, unknown_arithmetic

BIAS_ELEMENTS = 4096  # per example: enough outputs for a statistical bound of a few hundredths of an ulp
LENGTHS = (97, 256, 781, 1000)
DIRECTED_ROUNDING = "tests.hostile.directed_rounding"


def bias_rows(dtype: torch.dtype, n: int) -> int:
    """Rows of n drawn: ~BIAS_ELEMENTS elements, and for fp32 (judged by row means) at least MIN_ROWS rows."""
    return max(BIAS_ELEMENTS // n, MIN_ROWS if dtype == torch.float32 else 1)


def bias_rank(capabilities) -> int:
    """The rank drawn: 2 (rows), or the kernel's smallest where it takes no 2-D inputs."""
    return 2 if capabilities.ranks is None or 2 in capabilities.ranks else min(capabilities.ranks)


def bias_dtypes(capabilities) -> list[torch.dtype]:
    """The kernel's half and single dtypes; fp32 only with rows to average (inputs of rank 2 or more)."""
    judged = {torch.float16, torch.bfloat16} | ({torch.float32} if bias_rank(capabilities) > 1 else set())
    return sorted(judged & set(capabilities.dtypes), key=str)


@st.composite
def ordinary_rows(draw, capabilities, backend: str) -> Case:
    """Rows of normal logits (scale 1 or 4) in one of :func:`bias_dtypes`, :func:`bias_rows` of them."""
    rank = bias_rank(capabilities)
    dtype = draw(st.sampled_from(bias_dtypes(capabilities)))
    caps = SIZE_CAPS[backend]
    lengths = [n for n in LENGTHS if n <= longest_row(capabilities, backend, dtype, caps)
               and (rank == 1 or bias_rows(dtype, n) * n <= caps.elements(dtype))]
    assume(lengths)
    n = draw(st.sampled_from(lengths))
    shape = ((1,) * (rank - 2) + (bias_rows(dtype, n),) if rank > 1 else ()) + (n,)
    return Case(shape, rank - 1, dtype, Values("normal", draw(st.sampled_from([1.0, 4.0]))),
                seed=draw(st.integers(0, 2**32 - 1)))


def test_mean_signed_error_is_within_the_statistical_bound(kernel, backend, note):
    if not bias_dtypes(kernel.capabilities):
        pytest.skip(f"{kernel.name} takes no fp16 or bf16 inputs, nor fp32 ones of rank 2 or more: no bias to judge")
    worst = {}  # dtype -> the largest |mean| / allowance seen, and its example's figures

    @given(case=ordinary_rows(kernel.capabilities, backend.name))
    @soak.timeboxed
    def one_case(case):
        x, _ = case.make(backend.device)
        assume(kernel.capabilities.refusal(x, case.dim) is None)
        y = kernel.softmax(x, case.dim)
        oracle = correctly_rounded.softmax(x, case.dim)
        bias = measure_bias(as_rows(x, case.dim).double().numpy(), as_rows(y, case.dim).double().numpy(),
                            oracle.exact, format_of(x.dtype), kernel.precision(backend.name, x, case.dim),
                            known_arithmetics(backend.name))
        assert bias.ok, (f"{kernel.name}: mean signed error {bias.mean:+.4g} ulp of {x.dtype}, beyond the "
                         f"allowance of {bias.allowance}: its outputs are biased "
                         f"{'low' if bias.mean < 0 else 'high'}\nreplay: {case!r}.make({str(backend.device)!r}) "
                         f"-> {describe_input(x, case.dim)}")
        ratio = abs(bias.mean) / bias.allowance.total
        if ratio >= worst.get(x.dtype, (-1.0,))[0]:
            worst[x.dtype] = (ratio, f"{bias.mean:+.3g} ulp of {bias.allowance.total:.3g}, shape {tuple(x.shape)}, "
                                     f"scale {case.values.scale:g}")

    one_case()
    for dtype, (ratio, figures) in sorted(worst.items(), key=str):
        note(f"{dtype}: worst |mean signed error| / allowance {ratio:.3f} ({figures})")


def test_outputs_rounded_upward_fail_as_biased_high_and_outputs_rounded_to_nearest_pass(run_pytest):
    """fp32 softmax computed in float64 and rounded toward +inf, each output within one ulp: caught as a kernel
    of unknown construction; the same rounded to nearest passes."""
    result = run_pytest("tests/test_bias.py", "-k", "test_mean_signed_error", "--kernel", f"{DIRECTED_ROUNDING}:softmax",
                        "--kernel", f"{DIRECTED_ROUNDING}:softmax_to_nearest", "--hypothesis-profile", "ci",
                        "--device", "cpu", "-q")
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and f"[{DIRECTED_ROUNDING}:softmax]" in failed[0], result.stdout[-3000:]
    assert "its outputs are biased high" in result.stdout and "1 passed" in result.stdout, result.stdout[-3000:]


# ---------------------------------------------------------------------------- the bound itself

INTEGER_VIEW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def synthetic(dtype, rounding: str = "nearest", rows: int = 8, relative_error=None):
    """Softmax rows of normal logits, their exact values, and outputs rounded to nearest, toward zero ("truncate")
    or upward; ``relative_error`` (one per row) multiplies each row's exact values before the rounding."""
    x = torch.randn(rows, 512, generator=torch.Generator().manual_seed(7), dtype=torch.float64) * 2
    exact = torch.softmax(x, 1)
    value = exact if relative_error is None else exact * (1 + relative_error[:, None])
    y = value.to(dtype)
    bits = y.view(INTEGER_VIEW[dtype])
    if rounding == "truncate":  # the largest value of the format not above the (positive) value
        y = torch.where(y.double() > value, (bits - 1).view(dtype), y)
    elif rounding == "upward":  # the smallest not below it
        y = torch.where(y.double() < value, (bits + 1).view(dtype), y)
    return x.numpy(), y.double().numpy(), exact.numpy(), format_of(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_truncated_outputs_fail_and_rounded_ones_pass_where_every_arithmetic_rounds_to_nearest(dtype):
    profile = PrecisionProfile(TORCH_CUDA, Reduction("sequential"))
    for known in (profile, PrecisionProfile(unknown_arithmetic(), Reduction("sequential"))):
        x, nearest, exact, fmt = synthetic(dtype)
        assert measure_bias(x, nearest, exact, fmt, known, known_arithmetics("cuda")).ok
        x, truncated, exact, fmt = synthetic(dtype, "truncate")
        bias = measure_bias(x, truncated, exact, fmt, known, known_arithmetics("cuda"))
        assert not bias.ok and bias.mean < -0.3, bias


def test_truncation_to_bf16_passes_for_unknown_kernels_where_the_interpreter_truncates():
    """The interpreter's own fp32 -> bf16 conversion truncates: an unknown kernel may too, on the CPU."""
    x, truncated, exact, fmt = synthetic(torch.bfloat16, "truncate")
    unknown, known = PrecisionProfile(unknown_arithmetic(), Reduction("sequential")), known_arithmetics("cpu")
    assert measure_bias(x, truncated, exact, fmt, unknown, known).ok
    x, truncated, exact, fmt = synthetic(torch.float16, "truncate")
    assert not measure_bias(x, truncated, exact, fmt, unknown, known).ok


@pytest.mark.parametrize("arithmetic", [TORCH_CPU, unknown_arithmetic()], ids=lambda a: a.name)
def test_fp32_rows_rounded_upward_fail_and_rows_with_zero_mean_relative_errors_pass(arithmetic):
    """fp32 outputs in the compute format are judged by row means: outputs rounded to nearest pass, and so do
    rows each off by its own relative error of several ulps (a sum's error: zero mean over rows); rounded
    upward, or with relative errors biased by +8 units of 2^-24, they fail."""
    profile, rows = PrecisionProfile(arithmetic, Reduction("sequential")), 2 * MIN_ROWS
    spread = torch.randn(rows, generator=torch.Generator().manual_seed(8), dtype=torch.float64) * 4 * 2.0**-24
    cases = {"nearest": ("nearest", None), "upward": ("upward", None), "row errors": ("nearest", spread),
             "biased row errors": ("nearest", spread + 8 * 2.0**-24)}
    biases = {name: measure_bias(*synthetic(torch.float32, rounding, rows, relative_error), profile,
                                 known_arithmetics("cpu"))
              for name, (rounding, relative_error) in cases.items()}
    assert {name: bias.ok for name, bias in biases.items()} == {
        "nearest": True, "upward": False, "row errors": True, "biased row errors": False}, biases
    assert biases["upward"].mean > 0.3 and biases["biased row errors"].mean > 0.3, biases
    assert all(bias.allowance.rows == rows and "row means" in str(bias.allowance) for bias in biases.values())


def test_fp32_outputs_of_fewer_rows_than_the_minimum_are_not_judged():
    bias = measure_bias(*synthetic(torch.float32, "upward", MIN_ROWS - 1), PrecisionProfile(TORCH_CPU, Reduction(
        "sequential")), known_arithmetics("cpu"))
    assert bias.ok and bias.mean > 0.3 and str(bias.allowance).startswith("not judged"), bias


def test_the_t_quantile_matches_the_tables():
    """Student's t, two-sided: 12.706 (1 dof) and 2.228 (10) at p = 0.05, 2.750 (30) at 0.01; and near the normal
    quantile 6.109 of p = 1e-9 for many dof."""
    for dof, p, table in [(1, 0.05, 12.7062), (10, 0.05, 2.2281), (30, 0.01, 2.7500), (10**6, 1e-9, 6.1095)]:
        assert t_quantile(dof, p) == pytest.approx(table, abs=1e-4)
