"""Accuracy records, reports and the regression gate, as a pytest plugin.

* ``accuracy_record`` (fixture): a test hands it one record per check; the
  records ride on the test's report (:mod:`harness.payload`) to the xdist
  controller.
* ``pytest_runtest_makereport``: marks the setup report of every test that
  takes the fixture, so the controller knows which records to expect even when
  a worker dies mid-test.
* ``pytest_configure``: validates ``--accuracy-baseline`` early, loads the
  baseline's Hypothesis profile, and registers the controller's
  :class:`Gatherer`, which gathers records, writes ``--accuracy-report DIR``,
  runs the gate (a failing gate fails the run) or ``--update-baseline``, and
  prints the table per kernel and category.
"""

from __future__ import annotations

import datetime
import platform
import subprocess
from pathlib import Path

import pytest
from hypothesis import settings

from harness import payload, seeding
from harness.plugin import BACKEND
from harness.profiles import active_profile

from . import artifacts, baseline, invariances
from .summary import shown
from .summary import categorize

RECORDS = "records"
EXPECTS = "softmax_expects_records"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("softmax", "softmax accuracy suite")
    group.addoption("--accuracy-report", metavar="DIR", help="write accuracy.json, summary.md, plots, index.html")
    group.addoption("--accuracy-baseline", metavar="FILE|auto",
                    help="fail when a category's accuracy regresses against this baseline "
                         "('auto': baselines/<backend>.json); the run uses the baseline's Hypothesis profile")
    group.addoption("--update-baseline", action="store_true",
                    help="write this run's categories to the --accuracy-baseline file instead of gating")
    group.addoption("--require-baseline", action="store_true",
                    help="fail the gate for a kernel the baseline does not hold (default: named, not gated)")


def is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def baseline_path(config: pytest.Config) -> Path | None:
    option = config.getoption("accuracy_baseline")
    if option is None:
        return None
    return baseline.default_path(config.stash[BACKEND].name) if option == "auto" else Path(option)


def pytest_configure(config: pytest.Config) -> None:
    if is_controller(config):
        config.pluginmanager.register(Gatherer(config), "softmax-accuracy-gatherer")
    path = baseline_path(config)
    if config.getoption("update_baseline"):
        if path is None:
            raise pytest.UsageError("--update-baseline needs --accuracy-baseline FILE|auto")
        reproducible = (seeding.pinned_base(config) is not None or config.getoption("hypothesis_seed") is not None
                        or settings.get_profile(active_profile(config)).derandomize)
        if not reproducible:
            raise pytest.UsageError("a baseline must come from a run that draws the same inputs every time: "
                                    "add --hypothesis-profile ci")
        return
    if path is None:
        return
    try:
        reference = baseline.load(path, config.stash[BACKEND].name)
    except baseline.BaselineError as error:
        raise pytest.UsageError(str(error)) from None
    chosen = config.getoption("hypothesis_profile")
    if chosen is not None and chosen != reference["profile"]:
        raise pytest.UsageError(f"the baseline was made with Hypothesis profile {reference['profile']!r}; "
                                f"this run asks for {chosen!r}: their statistics are not comparable")
    settings.load_profile(reference["profile"])


@pytest.fixture
def accuracy_record(request: pytest.FixtureRequest):
    """``accuracy_record(record)``: keep one record (see :mod:`report.records`) for the report."""

    def keep(record: dict) -> None:
        example = len(request.node.stash.get(payload.PAYLOAD, {}).get(RECORDS, []))
        payload.add(request.node, RECORDS, {**record, "test": request.node.nodeid, "example": example})

    return keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.when == "setup":
        setattr(report, EXPECTS, "accuracy_record" in getattr(item, "fixturenames", ()))


def run_metadata(config: pytest.Config) -> dict:
    import hypothesis
    import mpmath
    import numpy
    import torch
    import triton

    backend = config.stash[BACKEND]
    return {
        "backend": backend.name,
        "device": backend.device_name,
        # ATen's CPU kernels differ by instruction set (AVX2, AVX512): torch's CPU numbers with them.
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "profile": active_profile(config),
        "seed": seeding.described(config),
        "draws": seeding.draws_fingerprint(backend.name),
        "git_commit": git_commit(config.rootpath),
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
                     "hypothesis": hypothesis.__version__, "mpmath": mpmath.__version__,
                     "numpy": numpy.__version__},
    }


def git_commit(root: Path) -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


class Gatherer:
    """The controller's side: gathers records and turns them into the report and the verdict."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: list[dict] = []
        self.expected: set[str] = set()
        self.recorded: set[str] = set()
        self.skipped: set[str] = set()
        self.categories: dict = {}
        self.invariance_entries: list[dict] = []
        self.invariances: dict = {}  # kernel -> invariance -> {promised, held, counterexample}
        self.findings: list[baseline.Finding] = []
        self.unjudged: dict[str, str] = {}  # kernel -> why the gate cannot judge it on this machine
        self.written: list[Path] = []
        self.failures: list[dict] = []  # test, headline, replay command
        self.passed = 0
        self.baseline_written: Path | None = None

    @property
    def measured(self) -> set[str]:
        """The kernels whose accuracy or invariances this run measured."""
        return set(self.categories) | set(self.invariances)

    @property
    def missing(self) -> list[str]:
        return sorted(self.expected - self.recorded - self.skipped)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "setup" and getattr(report, EXPECTS, False):
            self.expected.add(report.nodeid)
        self.invariance_entries.extend(payload.of(report, invariances.INVARIANCE))
        records = payload.of(report, RECORDS)
        if records:
            self.recorded.add(report.nodeid)
            self.records.extend(records)
        if report.skipped:
            self.skipped.add(report.nodeid)
        if report.failed:
            self.failures.append(artifacts.failure(report.nodeid, report.when, report.longreprtext))
        elif report.when == "call" and report.passed:  # not a skip or an expected failure inside the test
            self.passed += 1

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = self.config
        self.records.sort(key=lambda r: (r["test"], r["example"]))
        self.categories = categorize(self.records)
        self.invariances = invariances.combine(self.invariance_entries)
        held = invariances.held(self.invariances)
        path = baseline_path(config)
        directory = config.getoption("accuracy_report")
        run = run_metadata(config) if (path or directory) else {}
        if path is not None and config.getoption("update_baseline"):
            built = baseline.build(self.categories, backend=run["backend"], profile=run["profile"], run=run,
                                   invariances=held)
            baseline.write(path, built)
            self.baseline_written = path
        elif path is not None and self.measured:
            reference = baseline.load(path, run["backend"])
            stale = baseline.other_draws(reference, run)
            unjudged = dict.fromkeys(self.measured, stale) if stale else baseline.machine_bound(reference, run)
            self.unjudged = {kernel: why for kernel, why in unjudged.items() if kernel in self.measured}
            judged = {kernel: groups for kernel, groups in self.categories.items() if kernel not in self.unjudged}
            self.findings = baseline.compare(reference["kernels"], judged)
            self.findings += baseline.compare_invariances(
                reference.get("invariances", {}), {k: v for k, v in held.items() if k not in self.unjudged})
            strict = config.getoption("require_baseline")
            if any(f.fails or strict and f.verdict == "not gated" for f in self.findings) \
                    and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if directory:
            gate = baseline.table(self.findings, only_failures=False)
            gated = None if config.getoption("update_baseline") else path
            verdict = artifacts.verdict(self.passed, self.failures, self.findings, gated)
            self.written += artifacts.write_all(Path(directory), run, verdict, self.failures, self.categories,
                                                self.records, self.missing, gate, self.invariances)

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        write = terminalreporter.write_line
        if self.categories:
            terminalreporter.write_sep("-", "accuracy per kernel and category (ULP to the correctly rounded result)")
            width = max(len("kernel"), *map(len, self.categories))
            fmt = "{:<%d} {:<36} {:>7} {:>8} {:>9} {:>6} {:>10} {:>11} {:>8}" % width
            write(fmt.format("kernel", "category", "records", "max ULP", "mean ULP", "% CR", "torch max",
                             "torch mean", "NaN/inf"))
            for kernel, groups in self.categories.items():
                for key, stats in groups.items():
                    k, t = stats["kernel"], stats["torch"]
                    write(fmt.format(kernel, key, stats["records"], shown(k["max_ulp"], ".0f"),
                                     shown(k["mean_ulp"], ".3f"), shown(k["correctly_rounded"], ".1f", 100),
                                     shown(t["max_ulp"], ".0f"), shown(t["mean_ulp"], ".3f"), k["non_finite"]))
        if self.invariances:
            terminalreporter.write_sep("-", "bitwise invariances per kernel (only a broken promise fails)")
            for line in invariances.text_table(self.invariances) + invariances.counterexamples(self.invariances):
                write(line)
        if self.missing:
            terminalreporter.write_sep("-", f"{len(self.missing)} test(s) expected to record accuracy left no record")
            for test in self.missing:
                write(test)
        failures = baseline.table(self.findings, only_failures=True)
        path = baseline_path(config)
        if failures:
            terminalreporter.write_sep("-", "accuracy regressions against the baseline", red=True)
            for line in failures:
                write(line)
        elif path is not None and not config.getoption("update_baseline") and self.measured:
            write(f"accuracy gate: no regression against {path}")
        elif path is not None and not config.getoption("update_baseline"):
            write(f"accuracy gate: this run measured no accuracy and no invariance: nothing judged against {path}")
        for finding in self.findings:
            if finding.verdict == "not gated":
                fails = " (fails: --require-baseline)" if config.getoption("require_baseline") else ""
                write(f"accuracy gate: {finding.kernel} is not in {path}: not gated{fails}")
        for kernel, why in self.unjudged.items():
            write(f"accuracy gate: {kernel} not judged: {why}")
        if self.baseline_written:
            write(f"accuracy baseline: wrote {self.baseline_written}")
        for written in self.written:
            write(f"accuracy report: wrote {written}")
