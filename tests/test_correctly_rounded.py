"""The two-tier oracle agrees with pure mpmath on every element, including adversarial rows."""

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from oracles import correctly_rounded, mp_softmax
from oracles.correctly_rounded import EXP64_ULPS, LOG64_ULPS, float64_pass, softmax_rows
from oracles.formats import BF16, FP16, FP32, Format, round_float64, ulp

FORMATS = [FP32, FP16, BF16]
LOG = [False, True]


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{int((~same).sum())} elements differ, first at {np.argwhere(~same)[0].tolist()}"


def agree_with_mpmath(x: np.ndarray, fmt: Format, log: bool) -> correctly_rounded.OracleResult:
    fast = softmax_rows(x, fmt, log=log)
    slow, slow_exact = mp_softmax.correctly_rounded_rows(x, fmt, log=log)
    assert_same(fast.rounded, slow)
    # The exact values serve fractional ULP errors: they must be right to a tiny part of an ulp.
    finite = np.isfinite(slow_exact)
    drift = np.abs(fast.exact[finite] - slow_exact[finite]) / ulp(slow_exact[finite], fmt)
    assert drift.max(initial=0) <= 2.0**-20
    return fast


def representable(fmt: Format, values: np.ndarray) -> np.ndarray:
    return round_float64(values, fmt)


finite_logits = st.floats(-1e4, 1e4, allow_nan=False, width=32)
special_logits = st.sampled_from([-np.inf, np.inf, np.nan, 0.0, -0.0])


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("log", LOG, ids=["softmax", "log_softmax"])
@given(data=st.data())
def test_agrees_with_mpmath_on_random_rows(fmt, log, data):
    shape = data.draw(st.tuples(st.integers(1, 4), st.integers(1, 48)), label="shape")
    scale = data.draw(st.sampled_from([1e-3, 1.0, 30.0, 1e3]), label="scale")
    values = data.draw(arrays(np.float64, shape, elements=finite_logits | special_logits), label="x") * scale
    agree_with_mpmath(representable(fmt, values), fmt, log)


def near_midpoint_rows(fmt: Format, count: int = 24) -> np.ndarray:
    """Rows [0, t] whose softmax lies a hair above a rounding boundary of fmt.

    With t = (2k+1) 2^-p, softmax_0 = 1/(1 + e^t) = 1/2 - t/4 + t^3/48 - ...; the
    values of fmt in [1/4, 1/2) are 2^-(p+1) apart, so 1/2 - t/4 is a midpoint
    between two of them and the result sits only t^3/48 above it.
    """
    t = (2 * np.arange(count) + 1) * 2.0 ** -fmt.precision
    return np.stack([np.zeros(count), t], axis=1)


def boundary_rows(fmt: Format) -> np.ndarray:
    """Rows built to sit on or near rounding boundaries, and other hard cases."""
    n = 64
    rows = [
        np.zeros(n),                                       # 1/64: exactly representable
        np.full(n, 3.0), np.r_[np.full(n - 1, -1.0), -np.inf][:n],  # 1/63 and 1/64 with a -inf
        np.r_[0.0, np.full(n - 1, -(fmt.emax * 0.7))],      # huge gaps: results underflow
        np.r_[0.0, -np.linspace(70, 110, n - 1)],           # subnormal results in fp32/bf16
        np.r_[0.0, -np.linspace(8, 17.5, n - 1)],           # subnormal results in fp16
        np.r_[fmt.max_finite, -fmt.max_finite, np.zeros(n - 2)],   # extreme logits
    ]
    rows = representable(fmt, np.array(rows))
    hunters = np.pad(near_midpoint_rows(fmt), ((0, 0), (0, n - 2)), constant_values=-np.inf)
    return np.concatenate([rows, hunters])


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("log", LOG, ids=["softmax", "log_softmax"])
def test_agrees_with_mpmath_on_adversarial_rows(fmt, log, note):
    fast = agree_with_mpmath(boundary_rows(fmt), fmt, log)
    note(f"adversarial rows: tier 1 escalated {fast.escalated} of {fast.rounded.size} elements to mpmath")
    if fmt is FP32 and not log:  # t^3/48 < 2^-60: closer to the midpoint than tier 1 can resolve
        assert fast.escalated >= 24


def test_escalation_rate_on_random_rows(note):
    x = (torch.randn(64, 4096, generator=torch.Generator().manual_seed(11)) * 4).double().numpy()
    result = softmax_rows(x, FP32)
    rounded, _, decided = float64_pass(x, FP32)
    checked = np.r_[np.flatnonzero(~decided.all(axis=1)), [0, 1]]  # escalated rows and two decided ones
    slow, _ = mp_softmax.correctly_rounded_rows(x[checked], FP32)
    assert_same(result.rounded[checked], slow)
    assert_same(rounded[checked][decided[checked]], slow[decided[checked]])
    note(f"fp32 rows of 4096, randn*4: escalation rate {result.escalation_rate:.2e} "
         f"({result.escalated} of {x.size} elements)")
    assert result.escalation_rate < 1e-3


def ulps_off(values: np.ndarray, truths) -> float:
    worst = 0.0
    for value, truth in zip(values, truths):
        if value != 0:
            worst = max(worst, float(abs(mpmath.mpf(float(value)) - truth)) / math.ulp(float(value)))
    return worst


def test_float64_library_meets_the_assumed_accuracy(note):
    # The tier-1 bound assumes np.exp and np.log err by at most EXP64_ULPS / LOG64_ULPS.
    rng = np.random.default_rng(5)
    args = np.r_[-rng.random(3000) * 745, rng.standard_normal(2000) * 3, -rng.random(1000) * 1e-6]
    with mpmath.workprec(120):
        exp_error = ulps_off(np.exp(args), [mpmath.exp(mpmath.mpf(float(a))) for a in args])
        positive = np.r_[rng.random(3000) * 1e6 + 1, 1 + rng.random(1000) * 1e-6]
        log_error = ulps_off(np.log(positive), [mpmath.log(mpmath.mpf(float(a))) for a in positive])
    note(f"numpy float64 exp: max {exp_error:.3f} ulp, log: max {log_error:.3f} ulp")
    assert exp_error <= EXP64_ULPS / 2 and log_error <= LOG64_ULPS / 2


def test_masked_rows_follow_the_safe_softmax_convention():
    x = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])
    result = correctly_rounded.softmax(x, -1, mask=mask)
    plain = correctly_rounded.softmax(torch.tensor([[1.0, -math.inf, 3.0]]), -1)
    assert_same(result.rounded[0], plain.rounded[0])
    assert (result.rounded[1] == 0).all() and (result.exact[1] == 0).all()
    assert_same(result.rounded[2], np.full(3, round_float64(1 / 3, FP32)))


def test_rows_follow_the_softmax_dim_and_out_dtype():
    x = torch.randn(3, 5, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float16)
    result = correctly_rounded.softmax(x, 1, out_dtype=torch.float32)
    expected = softmax_rows(x.movedim(1, -1).reshape(6, 5).double().numpy(), FP32)
    assert_same(result.rounded, expected.rounded)


@pytest.mark.parametrize("bad,error,message", [
    (lambda: correctly_rounded.softmax(torch.ones(3, dtype=torch.int32), 0), TypeError, "dtype must be one of"),
    (lambda: correctly_rounded.softmax(torch.tensor(1.0), 0), ValueError, "at least one dimension"),
    (lambda: correctly_rounded.softmax(torch.ones(2, 3), 2), ValueError, "dim must lie in"),
    (lambda: correctly_rounded.softmax([1.0, 2.0], 0), TypeError, "torch.Tensor"),
    (lambda: correctly_rounded.softmax(torch.ones(2, 3), -1, mask=torch.ones(2, 3)), ValueError, "bool"),
    (lambda: correctly_rounded.softmax(torch.ones(2), 0, log=True, mask=torch.ones(2, dtype=torch.bool)),
     ValueError, "softmax only"),
    (lambda: correctly_rounded.softmax(torch.ones(2), 0, out_dtype=torch.int8), TypeError, "dtype must be one of"),
])
def test_bad_input_is_refused(bad, error, message):
    with pytest.raises(error, match=message):
        bad()
