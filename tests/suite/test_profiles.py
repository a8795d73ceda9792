"""The backend's arithmetic stays inside the precision profiles the bounds assume.

The profiles' figures were measured once (oracles/profiles.py); these probes
measure them again on whatever device runs the suite, so a device, a Triton or
a torch with worse arithmetic fails here instead of passing loose verdicts.
Each probe runs for both plain constructions: Triton's operations (``tl.exp``,
``/``, a store's conversion) against the backend's Triton profile, and torch's
(``torch.exp``, the function its softmax kernels call, an IEEE division, a
conversion) against the backend's torch profile.
"""

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kernels.full_softmax import arithmetic as call_arithmetic
from kernels.full_softmax import triton_code
from kernels.launch import float64_math
from oracles.bias import sampling_margin
from oracles.bounds import Arithmetic
from oracles.formats import FP32, format_of, ulp
from oracles.profiles import TORCH_ARITHMETIC, TRITON_ARITHMETIC
from specs import full_softmax

BLOCK = 1024


@triton.jit
def exp_probe(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.exp(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


@triton.jit
def div_probe(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    quotient = tl.load(a_ptr + offsets, mask=mask) / tl.load(b_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, quotient, mask=mask)


@triton.jit
def store_probe(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)  # fp32 -> y's dtype


@triton.jit
def load_probe(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask).to(tl.float32), mask=mask)  # x's dtype -> fp32


@dataclass(frozen=True)
class Construction:
    """How one plain construction computes softmax's steps on the device, and the profile it declares: each
    step takes fp32 tensors on the CPU and returns its results as float64 numpy values."""

    arithmetic: Arithmetic
    exp: Callable[[torch.Tensor], np.ndarray]
    divide: Callable[[torch.Tensor, torch.Tensor], np.ndarray]
    convert: Callable[[torch.Tensor, torch.dtype], np.ndarray]  # fp32 -> a narrower dtype
    load: Callable[[torch.Tensor], np.ndarray]  # a narrower dtype -> fp32


def triton_construction(backend) -> Construction:
    def run(probe, out_dtype, *inputs):
        out = torch.empty(inputs[0].shape, dtype=out_dtype, device=backend.device)
        n = inputs[0].numel()
        probe[(triton.cdiv(n, BLOCK),)](*(t.to(backend.device) for t in inputs), out, n, BLOCK=BLOCK)
        return out.cpu().double().numpy()

    return Construction(TRITON_ARITHMETIC[backend.name], lambda d: run(exp_probe, torch.float32, d),
                        lambda a, b: run(div_probe, torch.float32, a, b), lambda x, dtype: run(store_probe, dtype, x),
                        lambda x: run(load_probe, torch.float32, x))


def torch_construction(backend) -> Construction:
    def on_device(step):
        return lambda *args: step(*(a.to(backend.device) if isinstance(a, torch.Tensor) else a for a in args)).cpu().double().numpy()

    return Construction(TORCH_ARITHMETIC[backend.name], on_device(torch.exp), on_device(torch.div),
                        on_device(lambda x, dtype: x.to(dtype)), on_device(torch.Tensor.float))


@pytest.fixture(params=["triton", "torch"])
def construction(request, backend) -> Construction:
    if request.param == "torch" and backend.name not in TORCH_ARITHMETIC:
        pytest.skip(f"no profile of torch's own kernels on {backend.name}")
    return {"triton": triton_construction, "torch": torch_construction}[request.param](backend)


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def exp_probe_results(construction: Construction) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exp over softmax's gaps (down to -104, and in [-1, 0]): the gaps, results and exact values."""
    g = generator(1)
    d = torch.cat([-torch.rand(1 << 15, generator=g) * 104, -torch.rand(1 << 13, generator=g)]).float()
    gap = d.double().numpy()
    return gap, construction.exp(d), np.exp(gap)


def general_quotients() -> tuple[torch.Tensor, torch.Tensor]:
    """A softmax's quotients e / S: normal and subnormal dividends, divisors up to 4097."""
    g = generator(2)
    a = torch.cat([torch.rand(1 << 15, generator=g), torch.rand(1 << 12, generator=g) * 2.0**-120]).float()
    return a, (torch.rand(a.numel(), generator=g) * 4096 + 1).float()


def tied_quotients() -> tuple[torch.Tensor, torch.Tensor]:
    """The quotients 1/k of rows of k tied maxima (the statistical bias test's, k in [128, 1024])."""
    k = torch.arange(128, 1025, dtype=torch.float32)
    return torch.ones_like(k), k


def mean_signed_error(got: np.ndarray, exact: np.ndarray) -> tuple[float, float]:
    """The mean signed error over the normal results, in ulps of fp32 at the exact value, and how far a
    sample's mean may stray from an operation's (oracles.bias.sampling_margin)."""
    normal = exact >= FP32.min_normal
    signed = (got - exact)[normal] / ulp(exact[normal], FP32)
    return float(signed.mean()), sampling_margin(signed)


def test_exp_within_profile(construction, note):
    arithmetic = construction.arithmetic
    gap, got, exact = exp_probe_results(construction)
    allowed = arithmetic.exp_ulps + arithmetic.exp_ulps_per_gap * np.abs(gap)
    normal = exact >= FP32.min_normal
    error = np.abs(got - exact) / ulp(exact, FP32)
    note(f"{arithmetic.name}: exp max {error[normal].max():.3f} ulp, allowed {allowed[normal].min():.2f}.."
         f"{allowed.max():.2f}")
    assert np.all(error[normal] <= allowed[normal])
    subnormal_error = np.abs(got - exact)[~normal] / FP32.min_subnormal
    flushed = (got[~normal] == 0) & arithmetic.flushes_subnormals
    assert np.all((subnormal_error <= allowed[~normal] + 1) | flushed)


def test_exp_of_zero_is_one_where_the_profile_says_so(construction):
    """exp(+0) and exp(-0) are exactly 1 where the profile declares it: the bias test's tied rows
    (oracles/bias.py) then carry no exp bias."""
    if not construction.arithmetic.exp_of_zero_exact:
        pytest.skip(f"{construction.arithmetic.name} does not declare exp(0) exact")
    assert construction.exp(torch.tensor([0.0, -0.0] * 8)).tolist() == [1.0] * 16


GAP_BANDS = ((0, 1), (1, 4), (4, 16), (16, 64), (64, 105))


def test_exp_bias_within_profile(construction, note):
    """The exp's mean signed error over softmax's gaps, band by band of |d|, within the profile's exp_bias_ulps
    plus exp_bias_per_gap times the band's mean |d| (up to the sample's own margin): a more biased exp would
    let biased kernels pass tests/kernel/test_statistical_bias.py."""
    arithmetic = construction.arithmetic
    gap, got, exact = exp_probe_results(construction)
    for low, high in GAP_BANDS:
        band = (-gap >= low) & (-gap < high)
        mean, margin = mean_signed_error(got[band], exact[band])
        allowed = arithmetic.exp_bias_ulps + arithmetic.exp_bias_per_gap * float(np.mean(-gap[band]))
        note(f"{arithmetic.name}: exp, |d| in [{low}, {high}): mean signed error {mean:+.4f} ulp (sampling margin "
             f"{margin:.4f}), allowed {allowed:.3f}")
        assert abs(mean) <= allowed + margin, (low, high)


def test_division_within_profile(construction, note):
    arithmetic = construction.arithmetic
    a, b = general_quotients()
    got, exact = construction.divide(a, b), a.double().numpy() / b.double().numpy()
    normal = exact >= FP32.min_normal
    error = np.abs(got - exact) / ulp(exact, FP32)
    note(f"{arithmetic.name}: division max {error[normal].max():.3f} ulp, allowed {arithmetic.div_ulps}")
    assert np.all(error[normal] <= arithmetic.div_ulps)
    flushed = (got[~normal] == 0) & arithmetic.flushes_subnormals
    assert np.all((np.abs(got - exact)[~normal] <= (arithmetic.div_ulps + 1) * FP32.min_subnormal) | flushed)


@pytest.mark.parametrize("quotients", [general_quotients, tied_quotients], ids=["general", "tied"])
def test_division_bias_within_profile(construction, quotients, note):
    """The division's mean signed error within the profile's div_bias_ulps (up to the sample's own margin), over
    general quotients and over those of tied rows."""
    arithmetic = construction.arithmetic
    a, b = quotients()
    mean, margin = mean_signed_error(construction.divide(a, b), a.double().numpy() / b.double().numpy())
    note(f"{arithmetic.name}: division, {quotients.__name__}: mean signed error {mean:+.4f} ulp (sampling margin "
         f"{margin:.4f}), allowed {arithmetic.div_bias_ulps}")
    assert abs(mean) <= arithmetic.div_bias_ulps + margin


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_downcast_within_profile(construction, dtype, note):
    arithmetic = construction.arithmetic
    fmt = format_of(dtype)
    g = generator(3)
    x = torch.cat([torch.rand(1 << 14, generator=g),
                   torch.rand(1 << 12, generator=g) * fmt.min_normal]).float()  # normal, then subnormal in fmt
    got = construction.convert(x, dtype)
    exact = x.double().numpy()
    normal = exact >= fmt.min_normal
    error = np.abs(got - exact) / ulp(exact, fmt)
    allowed = arithmetic.downcast_ulps.get(dtype, 1.0)
    note(f"{arithmetic.name}: fp32 -> {dtype}: max {error[normal].max():.3f} ulp, allowed {allowed}")
    assert np.all(error[normal] <= allowed)
    if dtype in arithmetic.subnormal_downcast_unreliable:
        assert np.all(np.abs(got[~normal]) < fmt.min_normal)
    else:
        assert np.all(error[~normal] <= allowed)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_upcast_within_profile(construction, dtype):
    """A narrower dtype's values convert to fp32 exactly (every one is an fp32 value), subnormals too unless the
    profile says they may load as anything below the smallest normal."""
    fmt = format_of(dtype)
    g = generator(5)
    x = torch.cat([torch.randn(1 << 12, generator=g),
                   (torch.rand(1 << 12, generator=g) * 2 - 1) * fmt.min_normal]).to(dtype)  # normal, then subnormal
    got, exact = construction.load(x), x.double().numpy()
    normal = np.abs(exact) >= fmt.min_normal
    assert np.array_equal(got[normal], exact[normal])
    if dtype in construction.arithmetic.subnormal_upcast_unreliable:
        assert np.all(np.abs(got[~normal]) < fmt.min_normal)
    else:
        assert np.array_equal(got[~normal], exact[~normal])


@triton.jit
def full_softmax_exp_probe(x_ptr, shift_ptr, y_ptr, n, BLOCK: tl.constexpr, ARITH: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    e = triton_code._exp_gap(tl.load(x_ptr + offsets, mask=mask), tl.load(shift_ptr + offsets, mask=mask), ARITH)
    tl.store(y_ptr + offsets, e.to(tl.float32), mask=mask)


def test_full_softmax_exp_within_its_profile(backend, note):
    """The full kernel's exp(x - max), gap error recovered: within its own profile's c0, no |d| term."""
    arith = call_arithmetic.arithmetic(backend.device, log=False, out_dtype=torch.float32)
    arithmetic = full_softmax.ARITHMETIC[backend.name, call_arithmetic.ARITHMETIC_NAMES[arith]]
    g = generator(4)
    shift = (torch.rand(1 << 15, generator=g) * 80 - 20).float()
    x = (shift - torch.rand(1 << 15, generator=g) * 90).float()  # gaps down to -90, rounded in fp32
    out = torch.empty(x.shape, dtype=torch.float32, device=backend.device)
    full_softmax_exp_probe[(triton.cdiv(x.numel(), BLOCK),)](
        x.to(backend.device), shift.to(backend.device), out, x.numel(), BLOCK=BLOCK, ARITH=arith)
    exact = np.exp(x.double().numpy() - shift.double().numpy())  # the exact gap, in float64
    got = out.cpu().double().numpy()
    normal = exact >= FP32.min_normal
    error = np.abs(got - exact) / ulp(exact, FP32)
    # In ulps of fp32: c0 in the compute format's ulps, plus the rounding to fp32 when that format is wider.
    wider = arithmetic.compute.precision - FP32.precision
    allowed = arithmetic.exp_ulps * 2.0**-wider + (0.5 if wider else 0.0)
    note(f"full_softmax exp of gaps to -90: max {error[normal].max():.3f} ulp, allowed {allowed}")
    assert np.all(error[normal] <= allowed)


@triton.jit
def fixed_point_sums_probe(e_ptr, out_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    e = tl.load(e_ptr + cols[None, :], mask=(cols < n)[None, :], other=0.0)
    tl.store(out_ptr + tl.arange(0, 1), triton_code._fixed_point_sums(e))


def test_full_softmax_fixed_point_sums_are_exact_whatever_the_order(backend):
    """The sums behind full_softmax's bitwise invariances on CUDA: each term truncated to a multiple
    of 2^-47 and the integers added exactly, then one rounding to float64; so the same bits for
    the terms in any order, and a NaN term gives NaN."""
    if not float64_math():
        pytest.skip("CUDA's arithmetic; this Triton's interpreter has no float64")

    def fixed_sum(e: torch.Tensor) -> float:
        out = torch.empty(1, dtype=torch.float64, device=backend.device)
        fixed_point_sums_probe[(1,)](e.to(backend.device), out, e.numel(), BLOCK=triton.next_power_of_2(e.numel()))
        return out.item()

    g = generator(5)
    rows = [torch.ones(32768),  # the largest sum the 63 bits must hold
            torch.zeros(4096).index_fill_(0, torch.tensor([7]), 1.0)]
    for n in (3, 1000, 32768):
        x = torch.randn(n, generator=g, dtype=torch.float64) * 8
        rows.append(torch.exp(x - x.max()).float())
    tiny = torch.rand(2048, generator=g) * 2.0**-30  # below 2^-24, where the truncation acts
    rows.append(torch.cat([torch.ones(1), tiny, torch.tensor([1e-40, 2.0**-47, 3 * 2.0**-48])]))
    for e in rows:
        exact = sum(Fraction(v) for v in e.double().tolist())
        got = fixed_sum(e)
        allowed = Fraction(e.numel(), int(triton_code.FIXED_POINT_ONE.value)) + exact * Fraction(1, 2**52)
        assert abs(Fraction(got) - exact) <= allowed, (e.numel(), got, float(exact))
        assert fixed_sum(e[torch.randperm(e.numel(), generator=g)]) == got  # bit for bit
    with_nan = torch.ones(100)
    with_nan[42] = float("nan")
    assert np.isnan(fixed_sum(with_nan))
