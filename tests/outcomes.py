"""What a sub-run says of each test it ran, as pytest's own report objects hold it: the suite's tests read the
sub-runs they start through it.

A pytest plugin (``-p tests.outcomes``, which :func:`tests.subruns.python` gives every sub-run) writes, with
``--outcomes FILE``, one JSON line per test phase: the node id, the phase, the outcome, the exception's own message
(``reprcrash``) and pytest's text of the failure.  Not JUnit XML: its ``message`` attribute is pytest's wording of
a failure, which pytest 9.2 cut to a few lines and a "[+N more lines]" note, and the cases that read it failed on a
fresh install.  Under xdist the controller writes what the workers reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

KINDS = ("failure", "error", "skipped")  # what a test that did not pass did (an error: its setup or teardown failed)


@dataclass(frozen=True)
class Outcome:
    """One test, as a sub-run reported it."""

    node: str  # its pytest node id: tests/kernel/test_accuracy.py::test_output_within_derived_bound[torch-...]
    name: str  # the test function with its parameters, as the node id ends
    kind: str  # "passed", or one of KINDS
    message: str  # the exception's message ("ExceptionType: ..."), or the skip's reason ("" for a pass)
    text: str  # pytest's whole text of the failure ("" for a pass)

    @property
    def said(self) -> str:
        """"passed", or "<kind>: <message>"."""
        return "passed" if self.kind == "passed" else f"{self.kind}: {self.message}"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--outcomes", metavar="FILE", help="write each test's outcome as JSON lines (tests/outcomes.py)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("outcomes")
    if path and not hasattr(config, "workerinput"):  # a worker's reports reach the controller, which writes them
        Path(path).write_text("")
        config.pluginmanager.register(Writer(Path(path)), "outcomes-writer")


class Writer:
    def __init__(self, path: Path) -> None:
        self.path = path

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.passed and report.when != "call":
            return
        crash = getattr(report.longrepr, "reprcrash", None)
        if report.skipped and isinstance(report.longrepr, tuple):  # (file, line, "Skipped: reason")
            message = str(report.longrepr[2])
        else:
            message = crash.message if crash is not None else report.longreprtext
            if message.strip() == report.nodeid:  # a failure told on one screen opens with its node id, which some
                message = report.longreprtext.partition("\n")[2]  # pytest and xdist versions take for its message
        with self.path.open("a") as file:
            file.write(json.dumps({"node": report.nodeid, "when": report.when, "outcome": report.outcome,
                                   "message": "" if report.passed else message,
                                   "text": "" if report.passed else report.longreprtext}) + "\n")


def read(path: Path) -> list[Outcome]:
    """Every test of the file ``path``, in the order it ended: its call's outcome, or its setup's or teardown's
    failure (an error) where one failed."""
    found: dict[str, Outcome] = {}
    for line in Path(path).read_text().splitlines():
        entry = json.loads(line)
        node, when, outcome = entry["node"], entry["when"], entry["outcome"]
        kind = ("passed" if outcome == "passed" else "skipped" if outcome == "skipped"
                else "failure" if when == "call" else "error")
        if node in found and found[node].kind in ("error", "failure"):
            continue  # a failure told is not undone by a later phase
        found[node] = Outcome(node=node, name=node.partition("::")[2], kind=kind, message=entry["message"],
                              text=entry["text"])
    return list(found.values())
