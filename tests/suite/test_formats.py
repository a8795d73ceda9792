"""Rounding into fp32 / fp16 / bf16 against the conversions of numpy and torch."""

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from oracles.formats import BF16, FP16, FP32, FP64, format_of, round_float64, round_mpf, ulp


def boundary_cases(fmt) -> np.ndarray:
    """Values of fmt, the midpoints between neighbours, and a hair either side."""
    rng = np.random.default_rng(1)
    exponents = rng.integers(fmt.emin - fmt.precision - 2, fmt.emax + 2, 4000)
    significands = rng.integers(1 << (fmt.precision - 1), 1 << fmt.precision, 4000).astype(np.float64)
    on_grid = np.ldexp(significands, exponents - fmt.precision + 1)
    midpoints = on_grid + ulp(on_grid, fmt) / 2
    cases = np.concatenate([on_grid, midpoints, np.nextafter(midpoints, 0), np.nextafter(midpoints, np.inf),
                            [0.0, -0.0, np.inf, -np.inf, fmt.max_finite, fmt.min_subnormal / 2,
                             fmt.min_subnormal / 2 * 3, fmt.max_finite + ulp(fmt.max_finite, fmt) / 2]])
    return np.concatenate([cases, -cases])


@pytest.mark.parametrize("fmt,np_dtype", [(FP32, np.float32), (FP16, np.float16)], ids=str)
def test_float64_rounding_matches_numpy_casts(fmt, np_dtype):
    cases = boundary_cases(fmt)
    with np.errstate(over="ignore"):
        expected = cases.astype(np_dtype).astype(np.float64)
    got = round_float64(cases, fmt)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


def test_bfloat16_rounding_matches_torch_on_float32_values():
    # torch rounds float32 to bfloat16 to nearest even; float32 inputs avoid double rounding.
    with np.errstate(over="ignore"):
        cases = boundary_cases(BF16).astype(np.float32)
    expected = torch.from_numpy(cases).to(torch.bfloat16).double().numpy()
    np.testing.assert_array_equal(round_float64(cases.astype(np.float64), BF16), expected)


@pytest.mark.parametrize("fmt", [FP32, FP16, BF16], ids=str)
def test_mpf_rounding_matches_float64_rounding(fmt):
    cases = boundary_cases(fmt)
    expected = round_float64(cases, fmt)
    got = np.array([round_mpf(mpmath.mpf(float(c)), fmt) for c in cases])
    np.testing.assert_array_equal(got, expected)


@given(st.integers(min_value=1, max_value=(1 << 60)), st.integers(min_value=-1200, max_value=1100))
def test_mpf_rounding_beyond_float64(mantissa, exponent):
    # Values with more bits than float64 holds (made at 64 bits: at mpmath's default 53 the mantissa itself is
    # rounded first), checked in exact rational arithmetic (mpmath's subtraction rounds too).
    with mpmath.workprec(64):
        value = mpmath.mpf(mantissa) * mpmath.mpf(2) ** exponent
    exact = Fraction(mantissa) * Fraction(2) ** exponent
    for fmt in (FP64, FP32, BF16):
        got = round_mpf(value, fmt)
        if got in (0.0, math.inf):
            lo = Fraction(fmt.min_subnormal) / 2
            hi = Fraction(fmt.max_finite) + Fraction(float(ulp(fmt.max_finite, fmt))) / 2
            assert (exact <= lo) if got == 0.0 else (exact >= hi), (fmt, got)
            continue
        step = Fraction(float(ulp(got, fmt)))
        assert abs(Fraction(got) - exact) <= step / 2, (fmt, got)


@pytest.mark.parametrize("fmt", [FP64, FP32, FP16, BF16], ids=str)
def test_ulp_of_zero_is_the_subnormal_spacing(fmt):
    # Zero lies among the subnormals: its spacing is 2^(emin - p + 1), not 2^-p.
    tiny = np.array([0.0, -0.0, fmt.min_subnormal, -3 * fmt.min_subnormal, fmt.min_normal - fmt.min_subnormal,
                     fmt.min_normal])
    np.testing.assert_array_equal(ulp(tiny, fmt), fmt.min_subnormal)
    assert ulp(0.0, fmt) == math.ldexp(1.0, fmt.emin - fmt.precision + 1)
    assert ulp(1.0, fmt) == math.ldexp(1.0, 1 - fmt.precision)


def test_format_of_refuses_non_float_dtypes():
    assert format_of(torch.bfloat16) is BF16
    with pytest.raises(TypeError, match="dtype must be one of"):
        format_of(torch.int32)
