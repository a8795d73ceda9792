"""A user kernel's declared precision model may tighten its bounds, never loosen them past what a kernel declaring
none is judged by: a profile looser than the loosest known arithmetic, summed in any order, is
refused in the test that asks for it (specs.registry.precision_model, oracles.profiles.looser_than)."""

import inspect
from dataclasses import replace

import pytest
import torch

from kernels import torch_softmax
from oracles.bounds import PrecisionProfile, Reduction
from oracles.call import Call
from oracles.formats import BF16, FP64
from oracles.profiles import ORDER_FREE, TORCH_CPU, TORCH_CUDA, TRITON_ASCEND, correct_construction, looser_than
from specs import online
from specs.operations import SOFTMAX
from specs.registry import known_arithmetics, looser_than_known, resolve

HOSTILE = "tests.hostile.declares_loose_precision:softmax"
EXAMPLE = "examples/my_kernels.py:softmax"
ROW = 4096  # a row length for the arithmetic's checks: an order-free sum is never looser than itself


def respects(looser: list[str]) -> list[str]:
    """The names of the respects ``looser`` tells, each before its colon."""
    return [said.partition(":")[0] for said in looser]


@pytest.mark.parametrize("backend", ["cpu", "cuda", "npu"])
def test_every_known_arithmetic_but_its_reported_bugs_is_no_looser_than_the_loosest_known(backend):
    for arithmetic in known_arithmetics(backend):
        assert looser_than_known(PrecisionProfile(correct_construction(arithmetic), ORDER_FREE), ROW) == [], \
            arithmetic.name


def test_a_division_declared_within_1e30_ulps_is_looser_in_div_ulps_alone_with_both_values():
    loose = replace(TORCH_CPU, div_ulps=1e30)
    assert looser_than_known(PrecisionProfile(loose, ORDER_FREE), ROW) == ["div_ulps: declared 1e+30, loosest known 3"]


def test_a_reported_bug_kept_in_a_profile_is_looser_than_the_loosest_known_which_never_takes_one():
    assert respects(looser_than_known(PrecisionProfile(TORCH_CUDA, ORDER_FREE), ROW)) == [
        "log_shift_rounded", "backward_products_in_input"]


@pytest.mark.parametrize("change,respect", [
    ({"exp_ulps": 5.0}, "exp_ulps"),
    ({"exp_ulps_per_gap": 3.0}, "exp_ulps_per_gap"),
    ({"exp_bias_ulps": float("nan")}, "exp_bias_ulps"),  # no number: no bound holds the kernel to anything
    ({"exp_bias_per_gap": 1.0}, "exp_bias_per_gap"),
    ({"div_bias_ulps": 4.0}, "div_bias_ulps"),
    ({"log_ulps": 5.0}, "log_ulps"),
    ({"log_abs": 1e-3}, "log_abs"),
    ({"log_result_ulps": 2.0}, "log_result_ulps"),
    ({"downcast_ulps": {torch.float16: 2.0}}, "downcast_ulps[torch.float16]"),
    ({"downcast_ulps": {torch.float32: 1.5}, "compute": FP64}, "downcast_ulps[torch.float32]"),
    ({"subnormal_downcast_unreliable": frozenset({torch.float16})}, "subnormal_downcast_unreliable"),
    ({"subnormal_upcast_unreliable": frozenset({torch.float16})}, "subnormal_upcast_unreliable"),
])
def test_each_figure_beyond_the_loosest_known_is_named(change, respect):
    assert respects(looser_than_known(PrecisionProfile(replace(TORCH_CPU, **change), ORDER_FREE), ROW)) == [respect]


def test_a_coarser_compute_format_is_looser_and_a_float64_one_is_compared_in_ulps_of_float32():
    assert "compute" in respects(looser_than_known(PrecisionProfile(replace(TORCH_CPU, compute=BF16), ORDER_FREE), ROW))
    wide = replace(TORCH_CPU, compute=FP64, exp_ulps=1e6)  # 0.002 ulp of fp32
    assert looser_than_known(PrecisionProfile(wide, ORDER_FREE), ROW) == []
    assert looser_than_known(PrecisionProfile(replace(wide, exp_ulps=1e12), ORDER_FREE), ROW) == \
        ["exp_ulps: declared 1862.65 (in ulps of float32), loosest known 4"]


def test_a_flag_is_looser_where_it_takes_the_unsafe_value_the_known_arithmetic_does_not():
    """The loosest known already flushes and claims no exact exp(0); against torch's CPU arithmetic both are looser."""
    assert {"flushes_subnormals", "exp_of_zero_exact"} <= set(respects(looser_than(TRITON_ASCEND, TORCH_CPU)))


def test_an_online_sum_rescaling_more_than_the_narrowest_known_tiles_is_looser_and_the_online_kernels_is_not():
    assert respects(looser_than_known(PrecisionProfile(TORCH_CPU, Reduction("triton-block", chunks=10**9)), ROW)) \
        == ["reduction"]
    tiles_of_64 = PrecisionProfile(TORCH_CPU, Reduction("triton-block", block=64, chunks=ROW // 64))
    assert looser_than_known(tiles_of_64, ROW) == [
        f"reduction: {tiles_of_64.reduction} on rows of {ROW}: rescales 63, beyond the 32 of a sum in any order "
        "folding tiles of 128"]
    for n in (1, 255, 256, 257, 1000, 4097, 1 << 20):  # one tile, two, many (tiles of 256)
        for backend in ("cpu", "cuda"):
            profile = online.precision(Call(torch.zeros(1, n), -1, SOFTMAX, backend))
            assert looser_than_known(profile, n) == [], (n, backend)


def test_a_user_precision_model_is_refused_at_its_call_when_loose_and_kept_behind_the_check(monkeypatch):
    def softmax(x, dim):
        return torch.softmax(x, dim)

    call = Call(torch.zeros(2, 8), -1, SOFTMAX, "cpu")
    softmax.precision = precision = lambda call: PrecisionProfile(replace(TORCH_CPU, div_ulps=1e30), ORDER_FREE)
    monkeypatch.setattr(torch_softmax, "loose_precision", softmax, raising=False)
    model = resolve("kernels.torch_softmax:loose_precision").precision
    assert inspect.unwrap(model) is precision
    with pytest.raises(ValueError, match=r"'kernels.torch_softmax:loose_precision'.*div_ulps: declared 1e\+30, "
                                         r"loosest known 3.*judged by its own tolerance"):
        model(call)
    softmax.precision = lambda call: "fp32"
    with pytest.raises(TypeError, match=r"must return an oracles.bounds.PrecisionProfile.*got 'fp32'"):
        resolve("kernels.torch_softmax:loose_precision").precision(call)
    softmax.precision = lambda call: PrecisionProfile(TORCH_CPU, ORDER_FREE)
    assert resolve("kernels.torch_softmax:loose_precision").precision(call) == PrecisionProfile(TORCH_CPU, ORDER_FREE)


def test_a_kernel_hiding_a_bug_behind_a_loose_precision_fails_and_the_examples_declared_model_passes(run_pytest):
    """softmax(x / 2) declaring a division within 1e30 ulps passed every accuracy test; now its accuracy test fails
    with the refusal.  The example kernel, declaring plain Triton's arithmetic, passes (fp32 softmax only, for
    time)."""
    result = run_pytest("tests/kernel/test_accuracy.py", "--kernel", HOSTILE, "--kernel", EXAMPLE,
                        "-k", "softmax-float32 and not scaled_softmax and not causal_softmax", "--device", "cpu",
                        "--hypothesis-profile", "ci", "-q")
    failed = [line.split(" - ")[0] for line in result.stdout.splitlines() if line.startswith("FAILED")]
    accuracy = f"tests/kernel/test_accuracy.py::test_output_within_derived_bound[{HOSTILE}-softmax-float32]"
    assert failed == [f"FAILED {accuracy}"], result.stdout[-3000:]
    said = ("div_ulps: declared 1e+30, loosest known 3", "judged by its own tolerance", "1 failed, 1 passed")
    assert all(words in result.stdout for words in said), result.stdout[-3000:]


@pytest.mark.parametrize("fields", [{"rows": -10**12}, {"chunks": 0}, {"num_warps": 2.5}, {"block": 0},
                                    {"kind": "tree of my own"}])
def test_a_reduction_no_kernel_can_have_is_refused_where_it_is_made(fields):
    """A declared reduction of negative rows made a depth so negative that a bug 16880 ULP off passed, its million
    chunks taking the bounds to 100 times the value (found by a red team of the kernel process)."""
    with pytest.raises(ValueError, match=f"Reduction.{next(iter(fields))} must be"):
        Reduction(**{"kind": "triton-block", **fields})
