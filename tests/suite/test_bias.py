"""The statistical judge of bias (oracles.bias) catches directed rounding and passes rounding to nearest; the
kernels' own bias is judged in tests/kernel/test_statistical_bias.py."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from harness.inputs.strategies import Values
from oracles.bias import MIN_ROWS, measure_bias, t_quantile
from oracles.bounds import PrecisionProfile, Reduction
from oracles.formats import FP64, format_of
from oracles.profiles import TORCH_CPU, TORCH_CUDA
from specs.registry import known_arithmetics, unknown_arithmetic
from tests import outcomes

DIRECTED_ROUNDING = "tests.hostile.directed_rounding"


def test_outputs_rounded_upward_fail_as_biased_high_and_outputs_rounded_to_nearest_pass(run_pytest, tmp_path):
    """fp32 softmax computed in float64 and rounded toward +inf, each output within one ulp: caught as a kernel
    of unknown construction on ordinary rows and on tied rows (on CUDA only these:
    tests/kernel/test_statistical_bias.py), and in each of its attention softmaxes (scaled, biased, causal); the same
    rounded to nearest passes all five."""
    result = run_pytest("tests/kernel/test_statistical_bias.py", "--kernel", f"{DIRECTED_ROUNDING}:softmax",
                        "--kernel", f"{DIRECTED_ROUNDING}:softmax_to_nearest", "--hypothesis-profile", "ci",
                        "--device", "cpu", "-q", "--outcomes", str(tmp_path / "outcomes.jsonl"))
    ran = outcomes.read(tmp_path / "outcomes.jsonl")
    failed = sorted(case.name.split("[", 1)[1] for case in ran if case.kind == "failure")
    attention = [f"{DIRECTED_ROUNDING}:softmax-{op}]" for op in ("scaled_softmax", "biased_softmax", "causal_softmax")]
    assert failed == sorted([f"{DIRECTED_ROUNDING}:softmax]", f"{DIRECTED_ROUNDING}:softmax]", *attention]), \
        result.stdout[-3000:]
    assert all("its outputs are biased high" in case.message for case in ran if case.kind == "failure"), \
        result.stdout[-3000:]
    assert sum(case.kind == "passed" and "softmax_to_nearest" in case.name for case in ran) == 5, result.stdout[-3000:]


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


def tied(rounding: str, rows: int = 128, n: int = 256):
    """Rows of k tied maxima (the bias test's), their exact values and outputs rounded as :func:`synthetic`'s."""
    x = Values("tied-max", 1e4).sample((rows, n), torch.float32, 1, torch.Generator().manual_seed(9)).float().double()
    exact = torch.softmax(x, 1)
    y = exact.float()
    if rounding == "upward":
        y = torch.where(y.double() < exact, (y.view(torch.int32) + 1).view(torch.float32), y)
    return x.numpy(), y.double().numpy(), exact.numpy(), format_of(torch.float32)


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_tied_rows_rounded_upward_fail_for_a_kernel_of_unknown_construction_on_every_backend(backend):
    """Tied rows carry no exp bias: fp32 outputs rounded upward fail where Triton's biased exp on NVIDIA allows a
    kernel of unknown construction more than half an ulp on ordinary rows; rounded to nearest, they pass."""
    profile, known = PrecisionProfile(unknown_arithmetic(), Reduction("sequential")), known_arithmetics(backend)
    nearest, upward = (measure_bias(*tied(rounding), profile, known) for rounding in ("nearest", "upward"))
    assert nearest.ok and not upward.ok and upward.mean > 0.4, (nearest, upward)
    assert upward.allowance.operations == pytest.approx(max(a.div_bias_ulps for a in known)), upward
    assert upward.allowance.rows == 128, upward


def test_tied_rows_keep_the_exp_bias_where_an_arithmetic_may_not_return_exp_of_zero_exactly():
    """Ascend's arithmetic is unmeasured (``exp_of_zero_exact`` False): its tied rows keep the exp's bias."""
    unknown = PrecisionProfile(unknown_arithmetic(), Reduction("sequential"))
    bias = measure_bias(*tied("nearest"), unknown, known_arithmetics("npu"))
    assert bias.allowance.operations >= 2 * max(a.exp_bias_ulps for a in known_arithmetics("npu")), bias


def test_rows_of_the_same_outputs_count_once():
    """Rows that permute one another, and tied rows of the same k, share their errors: one statistical unit."""
    x, y, exact, fmt = synthetic(torch.float32, rows=MIN_ROWS)
    order = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(10)).numpy()
    doubled = [np.concatenate([a, a[:, order]]) for a in (x, y, exact)]
    profile = PrecisionProfile(TORCH_CPU, Reduction("sequential"))
    assert measure_bias(*doubled, fmt, profile, known_arithmetics("cpu")).allowance.rows == MIN_ROWS
    x, y, exact, fmt = tied("nearest", rows=2 * MIN_ROWS, n=MIN_ROWS + 1)  # k in [17, 33]: 17 distinct
    assert measure_bias(x, y, exact, fmt, profile, known_arithmetics("cpu")).allowance.rows == MIN_ROWS // 2 + 1


def test_fp32_outputs_of_float64_compute_rounded_upward_fail():
    """fp32 outputs of float64 compute are judged one by one, their final rounding taken out of the systematic part:
    rounded upward, ordinary and tied rows fail."""
    wide = PrecisionProfile(replace(TORCH_CPU, compute=FP64, downcast_ulps={torch.float32: 0.5}), Reduction("sequential"))
    for rows in (synthetic(torch.float32, "upward", rows=MIN_ROWS), tied("upward")):
        bias = measure_bias(*rows, wide, known_arithmetics("cpu"))
        assert not bias.ok and bias.allowance.rows is None and bias.allowance.systematic < 1e-6, bias


def test_fp32_outputs_of_fewer_rows_than_the_minimum_are_not_judged():
    bias = measure_bias(*synthetic(torch.float32, "upward", MIN_ROWS - 1), PrecisionProfile(TORCH_CPU, Reduction(
        "sequential")), known_arithmetics("cpu"))
    assert bias.ok and bias.mean > 0.3 and str(bias.allowance).startswith("not judged"), bias


def test_the_t_quantile_matches_the_tables():
    """Student's t, two-sided: 12.706 (1 dof) and 2.228 (10) at p = 0.05, 2.750 (30) at 0.01; and near the normal
    quantile 6.109 of p = 1e-9 for many dof."""
    for dof, p, table in [(1, 0.05, 12.7062), (10, 0.05, 2.2281), (30, 0.01, 2.7500), (10**6, 1e-9, 6.1095)]:
        assert t_quantile(dof, p) == pytest.approx(table, abs=1e-4)
