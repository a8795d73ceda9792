"""Accuracy records, reports and the regression gate, as a pytest plugin.

* ``accuracy_record`` (fixture): a test hands it one record per check; the
  records ride on the test's report (:mod:`harness.internals.payload`) to the xdist
  controller.
* ``pytest_runtest_makereport``: marks the setup report of every test that
  takes the fixture, so the controller knows which records to expect even when
  a worker dies mid-test; gives a failed report the replay command its
  exception carries (a structured field: reports never scrape commands from
  failure text, which a kernel's own messages could forge), else, for a test
  that judges a kernel, the pytest command that reruns it on its failing
  example; and tells a failed check on one screen (:mod:`harness.plugins.failures`),
  any other failure's traceback with the control characters of a kernel's
  message written out (:func:`report.text.printable`), as every line the
  suite prints.
* ``pytest_configure``: reads the run's settings (:mod:`harness.plugins.session`),
  refuses an unusable baseline or report folder before any test runs, and
  registers the controller's :class:`Gatherer`, which keeps the run's ledger
  (:mod:`harness.plugins.ledger`), writes ``--accuracy-report DIR``, runs the
  gate (a failing gate fails the run; its words are :mod:`report.gate`'s, as
  a shard merge's) or ``--update-baseline``, and prints the table per kernel
  and category (:mod:`report.columns`).
* ``pytest_testnodedown`` (xdist): each worker names the device it ran on, and
  the report's run metadata counts the workers per device (``workers``); with
  ``--shard`` it also says which shard ran which tests (:mod:`harness.plugins.sharding`).
"""

from __future__ import annotations

import datetime
import functools
import os
import platform
import subprocess
from pathlib import Path

import pytest

from report import artifacts, baseline, columns, gate, invariances, known
from report.summary import BACKWARD_CANCELS, INTERPRETER_BF16, categorize, has_backward, interpreter_truncates_bf16
from report.text import CONTROL, printable

from ..device import memory, pinning
from ..device.backend import stack
from ..guard import calls, sandbox
from ..internals import payload
from ..internals.payload import EXPECTS, KERNEL, RECORDS, REPLAY
from . import failures, seeding, sharding
from .ledger import Ledger, exit_status
from .session import session_of

DEVICE = "softmax_device"  # the key of an xdist worker's output naming its device
POOL = "softmax_kernel_processes"  # ... and of its kernel processes: how many it started, how many alive at most


def write_line(terminal, line: str, **markup) -> None:
    """A line of the suite's on the terminal: the kernels' names and messages in it cannot act on the terminal."""
    terminal.write_line(printable(line), **markup)


def is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def device_label(backend) -> str:
    """The device this process runs kernels on, numbered as the user numbers them: ``cuda:3 (NVIDIA H100 ...)`` for
    a worker pinned to entry 3 of ``CUDA_VISIBLE_DEVICES`` (inside the worker it is device 0)."""
    index = backend.device.index
    if index is None:
        return f"{backend.name} ({backend.device_name})"
    visible = pinning.visible_list(backend.name, os.environ)
    number = visible[index] if visible and index < len(visible) else index
    return f"{backend.name}:{number} ({backend.device_name})"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker's kernel processes, for the controller's summary."""
    if not is_controller(session.config):
        pool = session_of(session.config).pool
        session.config.workeroutput[POOL] = {"started": pool.started, "most": pool.most}


def pytest_configure(config: pytest.Config) -> None:
    run = session_of(config)
    if not is_controller(config):
        config.workeroutput[DEVICE] = device_label(run.backend)  # the controller counts workers per device
        return
    reference = None
    try:
        if run.gate is not None and not run.gate.update:
            reference = baseline.load(run.gate.path, run.backend.name)
        elif run.gate is not None and run.gate.path.exists():
            existing = baseline.read(run.gate.path)  # merged into at the end: it must be readable now
            problems = baseline.problems_of(existing, run.backend.name)
            if problems and existing.get("schema_version") == baseline.SCHEMA_VERSION:
                raise baseline.BaselineError(f"baseline {run.gate.path} is malformed: {'; '.join(problems)}; "
                                             "fix it or delete it before updating it")
        if run.report is not None:
            artifacts.prepare(run.report, run.calls)
    except (baseline.BaselineError, artifacts.ReportError) as error:
        raise pytest.UsageError(str(error)) from None
    config.pluginmanager.register(Gatherer(config, reference), "softmax-accuracy-gatherer")


@pytest.fixture
def accuracy_record(request: pytest.FixtureRequest):
    """``accuracy_record(record)``: keep one record (see :mod:`report.records`) for the report."""

    def keep(record: dict) -> None:
        example = len(request.node.stash.get(payload.PAYLOAD, {}).get(RECORDS, []))
        payload.add(request.node, RECORDS, {**record, "test": request.node.nodeid, "example": example})

    return keep


def replay_of(error: BaseException | None) -> str | None:
    """The replay command a failure's exception carries (the suite's own exceptions set ``replay``), if any."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if getattr(error, "replay", None):
            return error.replay
        inner = getattr(error, "exceptions", None)  # an exception group: Hypothesis's several distinct failures
        if inner:
            return next((found for e in inner if (found := replay_of(e))), None)
        error = error.__cause__ or error.__context__
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.when == "setup":
        setattr(report, EXPECTS, "accuracy_record" in getattr(item, "fixturenames", ()))
    kernel = getattr(item, "callspec", None) and item.callspec.params.get("kernel")
    if kernel is not None:
        setattr(report, KERNEL, kernel.name)
    if report.failed and call.excinfo is not None:
        error = call.excinfo.value
        replay = replay_of(error) or failures.pytest_command(item, error)
        if replay:
            setattr(report, REPLAY, replay)
        if failures.told_on_one_screen(item, error):
            report.longrepr = failures.one_screen(item, error, replay)
        elif CONTROL.search(report.longreprtext):  # pytest's traceback of a kernel's message (--tb=short, long...)
            report.longrepr = printable(report.longreprtext)


def run_metadata(config: pytest.Config) -> dict:
    import hypothesis
    import mpmath
    import numpy
    import torch
    import triton

    run = session_of(config)
    return {
        "backend": run.backend.name,
        "device": run.backend.device_name,
        # ATen's CPU kernels differ by instruction set (AVX2, AVX512): torch's CPU numbers with them.
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "profile": run.draws.profile,
        "seed": run.draws.seeds(),
        "example_database": run.draws.database,
        "draws": seeding.draws_fingerprint(run.backend.name, run.draws),
        "kernel_draws": {spec.name: seeding.kernel_fingerprint(spec.capabilities, run.backend.name)
                         for spec in run.kernels},
        # What each kernel declares, where narrower than torch.softmax's contract: what a passing run covered.
        "declared": {spec.name: said for spec in run.kernels if (said := spec.capabilities.said(run.backend.name))},
        "git_commit": git_commit(config.rootpath),
        **sharding.metadata(config),  # which shard of a split run, and its tests
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
                     "hypothesis": hypothesis.__version__, "mpmath": mpmath.__version__,
                     "numpy": numpy.__version__, **stack(run.backend.name)},
    }


VERDICTS = {pytest.ExitCode.OK: "PASSED", pytest.ExitCode.INTERRUPTED: "INTERRUPTED",
            pytest.ExitCode.NO_TESTS_COLLECTED: "NOTHING TESTED"}


def run_verdict(status: int, stats: dict, gate_said: str) -> str:
    """"verdict: PASSED|FAILED|INTERRUPTED|NOTHING TESTED: N passed, M failed[, E errors]; <the gate's verdict>"."""
    counts = {kind: len(stats.get(kind, [])) for kind in ("passed", "failed", "error")}  # pytest's own tallies
    tests = f"{counts['passed']} passed, {counts['failed']} failed" + (f", {counts['error']} errors" if counts["error"]
                                                                        else "")
    return f"verdict: {VERDICTS.get(status, 'FAILED')}: {tests}; {gate_said}"


def git_commit(root: Path) -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def category_table(categories: dict) -> list[str]:
    """The terminal's table of the run's categories: a line per kernel and category, then the statistics of
    report/columns.py the terminal shows (the kernel's ULP figures, its results no ULP figure shows, torch's figures
    on the same inputs)."""
    terminal = columns.of(columns.TERMINAL)
    width = max(len("kernel"), *map(len, categories))
    fmt = "{:<%d} {:<36} " % width + " ".join("{:>%d}" % max(len(column.short) + 1, 6) for column in terminal)
    lines = [fmt.format("kernel", "category", *(column.short for column in terminal))]
    for kernel, groups in categories.items():
        lines += [fmt.format(kernel, key, *columns.cells(columns.TERMINAL, stats)) for key, stats in groups.items()]
    return lines


class Gatherer:
    """The controller's side: keeps the run's ledger and turns it into the report, the gate's verdict and the exit
    status."""

    def __init__(self, config: pytest.Config, reference: dict | None = None) -> None:
        self.config = config
        self.reference = reference  # the baseline gated against
        self.ledger = Ledger()
        self.categories: dict = {}
        self.invariances: dict = {}  # kernel -> invariance -> {promised, held, counterexample, tests}
        self.findings: list[baseline.Finding] = []
        self.unjudged: dict[str, str] = {}  # kernel -> why the gate cannot judge it on this machine
        self.written: list[Path] = []
        self.interrupted = False
        self.nothing_tested = False  # every test it ran was skipped: no pass (exit status 5)
        self.in_progress: list[str] = []  # kernel calls running when the run was interrupted
        self.baseline_written: Path | None = None
        self.baseline_notes: list[str] = []
        self.worker_devices: dict[str, str] = {}  # xdist worker -> its device
        self.worker_pools: dict[str, dict] = {}  # xdist worker -> its kernel processes (POOL)
        self.exitstatus: int = pytest.ExitCode.OK  # the run's, once decided (tests and gate)
        self.tampered: list[str] = []  # the suite's files that changed during the run (where no Landlock stops it)
        self.memory = memory.Sampler()  # the cards' memory in use while the run goes
        if session_of(config).backend.name == "cuda":
            self.memory.start()

    def workers(self) -> dict[str, int]:
        """How many processes ran tests on each device: xdist's workers, else this one."""
        if not self.worker_devices:
            return {device_label(session_of(self.config).backend): 1}
        counts: dict[str, int] = {}
        for device in self.worker_devices.values():
            counts[device] = counts.get(device, 0) + 1
        return dict(sorted(counts.items()))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        device = getattr(node, "workeroutput", {}).get(DEVICE)
        if device:
            self.worker_devices[node.gateway.id] = device
        pool = getattr(node, "workeroutput", {}).get(POOL)
        if pool:
            self.worker_pools[node.gateway.id] = pool

    def kernel_processes_said(self) -> str | None:
        """How many kernel processes the run started, and the most any of its processes held alive at once."""
        run = session_of(self.config)
        pools = list(self.worker_pools.values()) or [{"started": run.pool.started, "most": run.pool.most}]
        started = sum(pool["started"] for pool in pools)
        if not started:
            return None
        where = f"{len(self.worker_pools)} workers" if self.worker_pools else "this process"
        return (f"{started} started in {where} (the first call of a kernel in a worker, or after another took its "
                f"place), at most {max(pool['most'] for pool in pools)} alive at once in any (--kernel-processes "
                f"{run.pool.cap})")

    @property
    def measured(self) -> set[str]:
        """The kernels whose accuracy or invariances this run measured."""
        return set(self.categories) | set(self.invariances)

    def named(self) -> set[str]:
        return set(self.config.getoption("kernel")) - {"all"}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        failure = self.ledger.take(report)
        if failure:
            self.say(failure)

    def say(self, failure: dict) -> None:
        """A failure said as soon as it happens, in one line and its replay: pytest tells failures at the end of
        the run, which under ``-n`` and ``-x`` waits for the tests other workers are running (minutes for the
        suite's own)."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            return
        terminal.write("\n")  # after the progress line's characters (xdist's leave no mark ensure_newline reads)
        write_line(terminal, f"failure: {failure['test']} ({failure['when']}): {failure['headline']}", red=True)
        if failure["replay"]:
            write_line(terminal, f"  replay: {failure['replay']}")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config, run, ledger = self.config, session_of(self.config), self.ledger
        self.memory.stop()
        if run.files is not None:  # kernel processes could write the suite's files here: did any change?
            now = sandbox.fingerprint(config.rootpath, run.gate.path if run.gate else None)
            self.tampered = sorted(path for path in set(run.files) | set(now) if run.files.get(path) != now.get(path))
        self.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if self.interrupted:
            self.in_progress = calls.in_progress(run.calls)
        ledger.records.sort(key=lambda r: (r["test"], r["example"]))
        self.categories = categorize(ledger.records)
        self.invariances = invariances.combine(ledger.invariance_entries)
        held = invariances.held(self.invariances)
        metadata = {**run_metadata(config), "workers": self.workers(), "interrupted": self.interrupted,
                    "named_kernels": ledger.named_kernels(self.named())} if (run.gate or run.report) else {}
        if run.gate is not None and run.gate.update:
            self.update_baseline(run.gate, metadata, held)
        elif run.gate is not None:
            self.findings, self.unjudged = baseline.judge(self.reference, self.categories, held, ledger.ran, metadata)
        # Every selected test skipped (a kernel declaring none of this device, a subset of what it does not handle),
        # or every test of a kernel named: pytest's 0 would read as a pass, although nothing of it was judged.
        gate_fails = run.gate is not None and not run.gate.update and gate.fails(self.findings, run.gate.require)
        session.exitstatus, self.nothing_tested = exit_status(session.exitstatus, ledger, gate_fails,
                                                              config.getoption("collectonly"), self.named(),
                                                              sharded=sharding.shard_of(config) is not None)
        if self.tampered:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self.exitstatus = session.exitstatus
        if run.report is not None:
            gated = None if run.gate is None or run.gate.update else run.gate.path
            judged = gate.judged(self.findings, self.unjudged, self.measured) if gated else None
            verdict = artifacts.verdict(ledger.passed, ledger.failures, self.findings, gated, self.interrupted,
                                        known=ledger.known, fixed=ledger.fixed,
                                        not_run=artifacts.not_run(ledger.outcomes), judged=judged)
            self.written += artifacts.write_all(run.report, artifacts.Report(
                run=metadata, verdict=verdict, failures=ledger.failures, categories=self.categories,
                records=ledger.records, missing=ledger.missing, gate=baseline.table(self.findings, only_failures=False),
                invariances=self.invariances, outcomes=ledger.outcomes, in_progress=self.in_progress,
                known=ledger.known, fixed=ledger.fixed))

    def failures_counted(self) -> str:
        """"0 new, 5 known (...)" where a known finding failed or was fixed in this run; else empty."""
        return known.said(len(self.ledger.failures), self.ledger.known, self.ledger.fixed)

    def update_baseline(self, gated, metadata: dict, held: dict) -> None:
        if self.interrupted:
            self.baseline_notes.append(f"not written: the run was interrupted ({gated.path} unchanged)")
            return
        built = baseline.build(self.categories, backend=metadata["backend"], profile=metadata["profile"],
                               run=metadata, invariances=held, invariance_tests=invariances.sources(self.invariances))
        existing = None
        if gated.path.exists():
            existing = baseline.read(gated.path)
            if baseline.problems_of(existing, metadata["backend"]):
                self.baseline_notes.append("the existing file is of another schema or backend: replaced whole")
                existing = None
        merged, notes = baseline.merge(existing, built, self.ledger.ran, prune=gated.prune)
        baseline.write(gated.path, merged)
        self.baseline_written, self.baseline_notes = gated.path, self.baseline_notes + notes

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        write = functools.partial(write_line, terminalreporter)
        run = session_of(config)
        if self.categories:
            terminalreporter.write_sep("-", "accuracy per kernel and category (ULP to the correctly rounded result)")
            for line in category_table(self.categories):
                write(line)
            if interpreter_truncates_bf16(run.backend.name, self.categories):
                write(INTERPRETER_BF16)
            if has_backward(self.categories):
                write(BACKWARD_CANCELS)
        if self.invariances:
            terminalreporter.write_sep("-", "bitwise invariances per kernel (only a broken promise fails)")
            for line in invariances.text_table(self.invariances) + invariances.counterexamples(self.invariances):
                write(line)
        ledger = self.ledger
        if ledger.missing:
            terminalreporter.write_sep("-", f"{len(ledger.missing)} test(s) expected to record accuracy left no record")
            for test in ledger.missing:
                write(test)
        if self.nothing_tested:
            terminalreporter.write_sep("-", "NOTHING TESTED: every selected test was skipped (their reasons: below); "
                                       "nothing judged, so no pass: exit status 5", red=True)
        else:
            sharded = sharding.shard_of(config) is not None  # a shard leaves the rule to `report merge`
            for kernel, count in sorted(ledger.named_but_unjudged(self.named()).items()):
                said = (f"all {count} of {kernel}'s tests in this shard were skipped: `report merge` says whether the "
                        "run judged it") if sharded else (f"NOTHING TESTED of {kernel}: all {count} of its tests were "
                                                          "skipped (their reasons: below); the run is no pass for it: "
                                                          "exit status 5")
                terminalreporter.write_sep("-", printable(said), red=not sharded)
        if ledger.known or ledger.fixed:
            terminalreporter.write_sep("-", f"failures: {self.failures_counted()}", red=bool(ledger.fixed))
            for entry in ledger.known + ledger.fixed:
                state = "known" if entry in ledger.known else "FIXED"
                write(f"{state}: {entry['test']}: {', '.join(entry['findings'])}")
        if unrun := artifacts.not_run(ledger.outcomes):
            terminalreporter.write_sep("-", f"NOT RUN: {unrun} test(s): the soak round's time box ended before they "
                                       "started", yellow=True)
        if self.tampered:
            terminalreporter.write_sep("-", f"NO VERDICT: {len(self.tampered)} of the suite's files changed during the "
                                       "run, which kernel processes could write here (no Landlock)", red=True)
            for path in self.tampered[:20]:
                write(f"changed: {path}")
        if self.interrupted:
            terminalreporter.write_sep("-", "INTERRUPTED: the run did not finish; no verdict", red=True)
            for call in self.in_progress:
                write(f"in progress: {call}")
        if self.kernel_processes_said():
            write(f"kernel processes: {self.kernel_processes_said()}")
        if self.memory.said():
            write(f"device memory: {self.memory.said()}")
        if run.gate is not None:
            self.summarize_gate(terminalreporter, run.gate)
        for written in self.written:
            write(f"accuracy report: wrote {written}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """A gated run's last line: its verdict, of its tests and its gate together (pytest's line of counts, above
        it, says nothing of the gate, and the gate's nothing of the tests that failed)."""
        run = session_of(config)
        reporter = config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None and run.gate is not None and run.gate.first:
            line = run_verdict(self.exitstatus, reporter.stats, f"accuracy gate: no baseline for {run.backend.name} yet: "
                               f"this run recorded {run.gate.path}, judging nothing against it (the next run gates)")
            write_line(reporter, line, yellow=True)
        if reporter is not None and run.gate is not None and not run.gate.update:
            said = gate.verdict(self.findings, self.unjudged, self.measured, run.gate.path, self.interrupted)
            line = run_verdict(self.exitstatus, reporter.stats, said)
            if self.tampered:
                line = f"verdict: NO VERDICT: the suite's files changed during the run ({self.tampered[0]}...)"
            passed = line.startswith("verdict: PASSED")
            write_line(reporter, line, red=not passed, green=passed)

    def summarize_gate(self, terminalreporter, gated) -> None:
        write = functools.partial(write_line, terminalreporter)
        if gated.first:
            write(f"accuracy gate: {gated.path} did not exist: this first run on the device recorded it from its own "
                  "measurements and judged nothing; commit it, and the next run gates against it")
        if gated.update:
            for note in self.baseline_notes:
                write(f"accuracy baseline: {note}")
            if self.baseline_written:
                write(f"accuracy baseline: wrote {self.baseline_written}")
            return
        failures = baseline.table(self.findings, only_failures=True)
        if failures:
            terminalreporter.write_sep("-", "accuracy regressions against the baseline", red=True)
            for line in failures:
                write(line)
        for line in gate.notes(self.findings, self.unjudged, self.measured, gated.path, gated.require):
            write(line)
