"""A soak round's record, kept by the round's controller (``--soak-log FILE``, set by :mod:`harness.soak`).

Per test: its outcome (passed, failed, error, skipped, ``not run`` where the
round's time box ended before it started, ``known`` where a known finding
explains its failure, :mod:`harness.plugins.known`), its duration, the examples it ran,
its failure's report and the findings it is known by (or, failed as FIXED, the
findings fixed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..internals import payload
from ..internals.payload import KERNEL
from . import timebox
from .known import FIXED, KNOWN


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("softmax", "softmax accuracy suite").addoption(
        "--soak-log", metavar="FILE", help="soak: write each test's outcome, duration, examples here")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("soak_log") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(SoakLog(Path(config.getoption("soak_log"))), "softmax-soak-log")


class SoakLog:
    """The controller's record of a round: per test, outcome, duration, examples, the failure and its findings."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tests: dict[str, dict] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # "started" until a phase decides: a test cut short by an interruption never passed.
        entry = self.tests.setdefault(report.nodeid, {"outcome": "started", "duration": 0.0, "examples": 0,
                                                      "drawn": 0, "kernel": getattr(report, KERNEL, None)})
        entry["duration"] += report.duration
        entry["examples"] += sum(payload.of(report, timebox.EXAMPLES))
        entry["drawn"] += sum(payload.of(report, timebox.DRAWN))
        if report.failed:
            entry["outcome"] = "failed" if report.when == "call" else "error"
            entry["failure"] = report.longreprtext
            if getattr(report, FIXED, None):
                entry["fixed"] = getattr(report, FIXED)
        elif getattr(report, KNOWN, None):
            entry.update(outcome="known", findings=getattr(report, KNOWN))
        elif report.skipped and entry["outcome"] == "started":
            entry["outcome"] = "not run" if getattr(report, timebox.NOT_RUN, False) else "skipped"
        elif report.when == "call" and report.passed and entry["outcome"] == "started":
            entry["outcome"] = "passed"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        for entry in self.tests.values():
            if entry["outcome"] == "started":
                entry["outcome"] = "interrupted"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"exitstatus": int(exitstatus), "tests": self.tests}, indent=1) + "\n")
