"""The softmax backward's oracle agrees with mpmath's exact arithmetic, and its bound holds torch and catches a
half-precision dot product, at random rows and at the rows where a backward cancels."""

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.judging.judge import judge_softmax
from oracles import backward
from oracles.backward import backward_rows, exact_log_row, exact_row, log_backward_rows
from oracles.bounds import PrecisionProfile, softmax_backward_bound
from oracles.call import Call
from oracles.formats import BF16, FP16, FP32, FP64, Format, judging_unit, round_float64, round_mpf, ulp
from oracles.profiles import ORDER_FREE, TORCH_CPU, TORCH_CUDA
from oracles.ulp import fractional_ulp_error
from specs.operations import LOG_SOFTMAX_BACKWARD, SOFTMAX_BACKWARD
from specs.registry import resolve, unknown_profile

FORMATS = [FP32, FP16, BF16]
EXACT = mpmath.MPContext()
EXACT.prec = 4000  # beyond every bit a sum of products of fp32 values can hold (2^256 down to 2^-350)


def mpmath_backward(y: np.ndarray, g: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """y_j (g_j - sum g y) of each row, with mpmath at 4000 bits (exact here), rounded to ``fmt`` and to float64."""
    rounded, exact = np.empty_like(y), np.empty_like(y)
    for i in range(y.shape[0]):
        total = EXACT.fsum(EXACT.mpf(a) * EXACT.mpf(b) for a, b in zip(y[i].tolist(), g[i].tolist()))
        for j in range(y.shape[1]):
            z = EXACT.mpf(y[i, j]) * (EXACT.mpf(g[i, j]) - total)
            assert z == 0 or EXACT.mpf(z) == z  # nothing rounded: the precision holds every bit
            rounded[i, j], exact[i, j] = round_mpf(z, fmt) + 0.0, round_mpf(z, FP64) + 0.0
    return rounded, exact


def softmax_outputs(x: np.ndarray, fmt: Format) -> np.ndarray:
    """A forward's output, as a backward receives it: softmax rounded to ``fmt``."""
    return round_float64(torch.softmax(torch.from_numpy(x), -1).numpy(), fmt)


def assert_agree(y: np.ndarray, g: np.ndarray, fmt: Format) -> backward.OracleResult:
    fast = backward_rows(y, g, fmt)
    slow, slow_exact = mpmath_backward(y, g, fmt)
    same = (fast.rounded == slow) & (np.signbit(fast.rounded) == np.signbit(slow))
    assert same.all(), f"{int((~same).sum())} differ, first at {np.argwhere(~same)[0].tolist()}"
    drift = np.abs(fast.exact - slow_exact) / ulp(slow_exact, fmt)
    assert drift.max(initial=0) <= 2.0**-20  # exact values serve fractional errors: right to a tiny part of an ulp
    return fast


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@given(data=st.data())
def test_agrees_with_mpmath_on_random_rows(fmt, data):
    rows, n = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 40)), label="shape")
    logit_scale = data.draw(st.sampled_from([1e-3, 1.0, 30.0, 300.0]), label="logit scale")
    grad_scale = data.draw(st.sampled_from([1e-30, 1e-3, 1.0, 1e4, 1e30]), label="grad scale")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    generator = np.random.default_rng(seed)
    y = softmax_outputs(generator.standard_normal((rows, n)) * logit_scale, fmt)
    g = round_float64(generator.standard_normal((rows, n)) * min(grad_scale, fmt.max_finite / 4), fmt)
    assert_agree(y, g, fmt)


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("ulps_apart", [0, 1, 4])
def test_agrees_with_mpmath_where_the_gradient_is_near_constant(fmt, ulps_apart):
    """g_j = c plus a few ulps of c: g_j - sum g y cancels to c (1 - sum y) plus the ulps, far below c."""
    generator = np.random.default_rng(ulps_apart)
    y = softmax_outputs(generator.standard_normal((6, 33)) * 3, fmt)
    c = np.array([[1.0], [-3.0], [1e3], [0.1], [7.0], [-1e-3]])
    steps = generator.integers(-ulps_apart, ulps_apart + 1, size=y.shape)
    g = round_float64(c + steps * ulp(c, fmt), fmt)
    result = assert_agree(y, g, fmt)
    products = np.sum(np.abs(y * g), axis=-1, keepdims=True)
    # The rows do cancel: each result is a few ulps of c, not a multiple of c.
    assert (np.abs(result.exact) <= (ulps_apart + 1) * 40 * fmt.unit_roundoff * np.abs(y) * products).all()


def test_a_result_on_a_rounding_midpoint_is_decided_exactly_with_integers():
    """y = [1/2, 1/2], g = [1, -2^-8]: z = +-(1 + 2^-8) / 4, halfway between two bf16 values, is out of reach of
    float64 enclosures (tier 1) and rounds to even (1/4) with integers (tier 2)."""
    y, g = np.array([[0.5, 0.5]]), np.array([[1.0, -2.0**-8]])
    result = backward_rows(y, g, BF16)
    assert result.escalated == 2
    assert result.rounded.tolist() == [[0.25, -0.25]]
    assert result.exact.tolist() == [[(1 + 2.0**-8) / 4, -(1 + 2.0**-8) / 4]]


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_the_integer_tier_agrees_with_mpmath_on_every_element(fmt):
    generator = np.random.default_rng(7)
    y = softmax_outputs(generator.standard_normal((3, 50)) * 5, fmt)
    g = round_float64(np.concatenate([generator.standard_normal((2, 50)), np.full((1, 50), 2.5)]), fmt)
    slow, slow_exact = mpmath_backward(y, g, fmt)
    for i in range(3):
        rounded, exact = exact_row(y[i], g[i], np.ones(50, dtype=bool), fmt)
        assert rounded.tolist() == slow[i].tolist() and exact.tolist() == slow_exact[i].tolist()


def test_an_exact_zero_is_plus_zero():
    """y summing to 1 exactly and a constant g: every y_j (g_j - S) is 0 exactly."""
    result = backward_rows(np.array([[0.5, 0.25, 0.25]]), np.array([[3.0, 3.0, 3.0]]), FP32)
    assert result.rounded.tolist() == [[0.0, 0.0, 0.0]] and not np.signbit(result.rounded).any()


def test_a_float64_exact_zero_bounds_an_error_its_ulps_cannot_count():
    """y summing to 1 exactly and a constant g: the exact result is 0, whose float64 ulp is 5e-324.  torch on an H100
    returned -4.9e-19 there (g = -0.117), and torch on the CPU 2.0e-14 for g = 420 (the nightly), each within the
    sum's absolute error but some 1e305 ulps and past float64's range from 0: the bound in ulps overflowed to
    infinity, then the error did.  Both are counted in the judge's unit (at least 2^-960 in float64); a result of 1e-3
    there still fails."""
    for y, g, results in (([0.5009653303691279, 0.49903466963087206], -0.11683683728322698,
                           [-4.897601024557596e-19, 4.897601024557596e-19]),
                          ([0.35716951852888607, 0.32406821306981226, 0.3187622684013017], 420.4166550763247,
                           [2.03027365460506e-14, 2.03027365460506e-14, 2.03027365460506e-14])):
        y, g = np.array([y]), np.full((1, len(y)), g)
        oracle = backward_rows(y, g, FP64)
        assert oracle.rounded.tolist() == [[0.0] * len(results)]
        bound = softmax_backward_bound(y, g, oracle.exact, FP64, PrecisionProfile(TORCH_CUDA, ORDER_FREE))
        for result, within in ((results, True), ([1e-3, *results[1:]], False)):
            error = fractional_ulp_error(np.array([result]), oracle.exact, FP64, unit=judging_unit)
            assert bool((error <= bound).all()) == within, (result, error, bound)


def test_float64_inputs_whose_products_float64_does_not_hold_are_decided_with_integers():
    """fp64 backwards were never judged: the products of fp64 values are not exact in float64.  Every element is
    decided with integers (its products summed exactly) and agrees with mpmath at 4000 bits."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(3, 17, dtype=torch.float64, generator=generator) * 8
    y, g = torch.softmax(x, -1), torch.randn(3, 17, dtype=torch.float64, generator=generator)
    g[1] = 0.25  # near-total cancellation: a constant gradient
    result = backward.softmax_backward(Call(y, -1, SOFTMAX_BACKWARD, "cpu", grad=g))
    slow, _ = mpmath_backward(y.numpy(), g.numpy(), FP64)
    assert (result.rounded == slow).all() and (np.signbit(result.rounded) == np.signbit(slow)).all()
    log_y = torch.log_softmax(x, -1)
    logged = backward.softmax_backward(Call(log_y, -1, LOG_SOFTMAX_BACKWARD, "cpu", grad=g))
    for i, j in np.ndindex(*log_y.shape):
        total = EXACT.fsum(EXACT.mpf(v) for v in g[i].tolist())
        exact = EXACT.mpf(g[i, j].item()) - EXACT.exp(EXACT.mpf(log_y[i, j].item())) * total
        assert logged.rounded[i, j] == round_mpf(exact, FP64) + 0.0, (i, j)


SPECIAL_INPUTS = [math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("op", [SOFTMAX_BACKWARD, LOG_SOFTMAX_BACKWARD], ids=lambda op: op.name)
@given(seed=st.integers(0, 2**32 - 1), where=st.sampled_from(["grad", "y", "both"]))
def test_special_inputs_decide_what_ieee_arithmetic_on_the_definition_makes_non_finite(op, seed, where):
    """Rows with NaN and infinities in y, grad or both: the oracle's non-finite results are torch's float64 ones (its
    CPU evaluation of the definition), its finite ones the correctly rounded results of the finite rows they sit
    in, and no other result is decided."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 30, (6, 9))
    x[rng.random(x.shape) < 0.1] = -math.inf  # y = 0 (log_softmax: -inf), as a masked forward gives
    y = torch.from_numpy(x).log_softmax(-1) if op.log else torch.from_numpy(x).softmax(-1)
    y, g = y.float(), torch.from_numpy(rng.normal(0, 1, x.shape)).float()
    for name, t in (("y", y), ("grad", g)):
        if where in (name, "both"):
            t[torch.from_numpy(rng.random(x.shape) < 0.15)] = float(rng.choice(SPECIAL_INPUTS))
    result = backward.softmax_backward(Call(y, -1, op, "cpu", grad=g))
    ieee = (torch._log_softmax_backward_data if op.log else torch._softmax_backward_data)(g.double(), y.double(), -1,
                                                                                           torch.float64).numpy()
    non_finite = ~np.isfinite(ieee)
    assert np.array_equal(result.rounded[non_finite], ieee[non_finite].astype(np.float32), equal_nan=True)
    rows = np.isfinite(y.numpy()).all(-1) & np.isfinite(g.numpy()).all(-1)  # (the log's -inf rows are NaN rows)
    if rows.any():
        alone = backward.softmax_backward(Call(y[rows], -1, op, "cpu", grad=g[rows]))
        assert np.array_equal(result.rounded[rows], alone.rounded, equal_nan=True)
    assert np.isfinite(result.rounded[~non_finite]).all()
    if op.log:  # a row's lone special y_j reaches its own result only: the others are those of the row with y_j = 0
        rows = np.isfinite(g.numpy()).all(-1) & ~rows
        if rows.any():
            finite_y = torch.where(torch.isfinite(y) | (y == -math.inf), y, 0.0)
            alone = backward.softmax_backward(Call(finite_y[rows], -1, op, "cpu", grad=g[rows]))
            kept = ~non_finite[rows]
            assert np.array_equal(result.rounded[rows][kept], alone.rounded[kept])


def test_a_backward_that_hides_an_overflowed_gradient_fails_and_nan_for_its_infinity_passes():
    """A gradient of -inf (an overflow under loss scaling): the definition's results are NaN and +inf; a kernel giving
    finite numbers there fails, as does one giving an infinity for a NaN; NaN for the +inf passes."""
    y, g = torch.tensor([[0.5, 0.5]]), torch.tensor([[-math.inf, 1.0]])
    call = Call(y, -1, SOFTMAX_BACKWARD, "cpu", grad=g)
    user = resolve("torch.nn.functional:softmax")

    def verdict(result):
        return judge_softmax(user, call, torch.tensor([result]), replay="here").ok

    assert np.array_equal(backward.softmax_backward(call).rounded, [[math.nan, math.inf]], equal_nan=True)
    assert verdict([math.nan, math.inf]) and verdict([math.nan, math.nan])
    assert not verdict([0.0, 0.0]) and not verdict([math.nan, 1.0]) and not verdict([math.inf, math.inf])


def half_dot_backward(y: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """A backward whose dot product is accumulated in bf16: a planted bug the bound must catch."""
    total = torch.zeros(y.shape[0], 1, dtype=torch.bfloat16)
    for i in range(y.shape[1]):
        total = (total.float() + (g[:, i:i + 1] * y[:, i:i + 1]).float()).bfloat16()
    return (y.float() * (g.float() - total.float())).to(y.dtype)


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_the_bound_holds_torch_and_catches_a_bf16_dot_product(fmt):
    generator = np.random.default_rng(3)
    y = torch.from_numpy(softmax_outputs(generator.standard_normal((16, 300)) * 2, fmt)).to(fmt.dtype)
    g = torch.from_numpy(generator.standard_normal((16, 300)) + 2).to(fmt.dtype)
    oracle = backward_rows(y.double().numpy(), g.double().numpy(), fmt)
    call = Call(y, -1, SOFTMAX_BACKWARD, "cpu", grad=g)
    for profile in (PrecisionProfile(TORCH_CPU, ORDER_FREE), unknown_profile(call)):
        bound = softmax_backward_bound(y.double().numpy(), g.double().numpy(), oracle.exact, fmt, profile)
        for result, within in ((torch._softmax_backward_data(g, y, -1, y.dtype), True),
                               (half_dot_backward(y, g), False)):
            error = fractional_ulp_error(result.double().numpy(), oracle.exact, fmt)
            assert (error <= bound).all() == within, (profile.name, float((error / bound).max()))


def products_in_input_dtype(y: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """torch's CUDA softmax backward, emulated: tmp = grad * y as a tensor of the input dtype, then
    tmp - y * sum(tmp) in fp32 (softmax_backward_cuda_out in aten/src/ATen/native/cuda/SoftMax.cu)."""
    tmp = (g * y).float()  # a half tensor's product: rounded to the half format
    return (tmp - y.float() * tmp.sum(-1, keepdim=True)).to(y.dtype)


@pytest.mark.parametrize("fmt", [FP16, BF16], ids=str)
def test_torch_cuda_products_in_the_input_dtype_are_within_its_profile_and_beyond_a_correct_construction(fmt):
    generator = np.random.default_rng(11)
    y = torch.from_numpy(softmax_outputs(generator.standard_normal((16, 64)) * 2, fmt)).to(fmt.dtype)
    g = torch.from_numpy(generator.standard_normal((16, 64)) + 30).to(fmt.dtype)  # near constant: it cancels
    oracle = backward_rows(y.double().numpy(), g.double().numpy(), fmt)
    error = fractional_ulp_error(products_in_input_dtype(y, g).double().numpy(), oracle.exact, fmt)
    call = Call(y, -1, SOFTMAX_BACKWARD, "cuda", grad=g)
    for profile, within in ((PrecisionProfile(TORCH_CUDA, ORDER_FREE), True), (unknown_profile(call), False)):
        bound = softmax_backward_bound(y.double().numpy(), g.double().numpy(), oracle.exact, fmt, profile)
        assert (error <= bound).all() == within, (profile.name, float((error / bound).max()))


def mpmath_log_backward(y: np.ndarray, g: np.ndarray, fmt: Format) -> np.ndarray:
    """g_j - exp(y_j) sum_i g_i of each row, enclosed by mpmath's intervals at 400 bits, rounded to ``fmt``."""
    interval = mpmath.MPIntervalContext()
    interval.prec = 400
    rounded = np.empty_like(y)
    for i in range(y.shape[0]):
        total = EXACT.fsum(EXACT.mpf(v) for v in g[i].tolist())  # exact at 4000 bits
        for j in range(y.shape[1]):
            box = interval.mpf(g[i, j]) - interval.exp(interval.mpf(y[i, j])) * interval.mpf(total)
            lo, hi = (EXACT.make_mpf(end) for end in box._mpi_)
            assert round_mpf(lo, fmt) == round_mpf(hi, fmt)  # 400 bits decide every element drawn here
            rounded[i, j] = round_mpf(lo, fmt) + 0.0
    return rounded


def log_softmax_outputs(x: np.ndarray, fmt: Format) -> np.ndarray:
    return round_float64(torch.log_softmax(torch.from_numpy(x), -1).numpy(), fmt)


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@given(data=st.data())
def test_the_log_softmax_backward_agrees_with_mpmath_on_random_rows(fmt, data):
    rows, n = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 40)), label="shape")
    logit_scale = data.draw(st.sampled_from([1e-3, 1.0, 30.0, 300.0]), label="logit scale")
    grad_scale = data.draw(st.sampled_from([1e-30, 1e-3, 1.0, 1e4]), label="grad scale")
    generator = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    y = log_softmax_outputs(generator.standard_normal((rows, n)) * logit_scale, fmt)
    g = round_float64(generator.standard_normal((rows, n)) * min(grad_scale, fmt.max_finite / (4 * n)), fmt)
    result = log_backward_rows(y, g, fmt)
    same = (result.rounded == mpmath_log_backward(y, g, fmt))
    assert same.all(), np.argwhere(~same)[0].tolist()


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_the_log_softmax_backward_agrees_with_mpmath_where_it_cancels(fmt):
    """A constant gradient c over a near-uniform row: c - exp(y_j) n c cancels to c (1 - n exp(y_j)), a few ulps
    of c; the interval tier decides what float64 does not (and y_j = 0, G = 0 exactly)."""
    n = 37
    y = np.tile(round_float64(np.full(n, -math.log(n)), fmt), (4, 1))
    y[1, :3] += np.array([1, -1, 2]) * ulp(y[1, :3], fmt)
    y[2, 0] = 0.0  # exp(0) = 1: g_0 - G exactly
    g = np.array([[1.5] * n, [-3.0] * n, [0.25] * n, [1.0, -1.0] * (n // 2) + [0.0]])  # the last sums to 0
    result = log_backward_rows(y, g, fmt)
    assert (result.rounded == mpmath_log_backward(y, g, fmt)).all()
    assert result.rounded[2, 0] == 0.25 - 0.25 * n and (result.rounded[3] == g[3]).all()


def test_a_log_softmax_backward_output_of_minus_inf_gives_the_gradient():
    y = np.array([[-np.inf, 0.0]])
    g = np.array([[0.75, 2.0]])
    assert log_backward_rows(y, g, FP32).rounded.tolist() == [[0.75, 2.0 - 2.75]]


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_the_log_softmax_backward_interval_tier_agrees_with_mpmath_on_every_element(fmt):
    generator = np.random.default_rng(8)
    y = log_softmax_outputs(generator.standard_normal((3, 20)) * 4, fmt)
    y[0, 0] = 0.0
    g = round_float64(np.concatenate([generator.standard_normal((2, 20)), np.full((1, 20), 2.5)]), fmt)
    want = mpmath_log_backward(y, g, fmt)
    for i in range(3):
        rounded, _ = exact_log_row(y[i], g[i], np.ones(20, dtype=bool), fmt)
        assert rounded.tolist() == want[i].tolist()
