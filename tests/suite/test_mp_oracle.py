"""The mpmath oracle: correct rounding, special values, agreement with float64 torch."""

import mpmath
import numpy as np
import pytest
import torch

from oracles.formats import BF16, FP16, FP32, round_float64, round_mpf
from oracles import mp_softmax
from oracles.mp_softmax import correctly_rounded_rows
from oracles.torch_reference import softmax_float64
from oracles.ulp import ulp_distance

FORMATS = [FP32, FP16, BF16]


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 781, 1000])
def test_equal_rows_give_correctly_rounded_reciprocal(fmt, n):
    rounded, exact = correctly_rounded_rows(np.full((2, n), 1.5), fmt)
    with mpmath.workprec(200):
        expected = round_mpf(mpmath.mpf(1) / n, fmt)
    assert np.all(rounded == expected)
    assert np.allclose(exact, 1 / n, rtol=1e-15, atol=0)


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_agrees_with_float64_torch_within_one_ulp(fmt, log):
    generator = torch.Generator().manual_seed(7)
    x = (torch.randn(24, 97, generator=generator) * 6).to(fmt.dtype)
    rounded, exact = correctly_rounded_rows(x.double().numpy(), fmt, log=log)
    reference = softmax_float64(x, -1, log=log).numpy()
    distance = ulp_distance(torch.from_numpy(rounded).to(fmt.dtype),
                            torch.from_numpy(round_float64(reference, fmt)).to(fmt.dtype))
    assert distance.max() <= 1
    assert (distance == 0).float().mean() >= 0.99
    # float64 torch: n additions, an exp and a division or log, each at most 2^-53 relative
    # (log_softmax subtracts, so its error is absolute, on the scale of the terms).
    u64 = (x.shape[-1] + 4) * 2.0**-53
    magnitude = np.abs(x.double().numpy()) + np.abs(x.double().numpy()).max(axis=-1, keepdims=True)
    scale = (magnitude + np.log(x.shape[-1]) + 1) if log else np.abs(reference)
    assert np.all(np.abs(exact - reference) <= u64 * scale)


def test_exact_results_sum_to_one():
    x = np.random.default_rng(3).normal(0, 10, (5, 300))
    _, exact = correctly_rounded_rows(x, FP32)
    np.testing.assert_allclose(exact.sum(axis=1), 1.0, rtol=1e-13)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_special_values_follow_the_documented_semantics(log):
    inf, nan = np.inf, np.nan
    x = np.array([
        [0.0, nan, 1.0],          # NaN anywhere: all NaN
        [inf, 0.0, 1.0],          # +inf: all NaN, as torch (inf - inf)
        [-inf, -inf, -inf],       # all -inf: NaN
        [-inf, 2.0, 2.0],         # -inf entries with a finite maximum
        [-0.0, 0.0, -inf],        # signed zeros are equal inputs
    ])
    rounded, _ = correctly_rounded_rows(x, FP32, log=log)
    assert np.isnan(rounded[:3]).all()
    at_minus_inf = -inf if log else 0.0
    half = np.log(0.5) if log else 0.5
    np.testing.assert_array_equal(rounded[3], [at_minus_inf, round_float64(half, FP32), round_float64(half, FP32)])
    np.testing.assert_array_equal(rounded[4], rounded[3][[1, 2, 0]])
    torch_result = softmax_float64(torch.from_numpy(x), -1, log=log).numpy()
    np.testing.assert_array_equal(np.isnan(rounded), np.isnan(torch_result))


def test_empty_rows():
    rounded, exact = correctly_rounded_rows(np.empty((3, 0)), FP32)
    assert rounded.shape == exact.shape == (3, 0)


def test_results_that_underflow_round_to_zero_or_subnormal():
    # exp(-110) / (1 + ...) is about 1.7e-48: below half of fp32's smallest subnormal (7e-46)
    # the result is +0; exp(-100) is about 3.7e-44, a subnormal with few significant bits.
    rounded, exact = correctly_rounded_rows(np.array([[0.0, -110.0, -100.0]]), FP32)
    assert rounded[0, 1] == 0.0 and exact[0, 1] > 0
    assert rounded[0, 2] == round_float64(np.exp(-100.0), FP32) and rounded[0, 2] < FP32.min_normal


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_wanted_results_are_those_of_the_whole_row_and_the_rest_are_nan(log):
    x = np.random.default_rng(5).normal(0, 8, (3, 50))
    x[1, 7] = -np.inf  # decided by the special cases, wanted or not
    wanted = np.zeros(x.shape, dtype=bool)
    wanted[0, [3, 40]] = wanted[2, 0] = True
    everything = correctly_rounded_rows(x, FP32, log=log)
    some = correctly_rounded_rows(x, FP32, log=log, wanted=wanted)
    for whole, part in zip(everything, some):
        np.testing.assert_array_equal(part[wanted], whole[wanted])  # each row's sum takes in every entry
        assert np.isnan(np.delete(part.ravel(), [7 + 50, *np.flatnonzero(wanted)])).all()
    assert some[0][1, 7] == everything[0][1, 7] == (-np.inf if log else 0.0)


@pytest.mark.parametrize("bits", [85, 170])
def test_a_rows_sum_is_enclosed_to_the_working_precision(bits):
    """Tier 2's sum of exponentials (MPFR, rounded down and up, and mpmath past FAR_GAP): its ends hold the
    exact sum, no further apart than the precision allows."""
    others = np.concatenate([np.random.default_rng(11).normal(0, 8, 300), [1e-300, -3e8, -1e300]])
    peak = 20.5
    with mpmath.workprec(bits + 400):
        exact = mpmath.fsum(mpmath.exp(mpmath.fsub(v, peak, exact=True)) for v in others.tolist())
    with mp_softmax._interval_precision(bits):
        low, high = mp_softmax._ends(mp_softmax._rest(others, peak))
    assert low <= exact <= high
    assert high - low <= exact * mpmath.ldexp(1, 4 - bits)
