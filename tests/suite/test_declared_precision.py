"""A user kernel's declared precision model may tighten its bounds, never loosen them past what a kernel declaring
none is judged by: a profile looser than the loosest known arithmetic, summed in any order, is
refused in the test that asks for it (specs.registry.precision_model, oracles.profiles.looser_than)."""

import inspect
import math
from dataclasses import fields, replace

import numpy as np
import pytest
import torch

from kernels import torch_softmax
from harness.judging.judge import bounds, oracle_of
from oracles.bounds import Arithmetic, PrecisionProfile, Reduction
from oracles.call import Call
from oracles.formats import BF16, FP64, format_of
from oracles.profiles import (LOOSENING, ORDER_FREE, TORCH_CPU, TORCH_CUDA, TRITON_ASCEND, TRITON_NVIDIA,
                              correct_construction, looser_than, read_by)
from specs import online
from specs.operations import LOG_SOFTMAX, LOG_SOFTMAX_BACKWARD, OPERATIONS, SOFTMAX, SOFTMAX_BACKWARD
from specs.registry import known_arithmetics, looser_than_known, resolve
from specs.torch_softmax import torch_profile

HOSTILE = "tests.hostile.declares_loose_precision:softmax"
EXAMPLE = "examples/my_kernels.py:softmax"
DECLARED = "examples.torch_kernels:declared_softmax"  # torch declaring the model the suite judges torch by
NARROW = "tests.scenarios.narrow_tiles"  # an online softmax in tiles of 96
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


def test_a_kernel_hiding_a_bug_behind_a_loose_precision_fails_and_declared_models_of_known_arithmetic_pass(run_pytest,
                                                                                                            backend):
    """softmax(x / 2) declaring a division within 1e30 ulps passed every accuracy test; now its accuracy test fails
    with the refusal.  The example kernel, declaring plain Triton's arithmetic, passes, and so does torch declaring
    the model the suite judges torch by (``examples.torch_kernels:declared_softmax``; on CUDA the model keeps two
    of torch's reported bugs, which refused it in every test there) in its softmax, log_softmax and both backwards
    (fp32, for time), on this run's device."""
    result = run_pytest("tests/kernel/test_accuracy.py", "--kernel", HOSTILE, "--kernel", EXAMPLE, "--kernel", DECLARED,
                        "-k", "float32 and not scaled_ and not biased_ and not causal_", "--device", backend.name,
                        "--hypothesis-profile", "ci", "-q", "-rA")
    lines = result.stdout.splitlines()
    failed = [line.split(" - ")[0] for line in lines if line.startswith("FAILED")]
    accuracy = "tests/kernel/test_accuracy.py::test_output_within_derived_bound"
    assert failed == [f"FAILED {accuracy}[{HOSTILE}-softmax-float32]"], result.stdout[-3000:]
    said = ("div_ulps: declared 1e+30, loosest known 3", "judged by its own tolerance")
    assert all(words in result.stdout for words in said), result.stdout[-3000:]
    passed = {line.removeprefix("PASSED ") for line in lines if line.startswith("PASSED")}
    assert passed >= {f"{accuracy}[{kernel}-{op}-float32]" for kernel, ops in (
        (EXAMPLE, ("softmax",)), (DECLARED, ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward")))
                      for op in ops}, result.stdout[-3000:]


@pytest.mark.parametrize("fields", [{"rows": -10**12}, {"chunks": 0}, {"num_warps": 2.5}, {"block": 0},
                                    {"kind": "tree of my own"}])
def test_a_reduction_no_kernel_can_have_is_refused_where_it_is_made(fields):
    """A declared reduction of negative rows made a depth so negative that a bug 16880 ULP off passed, its million
    chunks taking the bounds to 100 times the value (found by a red team of the kernel process)."""
    with pytest.raises(ValueError, match=f"Reduction.{next(iter(fields))} must be"):
        Reduction(**{"kind": "triton-block", **fields})


def call_of(op, backend: str, logits: torch.Tensor | None = None, dtype: torch.dtype | None = None) -> Call:
    """A call of ``op`` on ``logits`` (4 rows of 8 normal values by default) in ``dtype`` (its first tested one): what
    a precision model is asked for.  A backward's x is its forward's output."""
    dtype = dtype or op.dtypes[0]
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0)) if logits is None else logits
    extra = {"mask": torch.ones(x.shape, dtype=torch.bool) if op.masked else None,
             "grad": torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).to(dtype) if op.backward else None,
             "scale": 0.125 if op.scaled else None, "bias": torch.zeros(x.shape, dtype=dtype) if op.biased else None}
    if op.backward:
        x = (torch.log_softmax if op.log else torch.softmax)(x.double(), -1)
    return Call(x.to(dtype), -1, op, backend, **extra)


@pytest.mark.parametrize("backend", ["cpu", "cuda", "npu"])
@pytest.mark.parametrize("op", list(OPERATIONS.values()), ids=list(OPERATIONS))
def test_the_model_the_suite_judges_torch_by_is_a_legal_declaration_in_every_operation_on_every_device(op, backend):
    """torch's CUDA model keeps two of torch's reported bugs (log_shift_rounded, backward_products_in_input): a kernel
    declaring it was refused in every test on CUDA, softmax's included."""
    call = call_of(op, backend)
    assert looser_than_known(torch_profile(call), call.row_length, op, backend) == []


@pytest.mark.parametrize("op,respect", [(SOFTMAX, []), (LOG_SOFTMAX, ["log_shift_rounded"]),
                                        (SOFTMAX_BACKWARD, ["backward_products_in_input"]), (LOG_SOFTMAX_BACKWARD, [])])
def test_a_reported_bug_in_a_declared_model_is_looser_only_in_the_operation_whose_bound_reads_it(op, respect):
    """On the CPU, where no kernel the suite judges computes so, torch's CUDA model is looser than the loosest
    correct one in the operations that read its bugs, and only there."""
    assert respects(looser_than_known(PrecisionProfile(TORCH_CUDA, ORDER_FREE), ROW, op, "cpu")) == respect


def loosened(arithmetic, name: str):
    """``arithmetic`` with its figure ``name`` loosened: a flag to its unsafe value, an error 64 times larger."""
    if name in LOOSENING:
        return replace(arithmetic, **{name: LOOSENING[name]})
    value = getattr(arithmetic, name)
    return replace(arithmetic, **{name: value * 64 + 1}) if isinstance(value, float) else None


@pytest.mark.parametrize("op", list(OPERATIONS.values()), ids=list(OPERATIONS))
def test_a_figure_an_operations_declaration_is_not_judged_in_moves_none_of_its_bounds(op):
    """read_by's table is sound: each figure it keeps from an operation, loosened, leaves every bound of that
    operation where it was (rows of normal logits with -inf entries, fp32 and a half dtype)."""
    unread = sorted({f.name for f in fields(Arithmetic)} - read_by(op))
    logits = torch.randn(6, 40, generator=torch.Generator().manual_seed(2)) * 4
    logits[0, :5] = -math.inf
    for dtype in op.dtypes[:2]:
        call = call_of(op, "cpu", logits, dtype)
        oracle = oracle_of(call)
        fmt = format_of(op.out_dtype or dtype)
        for base in (TORCH_CPU, TRITON_NVIDIA):
            before = bounds(call, oracle, fmt, PrecisionProfile(base, ORDER_FREE))
            for name in unread:
                moved = loosened(base, name)
                if moved is not None:
                    after = bounds(call, oracle, fmt, PrecisionProfile(moved, ORDER_FREE))
                    assert np.array_equal(before, after, equal_nan=True), (op.name, dtype, base.name, name)



def test_a_tile_narrower_than_the_narrowest_known_is_declarable_where_the_kernel_declares_it():
    """Tiles of 96 fold a row of 500 six times, the narrowest known construction's (128) four: refused alone, legal
    where the kernel declares 96 among its code-path boundaries (the suite draws its seams there)."""
    profile = PrecisionProfile(TORCH_CPU, Reduction("triton-block", block=96, chunks=6))
    assert respects(looser_than_known(profile, 500)) == ["reduction"]
    assert looser_than_known(profile, 500, tiles=(96,)) == []
    assert respects(looser_than_known(profile, 500, tiles=(128, 4096))) == ["reduction"]
    tiles_of_8 = PrecisionProfile(TORCH_CPU, Reduction("triton-block", block=8, chunks=63))
    assert respects(looser_than_known(tiles_of_8, 500, tiles=(96,))) == ["reduction"]  # folded more than declared


def test_a_kernel_in_tiles_of_96_declaring_them_passes_and_the_same_with_a_tile_bug_fails(run_pytest):
    """tests/scenarios/narrow_tiles.py: an online softmax in tiles of 96 (its sum not rescaled in the buggy one)."""
    result = run_pytest("tests/kernel/test_accuracy.py", "-k", "test_output_within and -softmax-float32",
                        "--kernel", f"{NARROW}:softmax", "--kernel", f"{NARROW}:softmax_unrescaled", "--device", "cpu",
                        "--hypothesis-profile", "ci", "-q", "-rA")
    accuracy = "tests/kernel/test_accuracy.py::test_output_within_derived_bound"
    assert f"PASSED {accuracy}[{NARROW}:softmax-softmax-float32]" in result.stdout, result.stdout[-3000:]
    assert f"FAILED {accuracy}[{NARROW}:softmax_unrescaled-softmax-float32]" in result.stdout, result.stdout[-3000:]
    assert "BeyondBound" in result.stdout and "looser than the loosest" not in result.stdout, result.stdout[-3000:]
