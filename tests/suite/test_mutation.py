"""The suite's teeth: every planted bug is caught, and correct kernels raise no false alarm.

Each mutant of ``specs.mutants`` (one known bug in an otherwise correct
kernel) and each correct kernel runs through the property tests in a sub-run
of the suite under the ``mutation`` profile: the gate's examples, each test
stopping at its first failing example.  The mutants share one sub-run, each
stopped at its first failed test (``--maxfail-per-kernel 1``).  A mutant must be caught by an accuracy, bias or
metamorphic test (not only by a contract test: it shares its parent's
refusals); a correct kernel must fail none of those nor the contract tests.
The end of the run prints the mutation score and, for each mutant, the test
that caught it first.  The mutants' parents and torch.softmax given as a
``module:function`` kernel are the correct kernels here; the registered
kernels' own tests in the same run (rowwise among them) are theirs.
"""

import xml.etree.ElementTree as ElementTree

import pytest

from harness import payload
from specs.mutants import BUG_CLASSES

CATCHING_TESTS = ("tests/kernel/test_accuracy.py", "tests/kernel/test_statistical_bias.py", "tests/kernel/test_metamorphic.py")
# rowwise, the other mutants' parent, is a registered kernel: its own tests in the same run are these tests on the
# same examples (the mutation profile draws the ci profile's).
CORRECT_KERNELS = ("specs.online:softmax", "torch.nn.functional:softmax")


def failing_tests(run_pytest, kernels: list[str], junit, *args: str) -> tuple[dict[str, list[str]], str]:
    """One sub-run judging ``kernels``: each kernel's failed tests, and the run's output."""
    chosen = [arg for kernel in kernels for arg in ("--kernel", kernel)]
    result = run_pytest(*args, *chosen, "--hypothesis-profile", "mutation", "--junitxml", str(junit), "-q")
    if result.returncode not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise AssertionError(f"the sub-run for {kernels} did not run its tests:\n{result.stdout[-3000:]}\n"
                             f"{result.stderr}")
    failed: dict[str, list[str]] = {kernel: [] for kernel in kernels}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            name = case.get("name")
            failed[next(k for k in kernels if f"[{k}-" in name or f"[{k}]" in name)].append(name)
    return failed, result.stdout


@pytest.fixture
def mutants_caught(once, run_pytest) -> dict[str, list[str]]:
    """Every mutant judged in one sub-run, each stopped at its first failed test: the tests that failed, by mutant."""

    def run(folder):
        kernels = [f"specs.mutants:{mutant}" for mutant in sorted(BUG_CLASSES)]
        return failing_tests(run_pytest, kernels, folder / "junit.xml", *CATCHING_TESTS, "--maxfail-per-kernel", "1")[0]

    return once("mutants", run)[0]


@pytest.mark.parametrize("mutant", sorted(BUG_CLASSES))
def test_mutant_is_caught(mutant, mutants_caught, request):
    caught_by = mutants_caught[f"specs.mutants:{mutant}"]
    payload.add(request.node, "mutation", {"mutant": mutant, "bug": BUG_CLASSES[mutant], "caught_by": caught_by})
    assert caught_by, (f"mutant {mutant} ({BUG_CLASSES[mutant]}) survived the suite: a hole to close (replay: "
                       f"python -m pytest {' '.join(CATCHING_TESTS)} --kernel specs.mutants:{mutant} "
                       "--hypothesis-profile mutation)")


def test_each_mutant_is_stopped_at_its_first_failed_test(mutants_caught):
    assert all(len(failed) <= 1 for failed in mutants_caught.values()), mutants_caught


@pytest.mark.parametrize("correct", CORRECT_KERNELS)
def test_correct_kernel_raises_no_false_alarm(correct, run_pytest, tmp_path, request):
    failed, output = failing_tests(run_pytest, [correct], tmp_path / "junit.xml", *CATCHING_TESTS,
                                   "tests/kernel/test_refusals.py")
    failed = failed[correct]
    payload.add(request.node, "mutation", {"correct": correct, "failed": failed})
    assert not failed, f"false alarm on {correct}: {failed}\n{output[-3000:]}"
