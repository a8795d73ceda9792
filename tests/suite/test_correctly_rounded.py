"""The two-tier oracle agrees with tier 2 alone (the interval Ziv loop) on every element, adversarial rows included."""

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from oracles import correctly_rounded, mp_softmax
from oracles.call import Call, Operation
from oracles.correctly_rounded import EXP64_ULPS, LOG64_ULPS, float64_pass, softmax_rows
from oracles.formats import BF16, FP16, FP32, FP64, Format, format_of, round_float64, ulp
from specs.operations import LOG_SOFTMAX, MASKED_SOFTMAX, SOFTMAX, SOFTMAX_FP32_OUT

FORMATS = [FP32, FP16, BF16]
LOG = [False, True]


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    # == does not tell -0 from +0: signs are compared too.
    same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
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


MIDPOINT_GAPS = [
    # x_1 - x_0 is a midpoint of the format; log_softmax_1 = x_1 - x_0 - log S lies e^-gap beyond it,
    # so the two neighbours are decided by log S > 0 alone (the tie would go the other way).
    pytest.param(torch.bfloat16, [64.0, -16384.0], [-0.0, -16512.0], id="bfloat16"),
    pytest.param(torch.float16, [8.0, -16384.0], [-0.0, -16400.0], id="float16"),
    pytest.param(torch.float32, [2.0**-10, -20000.0], [-0.0, -20000.001953125], id="float32"),
    pytest.param(torch.float64, [2.0**-40, -8192.0], [-0.0, -8192.0 - 2.0**-39], id="float64"),
]


@pytest.mark.parametrize("dtype,row,expected", MIDPOINT_GAPS)
def test_log_softmax_decides_gaps_on_a_midpoint(dtype, row, expected):
    result = correctly_rounded.softmax(Call(torch.tensor(row, dtype=dtype), -1, LOG_SOFTMAX, "cpu"))
    assert_same(result.rounded, np.array(expected))
    rounded, _ = mp_softmax.correctly_rounded_rows(np.array([row]), format_of(dtype), log=True)
    assert_same(rounded[0], np.array(expected))


def test_undecided_rows_name_the_precision_tried_last(monkeypatch):
    # 1/(1 + e^t) with t = 2^-53 sits 2^-160 above a float64 midpoint: 85 bits cannot tell, 170 can.
    monkeypatch.setattr(mp_softmax, "MAX_PRECISION", 100)
    with pytest.raises(mp_softmax.OracleError, match="undecided at 85 bits"):
        mp_softmax.correctly_rounded_rows(near_midpoint_rows(FP64)[:1], FP64)


def test_tiny_log_softmax_results_have_accurate_exact_values():
    # log S = log(1 + 2.2e-8): computed as log(fsum(e)) it kept 26 bits of the result, 0.06 fp32 ulp off.
    result = correctly_rounded.softmax(Call(torch.tensor([[0.0, -17.638158798217773]]), -1, LOG_SOFTMAX, "cpu"))
    with mpmath.workprec(200):
        truth = float(-mpmath.log1p(mpmath.exp(mpmath.mpf(-17.638158798217773))))
    assert result.escalated == 0
    assert abs(result.exact[0, 0] - truth) <= ulp(truth, FP32) * 2.0**-20


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_tier_one_exact_values_of_log_softmax_near_zero(fmt):
    # log_softmax of the maximal entry is -log(1 + rest): tiny when the rest is.
    gaps = np.unique(representable(fmt, np.geomspace(0.5, 740, 400)))
    rows = np.stack([np.zeros_like(gaps), -gaps], axis=1)
    rounded, exact, decided = float64_pass(rows, fmt, log=True)
    want, truth = mp_softmax.correctly_rounded_rows(rows, fmt, log=True)
    assert decided.all()
    assert_same(rounded, want)
    assert (np.abs(exact - truth) / ulp(truth, fmt)).max() <= 2.0**-20


ZEROS = [
    (FP16, [5.0], True, [0.0]),  # x - x = +0 and log 1 = +0: an exact +0
    (FP64, [5.0], True, [0.0]),
    (FP32, [5.0, -math.inf], True, [0.0, -math.inf]),
    (FP32, [0.0, -120.0], True, [-0.0, -120.0]),  # -log(1 + e^-120) is negative: it rounds to -0
    (BF16, [0.0, -120.0], True, [-0.0, -120.0]),
    (FP16, [0.0, -40.0], True, [-0.0, -40.0]),
    (FP64, [0.0, -800.0], True, [-0.0, -800.0]),
    (FP32, [0.0, -120.0], False, [1.0, 0.0]),  # softmax is positive: its zeros are +0
    (FP16, [0.0, -40.0], False, [1.0, 0.0]),
    (FP64, [0.0, -800.0], False, [1.0, 0.0]),
]


def row_id(fmt: Format, row: list[float]) -> str:
    return f"{fmt}-{','.join(f'{v:g}' for v in row)}"


@pytest.mark.parametrize("fmt,row,log,expected", ZEROS,
                         ids=[f"{row_id(f, r)}-{'log_softmax' if log else 'softmax'}" for f, r, log, _ in ZEROS])
def test_zeros_carry_the_sign_of_the_exact_result(fmt, row, log, expected):
    x = np.array([row])
    assert_same(softmax_rows(x, fmt, log=log).rounded[0], np.array(expected))
    assert_same(mp_softmax.correctly_rounded_rows(x, fmt, log=log)[0][0], np.array(expected))


LN2 = math.log(2.0)  # correctly rounded in float64
EXTREMES = [
    # (format, row, softmax, log_softmax): gaps past 1e38, fp16's largest values, float64 rows where
    # x - max overflows, rows of one element and rows with -inf.
    (FP32, [3e38, -3e38, 0.0], [1.0, 0.0, 0.0], [-0.0, -math.inf, -3e38]),
    (BF16, [3e38, -3e38, 0.0], [1.0, 0.0, 0.0], [-0.0, -math.inf, -3e38]),
    (FP32, [-FP32.max_finite, FP32.max_finite], [0.0, 1.0], [-math.inf, -0.0]),
    (BF16, [BF16.max_finite, -BF16.max_finite], [1.0, 0.0], [-0.0, -math.inf]),
    (FP16, [65504.0, -65504.0, 0.0], [1.0, 0.0, 0.0], [-0.0, -math.inf, -65504.0]),
    (FP16, [16.0, -65504.0], [1.0, 0.0], [-0.0, -math.inf]),  # -65520 is where fp16 overflows
    (FP16, [8.0, -65504.0], [1.0, 0.0], [-0.0, -65504.0]),
    (FP64, [1.7e308, -1.7e308, 0.0], [1.0, 0.0, 0.0], [-0.0, -math.inf, -1.7e308]),
    (FP64, [1.7e308, -1.7e308, 1.7e308], [0.5, 0.0, 0.5], [-LN2, -math.inf, -LN2]),
    (FP64, [-FP64.max_finite, FP64.max_finite], [0.0, 1.0], [-math.inf, -0.0]),
    *[(fmt, [3.0], [1.0], [0.0]) for fmt in (FP64, FP32, FP16, BF16)],
    *[(fmt, [-math.inf, 2.0, -math.inf, 2.0], [0.0, 0.5, 0.0, 0.5], [-math.inf, -LN2, -math.inf, -LN2])
      for fmt in (FP64, FP32, FP16, BF16)],
]


@pytest.mark.parametrize("log", LOG, ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("fmt,row,softmax,log_softmax", EXTREMES, ids=[row_id(f, r) for f, r, *_ in EXTREMES])
def test_extreme_rows_are_decided(fmt, row, softmax, log_softmax, log):
    x = representable(fmt, np.array([row]))
    fast = agree_with_mpmath(x, fmt, log)
    assert_same(fast.rounded[0], representable(fmt, np.array(log_softmax if log else softmax)))


ALL_FORMATS = [FP64, FP32, FP16, BF16]


@st.composite
def hard_rows(draw, fmt: Format) -> np.ndarray:
    """[x_0, x_1, others]: x_1 - x_0 a midpoint (odd c) or a value of fmt, the others far below x_0.

    |x_1| = k 2^(e-p+1) is a value of fmt and x_0 = c 2^(e-p), so x_1 - x_0 = -(2k + c) 2^(e-p).
    log_softmax_1 lies log S ~ e^-gap beyond it.
    """
    e = draw(st.integers(0, fmt.emax), label="exponent")
    k = draw(st.integers(1 << (fmt.precision - 1), (1 << fmt.precision) - 1), label="significand")
    c = draw(st.integers(1, 8), label="c")
    x0, x1 = math.ldexp(c, e - fmt.precision), -math.ldexp(k, e - fmt.precision + 1)
    gaps = draw(st.lists(st.floats(0, fmt.max_finite), max_size=4), label="gaps")
    with np.errstate(over="ignore"):
        others = np.maximum(x0 - np.array(gaps, dtype=np.float64), -fmt.max_finite)
    return representable(fmt, np.r_[x0, x1, others])[None]


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=str)
@pytest.mark.parametrize("log", LOG, ids=["softmax", "log_softmax"])
@given(data=st.data())
def test_agrees_with_mpmath_on_gaps_near_midpoints(fmt, log, data):
    agree_with_mpmath(data.draw(hard_rows(fmt), label="x"), fmt, log)


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
    # The tier-1 bound assumes np.exp and np.log1p err by at most EXP64_ULPS / LOG64_ULPS ulps,
    # and that exp(0) and log1p(0) are exact (a maximal entry's exponential is exactly 1).
    rng = np.random.default_rng(5)
    args = np.r_[-rng.random(3000) * 745, rng.standard_normal(2000) * 3, -rng.random(1000) * 1e-6]
    with mpmath.workprec(120):
        exp_error = ulps_off(np.exp(args), [mpmath.exp(mpmath.mpf(float(a))) for a in args])
        rests = np.r_[rng.random(3000) * 1e6, rng.random(1000) * 1e-6, np.exp(-rng.random(2000) * 745)]
        log1p_error = ulps_off(np.log1p(rests), [mpmath.log1p(mpmath.mpf(float(a))) for a in rests])
    note(f"numpy float64 exp: max {exp_error:.3f} ulp, log1p: max {log1p_error:.3f} ulp")
    assert exp_error <= EXP64_ULPS / 2 and log1p_error <= LOG64_ULPS / 2
    assert np.exp(0.0) == 1.0 and np.log1p(0.0) == 0.0


def test_masked_rows_follow_the_safe_softmax_convention():
    x = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])
    result = correctly_rounded.softmax(Call(x, -1, MASKED_SOFTMAX, "cpu", mask))
    plain = correctly_rounded.softmax(Call(torch.tensor([[1.0, -math.inf, 3.0]]), -1, SOFTMAX, "cpu"))
    assert_same(result.rounded[0], plain.rounded[0])
    assert (result.rounded[1] == 0).all() and (result.exact[1] == 0).all()
    assert_same(result.rounded[2], np.full(3, round_float64(1 / 3, FP32)))


def test_rows_follow_the_softmax_dim_and_out_dtype():
    x = torch.randn(3, 5, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float16)
    result = correctly_rounded.softmax(Call(x, 1, SOFTMAX_FP32_OUT, "cpu"))
    expected = softmax_rows(x.movedim(1, -1).reshape(6, 5).double().numpy(), FP32)
    assert_same(result.rounded, expected.rounded)


def oracle(x, dim, operation=SOFTMAX, mask=None):
    return correctly_rounded.softmax(Call(x, dim, operation, "cpu", mask))


@pytest.mark.parametrize("bad,error,message", [
    (lambda: oracle(torch.ones(3, dtype=torch.int32), 0), TypeError, "dtype must be one of"),
    (lambda: oracle(torch.tensor(1.0), 0), ValueError, "at least one dimension"),
    (lambda: oracle(torch.ones(2, 3), 2), ValueError, "dim must lie in"),
    (lambda: oracle([1.0, 2.0], 0), TypeError, "torch.Tensor"),
    (lambda: oracle(torch.ones(2, 3), -1, MASKED_SOFTMAX, torch.ones(2, 3)), ValueError, "bool"),
    (lambda: oracle(torch.ones(2), 0, MASKED_SOFTMAX), ValueError, "masked_softmax takes a mask"),
    (lambda: oracle(torch.ones(2), 0, Operation(name="masked_log_softmax", log=True, masked=True),
                    torch.ones(2, dtype=torch.bool)), ValueError, "softmax only"),
    (lambda: oracle(torch.ones(2), 0, Operation(name="softmax_int8_out", out_dtype=torch.int8)), TypeError,
     "dtype must be one of"),
])
def test_bad_input_is_refused(bad, error, message):
    with pytest.raises(error, match=message):
        bad()


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_the_maximal_entry_of_a_row_whose_others_underflow_is_decided_as_minus_zero_by_tier_one(fmt):
    # exp of every other gap is 0 in float64, so R^ = 0: only the sign of log_softmax = -log1p(R) < 0 decides.
    rows = np.array([[5.0, -2.0**30, -2.0**60, -2.0**31, -1024.0], [-2.0**40, 2.0**40, -2.0**40, 0.0, -2.0**39]])
    rounded, _, decided = float64_pass(rows, fmt, log=True)
    want, _ = mp_softmax.correctly_rounded_rows(rows, fmt, log=True)
    assert decided.all()
    assert_same(rounded, want)
    assert_same(rounded[[0, 1], [0, 1]], np.array([-0.0, -0.0]))
