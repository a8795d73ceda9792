"""The scaled softmaxes' oracle agrees with mpmath on the exact logits scale * x + bias, and the logits a declared
construction forms are the ones its kernels form: torch's eager ops (input dtype), fp32 arithmetic (compute), at
random rows and where the constructions part (large logits, near-ties, -10000 and -inf paddings, causal rows)."""

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.inputs.strategies import ATTENTION_SCALES, BIAS_KINDS, BIAS_SPANS, Bias, Case, Values
from harness.judging.judge import as_rows
from oracles import correctly_rounded
from oracles.call import Call
from oracles.formats import FP32, FP64, format_of, round_mpf, ulp
from oracles.logits import candidates
from specs.operations import BIASED_SOFTMAX, CAUSAL_SOFTMAX, SCALED_SOFTMAX

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
EXACT = mpmath.MPContext()
EXACT.prec = 600  # s x + b of fp32 values spans at most 2^128 down to 2^-300: every bit, and exp's to 2^-400


def mpmath_softmax(x: torch.Tensor, scale: float, bias: torch.Tensor | None, causal: bool, dtype: torch.dtype):
    """Rows of softmax(scale * x + bias) from the exact logits (mpmath, 600 bits), rounded to ``dtype`` and to
    float64; rows without a finite logit are left NaN (their special values are the semantics' rules)."""
    rows = as_rows(x, -1).double().numpy()
    biases = None if bias is None else as_rows(bias.expand(x.shape), -1).double().numpy()
    fmt = format_of(dtype)
    rounded, exact = np.full(rows.shape, np.nan), np.full(rows.shape, np.nan)
    per_matrix = x.shape[-2] if x.dim() > 1 else 1
    for i, row in enumerate(rows):
        z = [EXACT.mpf(v) * EXACT.mpf(scale) + (EXACT.mpf(biases[i, j]) if biases is not None else 0)
             for j, v in enumerate(row.tolist())]
        unmasked = [j for j in range(len(z)) if not (causal and j > i % per_matrix)]
        kept = [j for j in unmasked if EXACT.isfinite(z[j])]
        if not kept or any(EXACT.isnan(z[j]) or z[j] == EXACT.inf for j in unmasked):
            continue  # no finite logit, or NaN or +inf among them: not this test's subject
        peak = max(z[j] for j in kept)
        total = EXACT.fsum(EXACT.exp(z[j] - peak) for j in kept)
        for j in range(len(z)):
            value = EXACT.exp(z[j] - peak) / total if j in kept else EXACT.mpf(0)
            rounded[i, j], exact[i, j] = round_mpf(value, fmt) + 0.0, round_mpf(value, FP64) + 0.0
    return rounded, exact


def assert_agrees(call: Call, causal: bool = False):
    oracle = correctly_rounded.softmax(call)
    rounded, exact = mpmath_softmax(call.x, call.scale, call.bias, causal, call.x.dtype)
    judged = ~np.isnan(exact)
    fmt = format_of(call.x.dtype)
    # The oracle rounds s x + b once to float64 (exact without a bias), so its exact values may drift by 2^-52 |z|
    # relative: its rounded ones must agree wherever mpmath's exact value is not that close to a rounding boundary.
    logits = np.abs(as_rows(call.logits, -1).numpy())
    drift = np.abs(oracle.exact - exact) / np.maximum(exact, 2.0**-1074)
    allowed = 2.0**-48 * (1 + np.where(np.isfinite(logits), logits, 0).max(axis=-1, keepdims=True))
    assert (drift[judged] <= allowed.repeat(exact.shape[-1], -1)[judged]).all()
    step = ulp(exact, fmt)
    near_boundary = np.abs((exact / step) % 1 - 0.5) < 2.0**-30
    agree = (oracle.rounded == rounded) | ~judged | near_boundary
    assert agree.all(), f"{int((~agree).sum())} elements differ, first at {np.argwhere(~agree)[0].tolist()}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@given(data=st.data())
def test_agrees_with_mpmath_on_random_rows(dtype, data):
    rows, n = data.draw(st.tuples(st.integers(1, 4), st.integers(1, 40)), label="shape")
    magnitude = data.draw(st.sampled_from([1e-3, 1.0, 30.0, 1e3, 3e4]), label="logit magnitude")
    scale = data.draw(st.sampled_from(ATTENTION_SCALES), label="scale")
    bias = data.draw(st.none() | st.builds(Bias, st.sampled_from(tuple(BIAS_KINDS)), st.sampled_from(BIAS_SPANS)),
                     label="bias")
    case = Case((rows, n), 1, dtype, Values("normal", magnitude), seed=data.draw(st.integers(0, 2**16)), scale=scale,
                bias=bias)
    assert_agrees(case.call(SCALED_SOFTMAX if bias is None else BIASED_SOFTMAX, "cpu"))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("bias", [None, *(Bias(kind, "full") for kind in BIAS_KINDS)], ids=str)
def test_agrees_with_mpmath_where_the_constructions_part(dtype, bias):
    """Logits near ties at large magnitudes (where rounding s x to the input dtype or fp32 moves a logit by more
    than the gaps), with every bias kind; and a causal softmax's rows."""
    base = torch.full((3, 24), 3000.0, dtype=torch.float64)
    base += torch.arange(24, dtype=torch.float64) * torch.tensor([[2.0**-4], [1.0], [2.0**3]])  # three gap sizes
    x = base.to(dtype)
    scale = ATTENTION_SCALES[5]  # 1/sqrt(80): no power of two, every product rounds
    if bias is None:
        assert_agrees(Call(x, -1, SCALED_SOFTMAX, "cpu", scale=scale))
        assert_agrees(Call(x[:, :3], -1, CAUSAL_SOFTMAX, "cpu", scale=scale), causal=True)
    else:
        values = bias.sample((3, 24), 1, dtype, torch.Generator().manual_seed(1))
        assert_agrees(Call(x, -1, BIASED_SOFTMAX, "cpu", scale=scale, bias=values))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("biased", [False, True], ids=["scaled", "biased"])
def test_the_input_construction_forms_torch_eager_logits(dtype, biased):
    """One candidate of the "input" construction is torch's x * scale (+ bias) bit for bit, and the "compute" one is
    the same in fp32: the bound is judged by the logits these kernels form, not by others."""
    case = Case((8, 300), 1, dtype, Values("normal", 1000.0), seed=3, scale=ATTENTION_SCALES[5],
                bias=Bias("normal", "full") if biased else None)
    call = case.call(BIASED_SOFTMAX if biased else SCALED_SOFTMAX, "cpu")
    x, bias = call.x, call.bias
    eager = x * call.scale + (bias if biased else 0)
    in_fp32 = x.float() * call.scale + (bias.float() if biased else 0)
    rows = (as_rows(t, -1).double().numpy() for t in (x, call.logits, *((bias,) if biased else ())))
    x_rows, exact, *bias_rows = rows
    fmt = format_of(dtype)
    formed = candidates(x_rows, bias_rows[0] if biased else None, call.scale, exact, fmt, "input", FP32, False)
    assert any((f == as_rows(eager, -1).double().numpy()).all() for f, _ in formed)
    (compute, slack), = candidates(x_rows, bias_rows[0] if biased else None, call.scale, exact, fmt, "compute", FP32,
                                   False)
    np.testing.assert_array_equal(compute, as_rows(in_fp32, -1).double().numpy())
    assert not slack.any()  # no fused multiply-add: nothing beyond the formed logits


def test_the_constructions_part_by_more_than_an_ulp():
    """The reason the construction is declared: at logits near 3000 in fp16 and a scale of 1/sqrt(80), x * scale
    rounded to fp16 moves outputs by 180 ulps from the softmax of the exact product (the README's figure)."""
    x = (3000.0 + torch.arange(16, dtype=torch.float64) * 0.25).to(torch.float16).reshape(1, 16)
    call = Call(x, -1, SCALED_SOFTMAX, "cpu", scale=ATTENTION_SCALES[5])
    oracle = correctly_rounded.softmax(call)
    eager = torch.softmax(x * call.scale, -1).double().numpy()
    assert (np.abs(eager - oracle.exact) / ulp(oracle.exact, format_of(torch.float16))).max() > 100
