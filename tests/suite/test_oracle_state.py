"""The oracles compute in numerical settings of their own (oracles/settings.py): what a kernel leaves changed in
the process, mpmath's precision, numpy's handling of floating-point errors, gmpy2's context, changes none of
their exact values, bounds or allowances, and fails no correct kernel."""

from contextlib import contextmanager

import gmpy2
import mpmath
import numpy as np
import pytest
import torch

from oracles import correctly_rounded
from oracles.bias import MIN_ROWS, measure_bias, t_quantile
from oracles.bounds import PrecisionProfile, Reduction, log_softmax_bound, softmax_bound
from oracles.call import Call
from oracles.formats import BF16, FP32
from oracles.profiles import TORCH_CPU
from oracles.ulp import fractional_ulp_error
from specs.operations import LOG_SOFTMAX, SOFTMAX
from specs.registry import known_arithmetics

PROFILE = PrecisionProfile(TORCH_CPU, Reduction("sequential"))


@contextmanager
def process_numerics_changed():
    """The process's numerical settings as a kernel may leave them: mpmath at 8 bits (its exact values rounded
    to 8 bits were 3.2e4 fp32 ulps off, and Student's quantile never returned), numpy raising on every
    floating-point error, gmpy2's global context at 8 bits trapping underflow below 2^-60.  Put back on leaving."""
    saved_mpmath, saved_gmpy2 = (mpmath.mp.prec, mpmath.iv.prec, mpmath.mp.pretty), gmpy2.get_context()
    saved_numpy = np.seterr(all="raise")
    try:
        mpmath.mp.prec, mpmath.iv.prec, mpmath.mp.pretty = 8, 8, True
        gmpy2.set_context(gmpy2.context(precision=8, emin=-60, emax=60, trap_underflow=True))
        yield
    finally:
        mpmath.mp.prec, mpmath.iv.prec, mpmath.mp.pretty = saved_mpmath
        gmpy2.set_context(saved_gmpy2)
        np.seterr(**saved_numpy)


def logits() -> torch.Tensor:
    """Float64 rows: tier 2 decides every float64 result (its exact value the middle of an enclosure).  The last
    row's -1e-300 has an inexact gap to the row's maximum, which goes to MPFR as a wide difference of two float64."""
    x = torch.randn(6, 16, generator=torch.Generator().manual_seed(46), dtype=torch.float64) * 3
    x[-1, :4] = torch.tensor([3.0, -1e-300, 1.0, 2.5], dtype=torch.float64)
    return x


def assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape, (got.shape, want.shape)
    differ = got.view(np.int64) != want.view(np.int64)  # float64 bits: NaNs and the signs of zeros included
    assert not differ.any(), f"{int(differ.sum())} of {got.size} differ: {got[differ][:4]}, not {want[differ][:4]}"


def oracle_results() -> list:
    """The oracle's correctly rounded and exact values for the logits, as float64 and fp32 softmax and log_softmax."""
    calls = [Call(x, -1, op, "cpu") for x in (logits(), logits().float()) for op in (SOFTMAX, LOG_SOFTMAX)]
    return [correctly_rounded.softmax(call) for call in calls]


def test_the_oracles_values_are_the_same_bits_whatever_the_process_numerics():
    usual = oracle_results()
    with process_numerics_changed():
        changed = oracle_results()
    assert [r.escalated for r in changed] == [r.escalated for r in usual] and usual[0].escalated == logits().numel()
    for got, want in zip(changed, usual):
        assert_same_bits(got.rounded, want.rounded)
        assert_same_bits(got.exact, want.exact)


def bounds_and_bias() -> tuple:
    """Bounds, fractional errors and bias allowances of outputs rounded to nearest from torch's float64 softmax:
    bf16 outputs judged one by one, fp32 ones by the means of 2 * MIN_ROWS rows (Student's t).  Each row has an
    entry whose exponential underflows (the bounds let it, on purpose) and a -inf."""
    x = torch.randn(2 * MIN_ROWS, 64, generator=torch.Generator().manual_seed(9), dtype=torch.float64) * 8
    x[:, :2] = torch.tensor([-1000.0, -torch.inf], dtype=torch.float64)
    exact = torch.softmax(x, 1).numpy()
    log_exact = torch.log_softmax(x, 1).numpy()
    bf16 = torch.softmax(x, 1).bfloat16().double().numpy()
    fp32 = torch.softmax(x, 1).float().double().numpy()
    x = x.numpy()
    bounds = [softmax_bound(x, exact, FP32, PROFILE), log_softmax_bound(x, log_exact, FP32, PROFILE),
              softmax_bound(x, exact, BF16, PROFILE), fractional_ulp_error(bf16, exact, BF16)]
    known = known_arithmetics("cpu")
    biases = [measure_bias(x, y, exact, fmt, PROFILE, known) for y, fmt in ((bf16, BF16), (fp32, FP32))]
    return bounds, biases


def test_bounds_and_bias_allowances_are_the_same_whatever_the_process_numerics():
    usual_bounds, usual_biases = bounds_and_bias()
    with process_numerics_changed():
        bounds, biases = bounds_and_bias()
    for got, want in zip(bounds, usual_bounds):
        assert_same_bits(got, want)
    assert biases == usual_biases and all(bias.ok for bias in biases), biases
    assert usual_biases[1].allowance.rows == 2 * MIN_ROWS  # judged by row means: the t quantile counts


def test_students_quantile_is_computed_and_kept_at_the_oracles_own_precision():
    """Computed afresh under mpmath at 8 bits, and cached so: the same number as at mpmath's default precision."""
    usual = t_quantile.__wrapped__(MIN_ROWS - 1)
    t_quantile.cache_clear()
    with process_numerics_changed():
        changed = t_quantile(MIN_ROWS - 1)
    assert changed == usual == t_quantile(MIN_ROWS - 1) and 8.6 < usual < 8.7


@pytest.mark.parametrize("hostile", ["sets_mp_precision", "numpy_raises"])
def test_a_correct_kernel_that_changes_the_process_numerics_passes(run_pytest, hostile):
    """Its accuracy and bias tests pass.  Named by its path, it runs in a process of its own (harness/guard/host.py):
    its module is loaded into the suite's process too, as a plugin, as a registered kernel or a peer's library is
    imported there, so the oracles judge under the settings its import leaves.  TRITON_INTERPRET is set from the
    start: the module imports triton before the run would set it."""
    result = run_pytest("-p", f"tests.hostile.{hostile}", "tests/kernel/test_accuracy.py",
                        "tests/kernel/test_statistical_bias.py", "--kernel", f"tests.hostile.{hostile}:softmax",
                        "--hypothesis-profile", "ci", "--device", "cpu", "-q", TRITON_INTERPRET="1")
    assert result.returncode == pytest.ExitCode.OK and "3 passed" in result.stdout, \
        result.stdout[-3000:] + result.stderr[-2000:]
