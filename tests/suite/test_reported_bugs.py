"""Bugs reported in public projects (specs/reported_bugs.py) are caught by the gate's draws, on the path they live on.

Each reported bug, reproduced as a kernel declaring what the reported kernel handled, runs through the tests that
judge a kernel's numbers in sub-runs on the CPU, of the gate's pinned draws (the ``mutation`` profile: the ``ci`` profile's
examples, a test stopping at its first failing one), each kernel stopped at its first failed test.  It must fail one
with a verdict on its numbers (not a crash: ``test_mutation.is_verdict``), on the operation the bug lives on.  Its
control, the same algorithm with the bug fixed, then runs the test that caught the bug and must pass it: the catch
was the bug's, not the algorithm's or the suite's.  docs/reported-bugs.md has the table: each bug, its report, the
test that catches it and the seconds to that failure.
"""

import pytest

from harness.internals import payload
from specs.reported_bugs import BUGS, BY_NAME
from tests.suite.test_mutation import failing_tests

CATCHING_TESTS = ("tests/kernel/test_accuracy.py", "tests/kernel/test_special_cases.py",
                  "tests/kernel/test_statistical_bias.py", "tests/kernel/test_metamorphic.py")
ON_THE_CPU = ("--device", "cpu")  # the reproductions are CPU-scale torch code (offsets wrap at 2^14), on any machine
NAMES = [record.name for record in BUGS]
SUB_RUNS = sorted({record.operation for record in BUGS})  # one per operation, side by side on the workers


def selector(name: str, fixed: bool = False) -> str:
    return f"specs.reported_bugs:{name}{'_fixed' if fixed else ''}"


def sub_run_of(name: str) -> str:
    return BY_NAME[name].operation


def judged_by(operation: str) -> tuple[str, ...]:
    """What a sub-run judges: every catching test for softmax's bugs; for another operation's (whose kernels carry
    a correct plain softmax), the tests of that operation alone."""
    return (*ON_THE_CPU, *CATCHING_TESTS, *(() if operation == "softmax" else ("-k", operation)))


@pytest.fixture
def caught_in(once, run_pytest):
    """``caught_in(operation)``: that operation's bugs judged once for the whole run: the tests each failed first."""

    def caught(operation: str) -> dict[str, list[str]]:
        def run(folder):
            kernels = [selector(name) for name in NAMES if sub_run_of(name) == operation]
            return failing_tests(run_pytest, kernels, folder / "outcomes.jsonl", *judged_by(operation),
                                 "--maxfail-per-kernel", "1", verdicts_only=True)[0]

        return once(f"reported-bugs-{operation}", run)[0]

    return caught


def on_its_path(node: str, operation: str) -> bool:
    """Whether a failed test judged the bug's operation: an accuracy or special-case test names the operation in
    its id; the bias and property tests judge softmax."""
    if "test_accuracy.py" in node or "test_special_cases.py" in node:
        return f"-{operation}-" in node or node.endswith(f"-{operation}]")
    return operation == "softmax"


@pytest.mark.parametrize("name", NAMES)
def test_a_reported_bug_is_caught_on_its_path(name, caught_in, request):
    record = BY_NAME[name]
    caught_by = caught_in(sub_run_of(name))[selector(name)]
    payload.add(request.node, "reported_bug", {"bug": name, "source": record.source, "caught_by": caught_by})
    assert caught_by, (f"{name} ({record.source}: {record.what}) passed the gate's draws: a hole to close (replay: "
                       f"python -m pytest {' '.join(CATCHING_TESTS)} --kernel {selector(name)} --hypothesis-profile "
                       f"mutation)")
    assert all(on_its_path(node, record.operation) for node in caught_by), (record.operation, caught_by)


@pytest.mark.last  # reads every operation's sub-run
def test_each_control_passes_the_test_that_caught_its_bug(caught_in, run_pytest, tmp_path):
    caught = {name: nodes for k in SUB_RUNS for name, nodes in
              ((selector_name.split(":")[1], nodes) for selector_name, nodes in caught_in(k).items())}
    tests = sorted({node.replace(f"[{selector(name)}-", f"[{selector(name, fixed=True)}-")
                        .replace(f"[{selector(name)}]", f"[{selector(name, fixed=True)}]")
                    for name, nodes in caught.items() for node in nodes})
    controls = [selector(name, fixed=True) for name, nodes in caught.items() if nodes]
    failed, output = failing_tests(run_pytest, controls, tmp_path / "outcomes.jsonl", *ON_THE_CPU, *tests)
    assert not any(failed.values()), f"false alarms on the controls: {failed}\n{output[-3000:]}"
    assert f"{len(tests)} passed" in output, output[-3000:]  # each ran, none skipped
