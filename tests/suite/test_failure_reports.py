"""A failure of every kind of test that judges a kernel is told on one screen (harness/plugins/failures.py): what failed, on
which input, and a replay line that reproduces it as printed; ``--tb=long`` brings pytest's whole traceback back.

One sub-run fails each kind of test with a planted bug, under the mutation profile (the gate's examples, each test
stopping at its first failing example): the planted bugs of the mutation catalog (specs/mutants.py), hostile kernels
(tests/hostile/) and the kernels of tests/scenarios/property_bugs.py.  Streams (CUDA) and large inputs (devices)
are not run on the CPU."""

import re
import subprocess
from pathlib import Path

import pytest

from harness.guard.replay_command import PREFIX, PYTHON
from harness.plugins.failures import HYPOTHESIS_NOTES_LEFT_OUT
from tests import subruns

ROOT = Path(__file__).resolve().parents[2]
SCREEN, COLUMNS = 25, 120  # what a failure may fill
# Each kind of test, the kernel that fails it, and its failing test's id.
KINDS = {
    "accuracy": ("specs.mutants:partial_row_max",
                 "test_accuracy.py::test_output_within_derived_bound[{}-softmax-float32]"),
    "special case": ("specs.mutants:all_neg_inf_uniform",
                     "test_special_cases.py::test_special_case_results_are_exact[{}--inf rows-softmax]"),
    "refusal": ("tests.hostile.out_of_capabilities:zeros_outside",
                "test_refusals.py::test_inputs_are_refused_exactly_outside_the_declared_capabilities[{}]"),
    "bias": ("specs.mutants:bf16_truncation",
             "test_statistical_bias.py::test_mean_signed_error_is_within_the_statistical_bound[{}]"),
    "bound tightness": ("specs.mutants:low_precision_reciprocal",
                        "test_bound_tightness.py::test_bound_is_tight_on_a_fixed_input_set[{}-torch.float16]"),
    "shift invariance": ("specs.mutants:no_max_subtraction",
                         "test_metamorphic.py::test_shift_invariance_is_bitwise[{}]"),
    "batch invariance": ("specs.mutants:row_count_dependent_sum",
                         "test_metamorphic.py::test_batch_invariance_is_bitwise[{}-2]"),
    "determinism": ("tests.hostile.cached_output:noisy",
                    "test_metamorphic.py::test_run_to_run_determinism_is_bitwise[{}]"),
    "permutation": ("specs.mutants:partial_row_max", "test_metamorphic.py::test_permutation_equivariance[{}]"),
    "unit interval and sum to one": (
        "specs.mutants:partial_row_max",
        "test_metamorphic.py::test_outputs_lie_in_the_unit_interval_and_rows_sum_to_one[{}]"),
    "monotonicity": ("tests.scenarios.property_bugs:extremes_swapped",
                     "test_metamorphic.py::test_monotonicity_within_rows[{}]"),
    "dim equivalence": ("tests.scenarios.property_bugs:half_off_the_last_dim",
                        "test_metamorphic.py::test_dim_equivalence[{}]"),
}


def node_of(kind: str) -> str:
    kernel, test = KINDS[kind]
    return "tests/kernel/" + test.format(kernel)


def failure_blocks(stdout: str) -> dict[str, list[str]]:
    """Each failure pytest told, by the name its header gives (the test's id past the file): its lines from that
    header to the next header or section."""
    blocks, lines = {}, None
    for line in stdout.splitlines():
        if re.fullmatch(r"_+ \S.* _+", line) and not re.fullmatch(r"(_ )+_?", line):  # a failure's header
            lines = blocks[line.strip("_ ")] = []
        elif re.fullmatch(r"=+( .* =+)?|-+ (?!Captured ).* -+", line):  # the next section (not a failure's own)
            lines = None
        if lines is not None:
            lines.append(line)
    return blocks


def screen_lines(lines: list[str]) -> int:
    return sum(max(1, -(-len(line) // COLUMNS)) for line in lines)


@pytest.fixture
def failed(once, run_pytest, backend) -> dict:
    """The sub-run, once for the whole run: its exit status and each failure's lines, by test id.  The planted
    kernels run under Triton's interpreter, which the devices' Triton (3.6 with numpy 2) cannot run for them:
    judged where the run's backend is the CPU (the reports are the same code on every backend)."""
    if backend.name != "cpu":
        pytest.skip(f"the planted kernels run under Triton's interpreter; this run's backend is {backend.name}")

    def make(folder):
        kernels = [arg for kernel in sorted({kernel for kernel, _ in KINDS.values()}) for arg in ("--kernel", kernel)]
        result = run_pytest(*map(node_of, KINDS), *kernels, "--device", "cpu", "--hypothesis-profile", "mutation")
        return {"returncode": result.returncode, "stdout": result.stdout, "blocks": failure_blocks(result.stdout)}

    return once("failure-reports", make)[0]


@pytest.mark.parametrize("kind", KINDS)
def test_a_failure_of_each_kind_fits_a_screen_and_names_its_kernel_its_input_and_its_replay(failed, kind):
    assert failed["returncode"] == pytest.ExitCode.TESTS_FAILED, failed["stdout"][-3000:]
    lines = failed["blocks"].get(node_of(kind).split("::")[1])
    assert lines, f"{node_of(kind)} did not fail as planted:\n" + failed["stdout"][-3000:]
    told = "\n".join(lines)
    assert screen_lines(lines) <= SCREEN, told
    assert KINDS[kind][0] in "\n".join(lines[2:]), told  # the message names the kernel
    assert "Case(" in told or "shape=(" in told, told  # and the input: its recipe, else how it was built
    assert lines[1] == node_of(kind) and "def test_" not in told, told
    assert not any(note in told for note in HYPOTHESIS_NOTES_LEFT_OUT), told
    assert sum(line.startswith(PREFIX) for line in lines) == 1, told


def replay_line(failed: dict, kind: str) -> str:
    lines = failed["blocks"][node_of(kind).split("::")[1]]
    return next(line for line in lines if line.startswith(PREFIX)).removeprefix(PREFIX)


def run_as_printed(commands: list[str]) -> list[subprocess.CompletedProcess]:
    """Printed commands, each run by a shell from the checkout's root with nothing inherited that it does not say,
    side by side."""
    env = subruns.environment(pythonpath=False)
    started = [subprocess.Popen(command, shell=True, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True) for command in commands]
    try:
        return [subprocess.CompletedProcess(p.args, p.wait(timeout=300), p.stdout.read(), "") for p in started]
    finally:
        for process in started:
            process.kill()  # none outlives its test
            process.stdout.close()


def test_the_replay_lines_reproduce_their_failures_as_printed_and_pass_once_the_bug_is_gone(failed):
    """The three forms: the accuracy judge's one step, pytest on a drawn example (its blob), pytest on a fixed input
    (asked for pytest's whole traceback)."""
    accuracy, permutation, special = (replay_line(failed, kind) for kind in ("accuracy", "permutation", "special case"))
    assert accuracy.startswith(f"{PYTHON} -m harness.replay --kernel specs.mutants:partial_row_max ")
    assert permutation.startswith(f"{PYTHON} -m pytest ") and " --replay-example " in permutation
    fixed = permutation.replace("specs.mutants:partial_row_max", "rowwise")  # the mutants' parent, correct
    runs = run_as_printed([accuracy, permutation, fixed, special + " --tb=long"])
    for run in runs[:2] + runs[3:]:
        assert run.returncode == 1, run.args + "\n" + run.stdout[-3000:]
    assert "beyond the derived bound" in runs[0].stdout and "BeyondBound" in runs[1].stdout, runs[1].stdout[-3000:]
    assert runs[2].returncode == 0 and "1 passed" in runs[2].stdout, runs[2].stdout[-3000:]
    assert "def test_special_case_results_are_exact(" in runs[3].stdout, runs[3].stdout[-3000:]
