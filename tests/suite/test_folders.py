"""The tests live in two folders by what they judge: ``tests/kernel/`` holds the tests that judge a kernel (they take
the ``kernel`` fixture, and a run with ``--kernel`` selects them), ``tests/suite/`` the suite's tests of itself."""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def functions_of(folder: str) -> dict[str, list[str]]:
    """Each test function of the folder's test files, with its parameters."""
    found = {}
    for path in sorted((TESTS / folder).glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found[f"{path.name}::{node.name}"] = [a.arg for a in node.args.args]
    return found


@pytest.mark.parametrize("folder,judges_a_kernel", [("kernel", True), ("suite", False)])
def test_a_test_lives_in_the_folder_of_what_it_judges(folder, judges_a_kernel):
    functions = functions_of(folder)
    assert functions, f"no tests found in tests/{folder}"
    misplaced = [name for name, parameters in functions.items() if ("kernel" in parameters) != judges_a_kernel]
    assert not misplaced, f"in tests/{folder}, but {'not ' if judges_a_kernel else ''}taking the kernel fixture: {misplaced}"


def test_no_test_file_lies_outside_the_two_folders():
    assert not sorted(p.name for p in TESTS.glob("test_*.py"))
