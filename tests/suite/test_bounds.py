"""The derived bounds are honest both ways: torch stays inside, and they catch (their tightness on each kernel:
tests/kernel/test_bound_tightness.py)."""

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.device.backend import Backend
from harness.inputs.catalog import CATALOG
from harness.inputs.strategies import VALUE_CLASSES, Case, Layout, Values, cases, for_operation, matrix
from harness.judging.judge import as_rows, bounds, judge_softmax, measure, oracle_of
from harness.judging.recording import make_record
from oracles import correctly_rounded, profiles
from oracles.bounds import (Arithmetic, PrecisionProfile, Reduction, log_softmax_backward_bound, log_softmax_bound,
                            softmax_backward_bound, softmax_bound)
from oracles.call import Call, Operation
from oracles.formats import format_of, ulp
from report.summary import categorize
from specs import full_softmax, torch_softmax
from oracles.logits import CONSTRUCTIONS
from specs.operations import (BIASED_SOFTMAX, CAUSAL_SOFTMAX, LOG_SOFTMAX, LOG_SOFTMAX_BACKWARD, SCALED_SOFTMAX, SOFTMAX,
                              SOFTMAX_BACKWARD, TESTED_DTYPES)
from specs.registry import Capabilities, known_arithmetics, resolve, unknown_profile
from specs.torch_softmax import torch_profile

BACKEND = Backend("cpu", torch.device("cpu"), "the CPU")


# torch's CPU path for a dim that is not the last stores exp in fp16 before dividing: 1.142 ULP,
# beyond the "loosest known" bound of 1.004 ULP before that double rounding entered it.
EXP_STORED_IN_FP16 = Case((8, 1), 0, torch.float16, Values("underflow", 0.5),
                          layout=Layout((0, 1), (1, 1)), seed=0)


@given(case=cases(Capabilities(), "cpu"))
@example(case=EXP_STORED_IN_FP16)
def test_torch_as_a_kernel_of_unknown_construction_stays_within_the_bound(case):
    """torch.softmax given as ``module:function`` declares nothing: the unknown profile must hold it."""
    x, _ = case.make()
    kernel = resolve("examples.torch_kernels:softmax")
    if kernel.capabilities.refusal(x, case.dim) is None:
        verdict = judge_softmax(kernel, Call(x, case.dim, SOFTMAX, "cpu"), kernel.softmax(x, case.dim), replay=repr(case))
        assert verdict.ok, verdict.explain()


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((1, 0), 1), ((0, 5), 1), ((0, 5), 0), ((3, 0, 2), 1), ((0,), 0)])
def test_empty_rows_and_dims_are_judged_and_recorded(shape, dim, log):
    x = torch.empty(shape, dtype=torch.bfloat16)
    call = Call(x, dim, LOG_SOFTMAX if log else SOFTMAX, "cpu")
    verdict = judge_softmax(torch_softmax.SPEC, call, torch.log_softmax(x, dim) if log else torch.softmax(x, dim),
                            replay="empty")
    assert verdict.ok and verdict.kernel.summary()["elements"] == 0
    record = make_record("torch", BACKEND, Case(shape, dim, torch.bfloat16), verdict)
    assert record["worst"] is None and record["kernel_errors"]["max_ulp"] == 0
    assert categorize([record])["torch"]["log_softmax/bfloat16/normal" if log else "softmax/bfloat16/normal"]["elements"] == 0


# log_softmax = fl(x - max) - log S: an entry far below the max (-172, past where exp underflows)
# keeps the half-ulp rounding of its gap, which the bound had dropped with the lost term (CPU soak).
GAP_ROUNDED_PAST_UNDERFLOW = Case((31,), 0, torch.float32, Values("uniform", 100.0), layout=Layout((0,), (1,)),
                                  seed=0)

# A float64 log_softmax whose largest entry's result is a float64 subnormal (-1.4e-310; torch gives 0): its absolute
# error bound in ulps of that result passed float64's range, and an infinite bound failed torch (dev profile draw).
SUBNORMAL_LOG_SOFTMAX = Case((3,), 0, torch.float64, Values("dominant", 715.0), seed=0)


def test_a_log_softmax_result_past_the_formats_range_is_judged_exactly():
    """fp32 log_softmax of [3e38, -3e38, 0]: the second result is -inf; a kernel giving 0.0 there fails (the cap of
    the subnormal results' bounds leaves an infinite error's bound infinite)."""
    x = torch.tensor([[3e38, -3e38, 0.0]])
    call = Call(x, -1, LOG_SOFTMAX, "cpu")
    y = torch.log_softmax(x, -1)
    assert y[0, 1] == -math.inf
    y[0, 1] = 0.0
    assert not judge_softmax(resolve("torch.nn.functional:softmax"), call, y, replay="here").ok


@given(case=cases(Capabilities(), "cpu"))
@example(case=GAP_ROUNDED_PAST_UNDERFLOW)
@example(case=SUBNORMAL_LOG_SOFTMAX)
def test_torch_on_the_cpu_stays_within_the_bound(case):
    x, _ = case.make("cpu")
    for operation, function in ((SOFTMAX, torch.softmax), (LOG_SOFTMAX, torch.log_softmax)):
        call = Call(x, case.dim, operation, "cpu")
        errors = measure("torch", call, function(x, case.dim), correctly_rounded.softmax(call), torch_profile(call))
        assert not errors.violations.any(), f"{case!r}, {operation.name}: {errors.summary()}"


def perturbed(value: float, exact: float, steps: float, dtype: torch.dtype) -> float:
    """The value of dtype at least ``steps`` ulps of ``exact`` away from ``exact``, above it."""
    target = exact + steps * float(ulp(np.array(exact), format_of(dtype)))
    candidate = torch.tensor(target, dtype=torch.float64).to(dtype)
    if float(candidate) < target:
        candidate = torch.nextafter(candidate, torch.tensor(np.inf, dtype=dtype))
    return float(candidate)


@pytest.mark.parametrize("dtype", TESTED_DTYPES, ids=str)
def test_an_output_off_by_twice_the_bound_is_caught(dtype):
    x = (torch.randn(8, 300, generator=torch.Generator().manual_seed(4)) * 4).to(dtype)
    y = torch.softmax(x, -1)
    call = Call(x, -1, SOFTMAX, "cpu")
    oracle = correctly_rounded.softmax(call)
    profile = torch_profile(call)
    clean = measure("torch", call, y, oracle, profile)
    assert not clean.violations.any()
    row, col = np.unravel_index(int(np.argmax(clean.bound)), clean.bound.shape)
    bad = y.clone()
    bad[row, col] = perturbed(float(y[row, col]), oracle.exact[row, col], 2 * clean.bound[row, col], dtype)
    caught = measure("torch", call, bad, oracle, profile).violations
    assert caught[row, col] and caught.sum() == 1


def test_a_special_value_mismatch_is_named_for_what_it_is():
    """A zero where the row's NaN makes the result NaN: the failure says so and counts it, instead of
    'correctly rounded nan, inf ULP from exact, bound nan ULP'."""
    x = torch.tensor([[float("nan"), 1.0, 2.0], [0.0, 1.0, 2.0]])
    zeroed = resolve("torch.nn.functional:softmax")
    y = torch.softmax(x, -1).nan_to_num(0.0)
    text = judge_softmax(zeroed, Call(x, -1, SOFTMAX, "cpu"), y, replay="here").explain()
    assert "3 of 6 elements beyond the derived bound" in text and "3 of them special" in text
    assert "got 0.0, expected exactly nan: the row holds a NaN" in text
    assert "kernel: max 0 ULP, mean 0.000 over 3 result(s); torch on the same input: max 0 ULP, mean 0.000 over 3 " \
           "result(s) (of the 3 elements judged by a bound)" in text


def test_the_figures_of_a_failure_count_the_nan_apart_from_the_results_they_are_of():
    """An inf where the softmax is finite: "inf ULP from exact" for the worst element, and the statistics say they
    are of the results that have a distance, the inf counted apart (not a bare "max 0 ULP")."""
    x = torch.tensor([[1.0, 2.0, 3.0]])
    y = torch.softmax(x, -1)
    y[0, 1] = float("inf")
    text = judge_softmax(resolve("torch.nn.functional:softmax"), Call(x, -1, SOFTMAX, "cpu"), y, replay="here").explain()
    assert "got inf, correctly rounded" in text and "inf ULP from exact" in text
    assert "kernel: max 0 ULP, mean 0.000 over 2 result(s), and 1 NaN or inf where the oracle's result is finite" in text


@pytest.mark.parametrize("reduction", [Reduction("sequential"), Reduction("numpy-pairwise-block"),
                                       Reduction("triton-block", num_warps=4), Reduction("triton-block", 16)],
                         ids=lambda r: f"{r.kind}-{r.num_warps}")
def test_reduction_depths_never_exceed_the_order_free_bound(reduction):
    for n in [1, 2, 3, 7, 8, 9, 100, 128, 129, 781, 4096, 65537]:
        block = 1 << (n - 1).bit_length()
        assert 0 <= reduction.depth(n) <= block - 1
    assert Reduction("numpy-pairwise-block").depth(4096) < 30  # pairwise: logarithmic, not linear
    assert Reduction("triton-block", num_warps=4).depth(4096) == 4096 // 128 - 1 + 7


def test_a_split_row_adds_the_tree_over_its_spans_and_one_rescale():
    """A row split into spans (full_softmax's split path) rescales each span's sum once more, to
    the row's maximum, and adds the spans' sums as one more tile: 64 spans over 128 threads are
    6 more levels, 128 spans in numpy's pairwise sum 25 (8 accumulators of 16, then a tree)."""
    n = 4096 * 64
    whole = Reduction("triton-block", num_warps=4, block=4096)
    split = Reduction("triton-block", num_warps=4, block=4096, spans=64)
    assert split.depth(n) == whole.depth(n) + 6 and split.rescales(n) == whole.rescales(n) + 1
    pairwise = Reduction("numpy-pairwise-block", block=1024, chunks=2, spans=128)
    assert pairwise.depth(1 << 18) == Reduction("numpy-pairwise-block", block=1024, chunks=2).depth(1 << 18) + 25


def every_known_arithmetic() -> list[Arithmetic]:
    """Every arithmetic known on any backend: plain Triton's and torch's, and those the records declare, as a
    correct kernel may compute (without the reported bugs their own profiles keep: profiles.correct_construction)."""
    found = []
    for backend in profiles.PLAIN_ARITHMETICS:
        found += [candidate for candidate in map(profiles.correct_construction, known_arithmetics(backend))
                  if candidate not in found]
    return found


def test_the_loosest_arithmetic_admits_no_reported_bug():
    """log_softmax as x - fl(max + log(sum)) (pytorch issue 38839), on a row far above zero, is beyond the unknown
    kernel's bound, as it is within torch's own CUDA profile, which keeps torch's construction."""
    case = Case((4, 300), 1, torch.float32, Values("far-above", 1e6), seed=21)
    x, _ = case.make()
    peak = x.amax(-1, keepdim=True)
    y = x - (peak + torch.log(torch.exp(x - peak).sum(-1, keepdim=True)))
    call = Call(x, 1, LOG_SOFTMAX, "cuda")
    oracle = correctly_rounded.softmax(call)
    assert measure("unknown", call, y, oracle, unknown_profile(call)).violations.any()
    assert not measure("torch on CUDA", call, y, oracle,
                       PrecisionProfile(profiles.TORCH_CUDA, profiles.ORDER_FREE)).violations.any()


def reductions(n: int) -> list[Reduction]:
    """The reductions of this project's kernels for rows of n, one-pass and chunked ones included, one of each
    depth and number of rescales: a bound reads a reduction through these two only (``oracles.bounds.sum_terms``),
    so two reductions that agree on them give the same bound."""
    every = [profiles.ORDER_FREE, Reduction("numpy-pairwise-block"), Reduction("numpy-pairwise-block", block=256,
                                                                               chunks=-(-n // 256)),
             *(Reduction("triton-block", num_warps=w, rows=r) for w in (1, 4, 16, 32) for r in (1, 8)),
             Reduction("triton-block", num_warps=16, block=8192, chunks=-(-n // 8192))]
    return list({(reduction.depth(n), reduction.rescales(n)): reduction for reduction in every}.values())


def test_a_bound_reads_a_reduction_through_its_depth_and_rescales_only():
    """What lets the dominance test below try one reduction of each depth and number of rescales: a stand-in
    that has nothing else to read gives every bound bit for bit."""

    class DepthAndRescales:
        def __init__(self, reduction: Reduction):
            self.depth, self.rescales = reduction.depth, reduction.rescales

    x, _ = matrix(4, 300, torch.float32, VALUE_CLASSES["normal"].variants()[0], seed=7).make()
    rows, out = as_rows(x, 1).double().numpy(), format_of(torch.float32)
    for bound, operation in ((softmax_bound, SOFTMAX), (log_softmax_bound, LOG_SOFTMAX)):
        exact = correctly_rounded.softmax(Call(x, 1, operation, "cpu")).exact
        for arithmetic in every_known_arithmetic():
            for reduction in reductions(rows.shape[-1]):
                whole = bound(rows, exact, out, PrecisionProfile(arithmetic, reduction))
                stand_in = bound(rows, exact, out, PrecisionProfile(arithmetic, DepthAndRescales(reduction)))
                np.testing.assert_array_equal(stand_in, whole, err_msg=f"{arithmetic.name}, {reduction}")


# One input per dtype and value class.
VALUE_SWEEP = [matrix(4, 97, dtype, value_class.variants()[0], seed=100 + i) for i, (dtype, value_class) in enumerate(
    (d, c) for d in (torch.float32, torch.float16, torch.bfloat16, torch.float64) for c in VALUE_CLASSES.values())]


def catalog_and_sweep(test):
    for case in [c for c in CATALOG.values() if c.mask is None] + VALUE_SWEEP:
        test = example(case=case)(test)
    return test


@given(case=cases(Capabilities(), "cpu"))
@catalog_and_sweep
def test_the_unknown_profile_dominates_every_known_profile(case):
    """A kernel of unknown construction is judged by the loosest known arithmetic: its bound must be at
    least every profile's, element by element, or a correct kernel built like one of them fails."""
    x, _ = case.make()
    rows = as_rows(x, case.dim).double().numpy()
    unknown = unknown_profile(Call(x, case.dim, SOFTMAX, "cpu"))
    for out_dtype in {x.dtype, torch.float32} if x.dtype in (torch.float16, torch.bfloat16) else {x.dtype}:
        out = format_of(out_dtype)
        for log, bound in ((False, softmax_bound), (True, log_softmax_bound)):
            operation = Operation(name="log_softmax" if log else "softmax", log=log, out_dtype=out_dtype)
            exact = correctly_rounded.softmax(Call(x, case.dim, operation, "cpu")).exact
            loosest = bound(rows, exact, out, unknown)
            for arithmetic in every_known_arithmetic():
                for reduction in reductions(rows.shape[-1]):
                    other = bound(rows, exact, out, PrecisionProfile(arithmetic, reduction))
                    below = ~(loosest >= other) & ~(np.isnan(loosest) & np.isnan(other))
                    if below.any():
                        row, col = (int(i) for i in np.argwhere(below)[0])
                        raise AssertionError(
                            f"{'log_softmax' if log else 'softmax'} to {out}: unknown bound {loosest[row, col]!r} < "
                            f"{other[row, col]!r} of {arithmetic.name} with a {reduction} at row {row}, "
                            f"column {col} (input {rows[row, col]!r}); {case!r}")


@pytest.mark.parametrize("op,bound", [(SOFTMAX_BACKWARD, softmax_backward_bound),
                                      (LOG_SOFTMAX_BACKWARD, log_softmax_backward_bound)], ids=["softmax", "log_softmax"])
@given(case=cases(Capabilities(dtypes=frozenset(TESTED_DTYPES)), "cpu", specials=False, backward=True))
def test_the_unknown_profile_dominates_every_known_profile_in_the_backward(op, bound, case):
    """The same for the backwards: the loosest arithmetic, summed in any order, bounds every element at least as
    loosely as any known arithmetic and reduction would."""
    call = case.call(op, "cpu")
    y, grad = (as_rows(t, case.dim).double().numpy() for t in (call.x, call.grad))
    out = format_of(call.x.dtype)
    exact = oracle_of(call).exact
    loosest = bound(y, grad, exact, out, unknown_profile(call))
    for arithmetic in every_known_arithmetic():
        for reduction in reductions(y.shape[-1]):
            other = bound(y, grad, exact, out, PrecisionProfile(arithmetic, reduction))
            below = ~(loosest >= other)
            if below.any():
                row, col = (int(i) for i in np.argwhere(below)[0])
                raise AssertionError(f"{op.name}: unknown bound {loosest[row, col]!r} < {other[row, col]!r} of "
                                     f"{arithmetic.name} with a {reduction} at row {row}, column {col}; {case!r}")


@pytest.mark.parametrize("op", [SCALED_SOFTMAX, BIASED_SOFTMAX, CAUSAL_SOFTMAX], ids=lambda op: op.name)
@settings(max_examples=5)  # each example takes every known arithmetic, construction and reduction: 3 to 5 s
@given(data=st.data())
def test_the_unknown_profile_dominates_every_known_construction_of_scaled_logits(op, data):
    """The same for the scaled softmaxes: the loosest arithmetic with logits formed in any way (oracles/logits.py)
    bounds every element at least as loosely as a known arithmetic forming them in the input dtype, in fp32 or
    folded into exp2's argument, with fused multiply-adds or without."""
    capabilities = for_operation(Capabilities(dtypes=frozenset(TESTED_DTYPES)), op)
    case = data.draw(cases(capabilities, "cpu", scaled=True, biased=op.biased), label="case")
    call = case.call(op, "cpu")
    out = format_of(call.x.dtype)
    oracle = oracle_of(call)
    loosest = bounds(call, oracle, out, unknown_profile(call))
    for arithmetic in every_known_arithmetic():
        for construction, fused in itertools.product(CONSTRUCTIONS, (False, True)):
            declared = replace(arithmetic, scaled_logits=construction, fused_multiply_add=fused)
            for reduction in reductions(call.row_length):
                other = bounds(call, oracle, out, PrecisionProfile(declared, reduction))
                below = ~(loosest >= other) & ~(np.isnan(loosest) & np.isnan(other))
                if below.any():
                    row, col = (int(i) for i in np.argwhere(below)[0])
                    raise AssertionError(f"{op.name}: unknown bound {loosest[row, col]!r} < {other[row, col]!r} of "
                                         f"{arithmetic.name} forming its logits {construction!r} (fused: {fused}) "
                                         f"with a {reduction} at row {row}, column {col}; {case!r}")


def test_torch_cuda_log_softmax_rounding_of_max_plus_log_sum_is_bounded():
    """torch's CUDA log_softmax is x - fl(max + log(sum)), emulated here in fp32 on the CPU: this row
    erred by 0.59 ULP in the nightly H100 soak, beyond a bound without that rounding (0.56)."""
    case = Case((5, 4), 0, torch.float32, Values("normal", 100.0), layout=Layout((0, 1), (1, 1)), seed=0)
    x, _ = case.make()
    rows = as_rows(x, 0)
    peak = rows.amax(-1, keepdim=True)
    y = rows - (peak + torch.log(torch.exp(rows - peak).sum(-1, keepdim=True)))
    call = Call(x, 0, LOG_SOFTMAX, "cuda")
    oracle = correctly_rounded.softmax(call)
    profile = PrecisionProfile(profiles.TORCH_CUDA, profiles.ORDER_FREE)
    assert not measure("torch on CUDA", call, y.t(), oracle, profile).violations.any()


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_terms_that_float64_exp_flushes_to_zero_do_not_void_a_float64_profile(log):
    """Gaps in (-745.44, -745.13): past float64's exp, short of the lost-term threshold.  Their weight 0
    times an infinite relative error made the row's sum error NaN, and every bound of the row infinite
    (full_softmax's fp16 log_softmax on CUDA, a row of uniform * 1000, in the nightly H100 soak)."""
    x = torch.tensor([[0.0, -745.25, -745.3, -1.0, -3.5]])
    profile = PrecisionProfile(full_softmax.ARITHMETIC["cuda", "wide"], Reduction("triton-block", 8))
    exact = correctly_rounded.softmax(Call(x, -1, LOG_SOFTMAX if log else SOFTMAX, "cuda")).exact
    bound = (log_softmax_bound if log else softmax_bound)(x.double().numpy(), exact, format_of(x.dtype), profile)
    assert np.isfinite(bound[:, [0, 3, 4]]).all(), bound
