"""The inputs a kernel test builds itself (not drawn) lie inside the kernel's declared capabilities: correct kernels
that declare fp16 and bf16 only, and rank 2, or rank 3 with rows of at most 32 (``tests/scenarios/half_only_masked.py``),
pass the tests of ``tests/kernel``; the tests that build fixed inputs judge them, and a test skips only for what
the kernel does not declare.

The accuracy tests over (operation, dtype) are left out, for time (half the sub-run): their inputs are drawn
inside the capabilities, and their catalog entries outside them are expected refused, by design."""

import pytest

from specs.operations import OPERATIONS
from tests import outcomes as sub_run

SCENARIO = "tests/scenarios/half_only_masked.py"
KERNELS = ("softmax", "softmax_rank_3")
# The tests that build fixed inputs, each with the ids (after the kernel's) that must pass for both kernels.
FIXED = {
    "test_masked_rows_keeping_only_nan_are_nan_on_every_path": {""},
    "test_special_case_results_are_exact": {f"-{rule}-{op}" for op in ("softmax", "masked_softmax")
                                            for rule in ("nan", "+inf", "-inf rows", "-inf")},
    "test_bound_is_tight_on_a_fixed_input_set": {"-torch.float16", "-torch.bfloat16"},
    "test_mean_signed_error_is_within_the_statistical_bound": {""},
    "test_batch_invariance_is_bitwise": {f"-{batch}" for batch in (1, 2, 5, 64)},
}
# What a skip of these kernels may name: an operation, dtype or dim they do not declare, or a device not in this run.
UNDECLARED = ("declares no float32", "declares no float64", "does not declare torch.float32",
              *(f"declares no {op.what}" for op in OPERATIONS.values() if op.flags),
              "normalises the last dim only", "CUDA streams", "device only", "may refuse with any exception")


def test_kernels_declaring_half_dtypes_and_one_rank_pass_every_kernel_test_and_are_judged_by_the_fixed_ones(
        run_pytest, tmp_path):
    kernels = [arg for name in KERNELS for arg in ("--kernel", f"{SCENARIO}:{name}")]
    result = run_pytest("tests/kernel", "-k", "not test_output_within_derived_bound", "--device", "cpu",
                        "--hypothesis-profile", "ci", *kernels, "--outcomes", str(tmp_path / "outcomes.jsonl"), "-q")
    # test name with its parameters -> "passed", or "<failure|error|skipped>: what it said"
    outcomes = {case.name: case.said[:300] for case in sub_run.read(tmp_path / "outcomes.jsonl")}
    wrong = {name: said for name, said in outcomes.items() if said.startswith(("failure", "error"))}
    assert not wrong and result.returncode == pytest.ExitCode.OK, (wrong, result.stdout[-3000:])
    for kernel in KERNELS:
        for test, ids in FIXED.items():
            for suffix in ids:
                name = f"{test}[{SCENARIO}:{kernel}{suffix}]"
                assert outcomes.get(name) == "passed", f"{name}: {outcomes.get(name, 'not run')}"
    skipped = {name: said for name, said in outcomes.items()
               if said.startswith("skipped") and not any(reason in said for reason in UNDECLARED)}
    assert not skipped, f"skipped for something the kernels declare: {skipped}"
