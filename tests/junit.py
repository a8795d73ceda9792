"""What a sub-run's JUnit XML (pytest's ``--junitxml``) says of each test it ran: the suite's own tests read the
sub-runs they start through it."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

KINDS = ("failure", "error", "skipped")  # the elements that tell a test did not pass, as JUnit names them


@dataclass(frozen=True)
class Outcome:
    """One test case of the file."""

    node: str  # its pytest node id: tests/kernel/test_accuracy.py::test_output_within_derived_bound[torch-...]
    name: str  # the test function with its parameters, as the node id ends
    kind: str  # "passed", or one of KINDS
    message: str  # the failure's, error's or skip's message ("" for a pass)
    text: str  # its traceback, or what it captured ("" for a pass)

    @property
    def said(self) -> str:
        """"passed", or "<kind>: <message>"."""
        return "passed" if self.kind == "passed" else f"{self.kind}: {self.message}"


def outcomes(junit: Path) -> list[Outcome]:
    """Every test case of the file ``junit``, in its order."""
    found = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        told = next((element for element in case if element.tag in KINDS), None)
        name = case.get("name")
        found.append(Outcome(node=f"{case.get('classname').replace('.', '/')}.py::{name}", name=name,
                             kind="passed" if told is None else told.tag,
                             message="" if told is None else told.get("message", ""),
                             text="" if told is None else told.text or ""))
    return found
