"""The suite's teeth: every planted bug is caught, and correct kernels raise no false alarm.

Each mutant of ``specs.mutants`` (one known bug in an otherwise correct
kernel) and each correct kernel runs through the property tests in a sub-run
of the suite under the ``mutation`` profile: the gate's examples, each test
stopping at its first failing example.  The mutants share sub-runs (FORWARD_SUB_RUNS of
the forward's mutants, one per other kernel of rowwise's), which workers run side by side: first each mutant's own
catching test alone (``specs.mutants.CAUGHT_FIRST_BY``: the test that caught it first when last measured), then, for
a mutant that test did not catch, every catching test, each mutant stopped at its first failed test
(``--maxfail-per-kernel 1``).  A mutant must be caught by an accuracy, bias or
metamorphic test (not only by a contract test: it shares its parent's
refusals); a correct kernel must fail none of those nor the contract tests.
The end of the run prints the mutation score and, for each mutant, the test
that caught it first.

A catch counts only where the test that made it passes on the mutant's parent:
a test that failed the parent too would have caught the parent's own bug, not
the planted one.  The registered parent, rowwise, runs every one of these tests
in the same run, on the same examples (the mutation profile draws the ci
profile's).  The other, the online softmax, runs in a sub-run the tests that
caught its mutants, with the contract tests; torch.softmax given as a
``module:function`` kernel runs all of them, a user's kernel file's path
through the suite.
"""

import re

import pytest

from harness.internals import payload
from specs import mutants
from specs.mutants import BUG_CLASSES
from specs.operations import OPERATIONS
from tests import outcomes

CATCHING_TESTS = ("tests/kernel/test_accuracy.py", "tests/kernel/test_statistical_bias.py", "tests/kernel/test_metamorphic.py")
CONTRACT_TESTS = ("tests/kernel/test_refusals.py",)
UNREGISTERED_PARENT = "specs.online:softmax"
USER_KERNEL = "torch.nn.functional:softmax"
# The forward mutants' sub-runs, by backend: a third of them each on the CPU's two cores; on a device of 16 cores,
# where a sub-run's mutants each compile their kernels, a sixth (one sub-run of a third took 299 s of an H100 gate).
FORWARD_SUB_RUNS = {"cpu": 3}
DEVICE_FORWARD_SUB_RUNS = 6
# The mutants of an operation's own kernel (a bug in rowwise's backward or scaled softmax, the forward correct) have
# a sub-run per kernel, of its operations' accuracy tests only: among the others each passed every forward test
# before one of its operations caught it.  A kernel is named by the Operation flag its operations share; their test
# ids read "[<kernel>-<operation>-<dtype>]".
OPERATION_TESTS = {kernel: "test_output_within_derived_bound and ("
                   + " or ".join(f"-{op.name}-" for op in OPERATIONS.values() if getattr(op, kernel)) + ")"
                   for kernel in ("backward", "scaled")}


# A forward mutant's other kernels are correct: the tests of their operations cannot catch it, and a mutant caught
# only by a bias or metamorphic test would run them all first.
FORWARD_ONLY = " and ".join(f"not {op.name}" for op in OPERATIONS.values() if op.backward or op.scaled)


# The first line of a failure's message that names an exception ("BeyondBound: ..."); a bare assert names none.
EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*): ", re.MULTILINE)
VERDICTS = ("AssertionError", "BeyondBound")  # what a test says of a kernel's numbers


def is_verdict(message: str) -> bool:
    """Whether a failure is the suite's verdict on a kernel's numbers: not a broken contract, a hang, or an error
    of the sub-run's own environment (a module it cannot import), which would catch every mutant alike."""
    named = EXCEPTION_LINE.search(message)
    return named is None or named.group(1).rsplit(".", 1)[-1] in VERDICTS


def failing_tests(run_pytest, kernels: list[str], outcomes_file, *args: str,
                  verdicts_only: bool = False) -> tuple[dict[str, list[str]], str]:
    """One sub-run judging ``kernels``: each kernel's failed tests (node ids), and the run's output.  With
    ``verdicts_only``, a failure that is not a verdict (:func:`is_verdict`) fails the sub-run instead."""
    chosen = [arg for kernel in kernels for arg in ("--kernel", kernel)]
    result = run_pytest(*args, *chosen, "--hypothesis-profile", "mutation", "--outcomes", str(outcomes_file), "-q")
    if result.returncode not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise AssertionError(f"the sub-run for {kernels} did not run its tests:\n{result.stdout[-3000:]}\n"
                             f"{result.stderr}")
    failed: dict[str, list[str]] = {kernel: [] for kernel in kernels}
    for case in outcomes.read(outcomes_file):
        if case.kind in ("failure", "error"):
            if verdicts_only and (case.kind == "error" or not is_verdict(case.message)):
                raise AssertionError(f"{case.node} failed with no verdict on the kernel's numbers, so it catches no "
                                     f"planted bug: {case.message[:1000]}")
            failed[next(k for k in kernels if f"[{k}-" in case.name or f"[{k}]" in case.name)].append(case.node)
    return failed, result.stdout


def kernel_of(mutant: str) -> str:
    """Which of its parent's kernels ``mutant`` plants its bug in: "forward", or a key of OPERATION_TESTS."""
    return getattr(getattr(mutants, mutant), "kernel", "forward")


@pytest.fixture
def sub_run_of(backend):
    """``sub_run_of(mutant)``: the sub-run judging ``mutant`` on this backend: one of the forward ones, 0 .. F - 1,
    or, for a mutant of an operation's own kernel, F + that kernel's place in OPERATION_TESTS."""
    forward_runs = FORWARD_SUB_RUNS.get(backend.name, DEVICE_FORWARD_SUB_RUNS)

    def sub_run(mutant: str) -> int:
        kernel = kernel_of(mutant)
        if kernel != "forward":
            return forward_runs + list(OPERATION_TESTS).index(kernel)
        return [m for m in sorted(BUG_CLASSES) if kernel_of(m) == "forward"].index(mutant) % forward_runs

    sub_run.count = forward_runs + len(OPERATION_TESTS)
    return sub_run


@pytest.fixture
def caught_in(once, run_pytest, sub_run_of):
    """``caught_in(k)``: the k-th sub-run's mutants judged once for the whole run, each stopped at its first failed
    test: the tests that failed, by mutant."""

    def caught(k: int) -> dict[str, list[str]]:
        def run(folder):
            chosen = [mutant for mutant in sorted(BUG_CLASSES) if sub_run_of(mutant) == k]
            first = failing_tests(run_pytest, [f"specs.mutants:{mutant}" for mutant in chosen],
                                  folder / "first.jsonl", *(mutants.first_catch(m) for m in chosen),
                                  verdicts_only=True)[0]
            survivors = [mutant for mutant in chosen if not first[f"specs.mutants:{mutant}"]]
            if not survivors:
                return first
            kernel = kernel_of(chosen[0])
            tests = (*CATCHING_TESTS, "-k", FORWARD_ONLY) if kernel == "forward" else (
                CATCHING_TESTS[0], "-k", OPERATION_TESTS[kernel])
            return {**first, **failing_tests(run_pytest, [f"specs.mutants:{mutant}" for mutant in survivors],
                                             folder / "outcomes.jsonl", *tests, "--maxfail-per-kernel", "1",
                                             verdicts_only=True)[0]}

        return once(f"mutants-{k}", run)[0]

    return caught


@pytest.fixture
def mutants_caught(caught_in, sub_run_of) -> dict[str, list[str]]:
    """Every mutant's failed tests, from all the sub-runs."""
    return {mutant: failed for k in range(sub_run_of.count) for mutant, failed in caught_in(k).items()}


@pytest.mark.parametrize("mutant", sorted(BUG_CLASSES))
def test_mutant_is_caught(mutant, caught_in, sub_run_of, request):
    caught_by = caught_in(sub_run_of(mutant))[f"specs.mutants:{mutant}"]
    payload.add(request.node, "mutation", {"mutant": mutant, "bug": BUG_CLASSES[mutant], "caught_by": caught_by})
    assert caught_by, (f"mutant {mutant} ({BUG_CLASSES[mutant]}) survived the suite: a hole to close (replay: "
                       f"python -m pytest {' '.join(CATCHING_TESTS)} --kernel specs.mutants:{mutant} "
                       "--hypothesis-profile mutation)")


@pytest.mark.last  # reads every sub-run
def test_each_mutant_is_stopped_at_its_first_failed_test(mutants_caught):
    assert all(len(failed) <= 1 for failed in mutants_caught.values()), mutants_caught


def as_parents(caught: dict[str, list[str]], parent: str) -> list[str]:
    """The tests that caught ``parent``'s mutants, as the parent's own (its name where the mutant's was)."""
    tests = set()
    for name, nodes in caught.items():
        mutant = getattr(mutants, name.split(":")[1])
        if mutant.parent == parent:
            tests.update(node.replace(f"[{name}-", f"[{parent}-").replace(f"[{name}]", f"[{parent}]") for node in nodes)
    return sorted(tests)


@pytest.mark.parametrize("message,verdict", [
    ("tests/kernel/test_accuracy.py::test_output_within_derived_bound[specs.mutants:m-softmax-float32]\n"
     "BeyondBound: specs.mutants:m: 3 of 8 elements beyond the derived bound", True),
    ("AssertionError: specs.mutants:m promises batch invariance: row 15 of Case(shape=(16, 100))", True),
    ("assert np.False_\n +  where np.False_ = <function all>(array([1]))", True),
    ("ModuleNotFoundError: No module named 'gmpy2'", False),
    ("tests/kernel/test_accuracy.py::test_output_within_derived_bound[specs.mutants:m-softmax-float32]\n"
     "harness.guard.calls.ContractBroken: specs.mutants:m softmax on shape=(2, 3): the kernel raised IndexError", False),
    ("harness.guard.calls.KernelHang: specs.mutants:m softmax on shape=(2, 3): the call did not return within 2 s", False),
])
def test_only_a_verdict_on_the_numbers_counts_as_a_catch(message, verdict):
    assert is_verdict(message) == verdict


def test_a_catch_is_checked_against_the_parent_as_the_same_test():
    caught = {"specs.mutants:online_neg_inf_head": ["t.py::test_a[specs.mutants:online_neg_inf_head-softmax-x]"],
              "specs.mutants:finite_fill": ["t.py::test_b[specs.mutants:finite_fill]"]}
    assert as_parents(caught, UNREGISTERED_PARENT) == [f"t.py::test_a[{UNREGISTERED_PARENT}-softmax-x]"]
    assert as_parents(caught, "rowwise") == ["t.py::test_b[rowwise]"]
    assert set(mutants.PARENTS.values()) == {"rowwise", UNREGISTERED_PARENT}  # rowwise is registered


def judged_correct(run_pytest, tmp_path, request, correct: str, *tests: str, scope: str) -> None:
    failed, output = failing_tests(run_pytest, [correct], tmp_path / "outcomes.jsonl", *tests, *CONTRACT_TESTS)
    failed = failed[correct]
    payload.add(request.node, "mutation", {"correct": correct, "scope": scope, "failed": failed})
    assert not failed, f"false alarm on {correct}: {failed}\n{output[-3000:]}"


@pytest.mark.last  # reads the sub-runs of its mutants
def test_the_unregistered_parent_passes_the_tests_that_caught_its_mutants(caught_in, sub_run_of, run_pytest, tmp_path,
                                                                           request):
    its_sub_runs = {sub_run_of(name) for name in BUG_CLASSES if getattr(mutants, name).parent == UNREGISTERED_PARENT}
    tests = as_parents({mutant: failed for k in its_sub_runs for mutant, failed in caught_in(k).items()},
                       UNREGISTERED_PARENT)
    judged_correct(run_pytest, tmp_path, request, UNREGISTERED_PARENT, *tests,
                   scope=f"in the {len(tests)} test(s) that caught its mutants")


def test_a_correct_kernel_given_as_module_function_raises_no_false_alarm(run_pytest, tmp_path, request):
    judged_correct(run_pytest, tmp_path, request, USER_KERNEL, *CATCHING_TESTS, scope="in every catching test")


def test_every_mutant_names_the_test_that_catches_it_first():
    assert set(mutants.CAUGHT_FIRST_BY) == set(BUG_CLASSES)
    assert mutants.first_catch("bf16_sum") == ("tests/kernel/test_accuracy.py::test_output_within_derived_bound"
                                               "[specs.mutants:bf16_sum-softmax-float32]")
