"""The suite's teeth: every planted bug is caught, and correct kernels raise no false alarm.

Each mutant of ``kernels.mutants`` (one known bug in an otherwise correct
kernel) and each correct kernel runs through the property tests in a sub-run
of the suite under the ``mutation`` profile: the gate's examples, stopping at
the first failure.  A mutant must be caught by an accuracy, bias or
metamorphic test (not only by a contract test: it shares its parent's
refusals); a correct kernel must fail none of those nor the contract tests.
The end of the run prints the mutation score and, for each mutant, the test
that caught it first.  The mutants' parents and torch.softmax given as a
``module:function`` kernel are the correct kernels here; the registered
kernels' own tests in the same run are theirs.
"""

import xml.etree.ElementTree as ElementTree

import pytest

from harness import payload
from kernels.mutants import BUG_CLASSES

CATCHING_TESTS = ("tests/test_accuracy.py", "tests/test_bias.py", "tests/test_metamorphic.py")
CORRECT_KERNELS = ("rowwise", "kernels.online:softmax", "torch.nn.functional:softmax")


def failing_tests(run_pytest, kernel: str, junit, *args: str) -> tuple[list[str], str]:
    result = run_pytest(*args, "--kernel", kernel, "--hypothesis-profile", "mutation", "--junitxml", str(junit), "-q")
    if result.returncode not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise AssertionError(f"the sub-run for {kernel} did not run its tests:\n{result.stdout[-3000:]}\n{result.stderr}")
    failed = [case.get("name") for case in ElementTree.parse(junit).getroot().iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]
    return failed, result.stdout


@pytest.mark.parametrize("mutant", sorted(BUG_CLASSES))
def test_mutant_is_caught(mutant, run_pytest, tmp_path, request):
    caught_by, output = failing_tests(run_pytest, f"kernels.mutants:{mutant}", tmp_path / "junit.xml",
                                      *CATCHING_TESTS, "--maxfail=1")
    payload.add(request.node, "mutation", {"mutant": mutant, "bug": BUG_CLASSES[mutant], "caught_by": caught_by})
    assert caught_by, f"mutant {mutant} ({BUG_CLASSES[mutant]}) survived the suite: a hole to close\n{output[-2000:]}"


@pytest.mark.parametrize("correct", CORRECT_KERNELS)
def test_correct_kernel_raises_no_false_alarm(correct, run_pytest, tmp_path, request):
    failed, output = failing_tests(run_pytest, correct, tmp_path / "junit.xml", *CATCHING_TESTS,
                                   "tests/test_contract.py")
    payload.add(request.node, "mutation", {"correct": correct, "failed": failed})
    assert not failed, f"false alarm on {correct}: {failed}\n{output[-3000:]}"
