"""The suite's teeth: every planted bug is caught, and correct kernels raise no false alarm.

Each mutant of ``kernels.mutants`` (one known bug in an otherwise correct
kernel) and each correct kernel runs through the property tests in a sub-run
of the suite under the same ``mutation`` profile.  A mutant must fail at least
one test; a correct kernel must fail none.  The end of the run prints the
mutation score and, for each mutant, the tests that caught it.
"""

import xml.etree.ElementTree as ElementTree

import pytest

from harness import payload
from kernels.mutants import BUG_CLASSES

PROPERTY_TESTS = ("tests/test_accuracy.py", "tests/test_metamorphic.py", "tests/test_contract.py")
CORRECT_KERNELS = ("fused_softmax", "rowwise", "torch")


def failing_tests(run_pytest, kernel: str, junit) -> tuple[list[str], str]:
    result = run_pytest(*PROPERTY_TESTS, "--kernel", kernel, "--hypothesis-profile", "mutation",
                        "--junitxml", str(junit), "-q")
    if result.returncode not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise AssertionError(f"the sub-run for {kernel} did not run its tests:\n{result.stdout[-3000:]}\n{result.stderr}")
    failed = [case.get("name") for case in ElementTree.parse(junit).getroot().iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]
    return failed, result.stdout


@pytest.mark.parametrize("mutant", sorted(BUG_CLASSES))
def test_mutant_is_caught(mutant, run_pytest, tmp_path, request):
    caught_by, output = failing_tests(run_pytest, f"kernels.mutants:{mutant}", tmp_path / "junit.xml")
    payload.add(request.node, "mutation", {"mutant": mutant, "bug": BUG_CLASSES[mutant], "caught_by": caught_by})
    assert caught_by, f"mutant {mutant} ({BUG_CLASSES[mutant]}) survived the suite: a hole to close\n{output[-2000:]}"


@pytest.mark.parametrize("correct", CORRECT_KERNELS)
def test_correct_kernel_raises_no_false_alarm(correct, run_pytest, tmp_path, request):
    failed, output = failing_tests(run_pytest, correct, tmp_path / "junit.xml")
    payload.add(request.node, "mutation", {"correct": correct, "failed": failed})
    assert not failed, f"false alarm on {correct}: {failed}\n{output[-3000:]}"
