"""What a run's tests reported, gathered on the controller from their reports (an xdist worker's too).

:class:`Ledger` takes every test report (:meth:`Ledger.take`): the records and invariances riding on it
(:mod:`harness.internals.payload`), its outcome, its failure with the replay command the suite attached, the known
findings it failed on or fixed, the kernel it judged.  The report plugin (:mod:`harness.plugins.reporting`) turns the
ledger into the report, the gate's verdict and the run's exit status; a soak round's log reads the same reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from report import artifacts, baseline

from ..internals import payload
from ..internals.payload import EXPECTS, KERNEL, RECORDS, REPLAY
from ..judging import invariance
from . import timebox
from .known import FIXED, KNOWN



@dataclass
class Ledger:
    # Every record the tests kept, in the order they came.
    records: list[dict] = field(default_factory=list)
    # The tests that take the accuracy_record fixture, those that left records, and those skipped.
    expected: set[str] = field(default_factory=set)
    recorded: set[str] = field(default_factory=set)
    skipped: set[str] = field(default_factory=set)
    # The tests with a report, by their source id (report.baseline.source_id): they ran, or began to.
    ran: set[str] = field(default_factory=set)
    # test id -> passed, failed, skipped, known, not run (a soak round's time box ended before it started).
    outcomes: dict[str, str] = field(default_factory=dict)
    # The invariances the tests measured, as their payloads carried them.
    invariance_entries: list[dict] = field(default_factory=list)
    # The failed tests: test, when, headline, replay command (report.artifacts.failure).
    failures: list[dict] = field(default_factory=list)
    # Failures a known finding explains, and known findings whose test passed: {test, kernel, findings}.
    known: list[dict] = field(default_factory=list)
    fixed: list[dict] = field(default_factory=list)
    # Tests that passed (a skip or an expected failure inside a test's body is no pass).
    passed: int = 0
    # kernel -> its tests that ran (a report came, skipped ones included); the kernels a test of which was judged.
    kernels_run: dict[str, int] = field(default_factory=dict)
    kernels_judged: set[str] = field(default_factory=set)

    def take(self, report: pytest.TestReport) -> dict | None:
        """Keep what ``report`` says; the failure it adds, if it adds one."""
        self.ran.add(baseline.source_id(report.nodeid))
        kernel = getattr(report, KERNEL, None)
        if kernel is not None:
            if report.when == "setup":
                self.kernels_run[kernel] = self.kernels_run.get(kernel, 0) + 1
            if report.failed or report.when == "call" and report.passed or getattr(report, KNOWN, None):
                self.kernels_judged.add(kernel)
        if report.when == "setup" and getattr(report, EXPECTS, False):
            self.expected.add(report.nodeid)
        self.invariance_entries.extend(payload.of(report, invariance.INVARIANCE))
        records = payload.of(report, RECORDS)
        if records:
            self.recorded.add(report.nodeid)
            self.records.extend(records)
        for attribute, kept in ((KNOWN, self.known), (FIXED, self.fixed)):
            if getattr(report, attribute, None):
                kept.append({"test": report.nodeid, "kernel": kernel, "findings": getattr(report, attribute)})
        if getattr(report, KNOWN, None):
            self.outcomes[report.nodeid] = "known"
        if getattr(report, timebox.NOT_RUN, False):
            self.outcomes[report.nodeid] = "not run"
        if report.skipped:
            self.skipped.add(report.nodeid)
            self.outcomes.setdefault(report.nodeid, "skipped")
        if report.failed:
            self.failures.append(artifacts.failure(report.nodeid, report.when, report.longreprtext,
                                                   getattr(report, REPLAY, None)))
            self.outcomes[report.nodeid] = "failed"
            return self.failures[-1]
        if report.when == "call" and report.passed:  # not a skip or an expected failure inside the test
            self.passed += 1
            self.outcomes.setdefault(report.nodeid, "passed")
        return None

    @property
    def missing(self) -> list[str]:
        """The tests that take the accuracy_record fixture, ran, and left no record."""
        return sorted(self.expected - self.recorded - self.skipped)

    def judged_nothing(self) -> bool:
        """Whether no test passed or failed: every one that ran was skipped."""
        return not self.passed and not self.failures and not self.known

    def named_kernels(self, named: set[str]) -> dict[str, dict]:
        """Per kernel of ``named`` that ran tests: how many, and whether one judged it (a shard's report keeps this
        for ``report merge``)."""
        return {kernel: {"tests": count, "judged": kernel in self.kernels_judged}
                for kernel, count in sorted(self.kernels_run.items()) if kernel in named}

    def named_but_unjudged(self, named: set[str]) -> dict[str, int]:
        """The kernels of ``named`` whose every test that ran was skipped, with how many ran: a run passing on the
        others (torch as a control beside one's kernel) said nothing of them."""
        return {kernel: count for kernel, count in self.kernels_run.items()
                if kernel in named and kernel not in self.kernels_judged}


def exit_status(status: int, ledger: Ledger, gate_fails: bool, collect_only: bool,
                named: set[str], sharded: bool = False) -> tuple[int, bool]:
    """The run's exit status from pytest's ``status``, and whether the run tested nothing.  A gate that fails the run
    fails it; a passing run that judged nothing (every test it ran skipped), or nothing of a kernel ``--kernel``
    named, is no pass: 5, pytest's status for a run that tested nothing.  A shard (``sharded``) may hold only skipped
    tests of a kernel whose other tests other shards judge: ``report merge`` applies that rule to the whole run."""
    if gate_fails and status == pytest.ExitCode.OK:
        status = pytest.ExitCode.TESTS_FAILED
    nothing = status == pytest.ExitCode.OK and not collect_only and ledger.judged_nothing()
    if status == pytest.ExitCode.OK and (nothing or (ledger.named_but_unjudged(named) and not sharded)):
        status = pytest.ExitCode.NO_TESTS_COLLECTED
    return status, nothing
