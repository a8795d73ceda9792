"""A soak round's time box, kept by each process of the round (:mod:`harness.soak` starts the rounds).

A pytest plugin, loaded by the root conftest, inert without ``--soak-deadline``:

* the round's time box (``--soak-minutes``) counts from the moment each
  process has collected its tests: starting Python, torch and Triton takes tens
  of seconds on a loaded host and is not testing time, so ``--soak-deadline``,
  the driver's end of the round, moves by that much;
* a test that starts after the end of the round is skipped as NOT RUN (its
  reports carry ``NOT_RUN``): the round's verdict says it left tests unrun;
* every test gets an equal share of the round (``--soak-minutes`` times the
  workers, over the tests collected), so that one slow test does not take the
  round from the others; once its share is spent, the examples left of a Hypothesis test whose body is
  :func:`timeboxed` pass at once, without running (Hypothesis needs the same
  choices to give the same outcome, so the strategies are left alone);
  with ``--soak-examples-per-test N`` a test ends after N examples it drew
  instead (its fixed inputs, the ``@example`` ones every run judges alike, do
  not count), the round's end its only time limit: kernels get equal depth, not
  equal time;
* with ``--soak-fixed skip`` a test runs none of its fixed inputs, only what it
  draws: a night's rounds after its first search, they do not judge the same
  inputs again;
* the examples each test ran, and of those the ones it drew, ride on its report
  (:mod:`harness.plugins.soak_log` writes them down).
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from dataclasses import dataclass

import pytest
from hypothesis.errors import UnsatisfiedAssumption

from ..guard import calls
from ..internals import hypothesis_internals, payload
from . import known
from .failures import name_example
from .seeding import pin_seed
from .session import session_of

EXAMPLES = "examples"  # the payload kind: examples a test ran
DRAWN = "drawn"  # ... and of those, the ones it drew (not its fixed inputs)
_progress: Progress | None = None  # progress lines of long tests, when asked for (this process)
_test_deadline: float | None = None  # the running test's end of share (this process)
_ran = 0  # examples the running test ran
_drawn = 0  # of those, the ones it drew
_skip_fixed = False  # with --soak-fixed skip: the fixed inputs pass unrun (a night's later rounds)
_failed = False  # whether one of them failed: Hypothesis then replays it, and must see it fail again
_examples_cap: int | None = None  # with --soak-examples-per-test: the examples each test runs (this process)
_cut = False  # whether the running test's share or examples cap ended it with examples left, passed unrun


def in_time_box() -> bool:
    """Whether the running test runs inside a soak's time box, which may end its examples early."""
    return _test_deadline is not None


def timeboxed(test):
    """The body of a Hypothesis test (place it under ``@given``), ended early by a soak; it tells the kernel-call
    guard which example runs (:func:`harness.guard.calls.set_example`).

    Once the running test's share of a soak is spent, the examples left return at
    once, unless one has failed: its replays and shrinking must run for real.
    The body takes the pinned seed, if any (``@given`` reads it from its body), and
    a failure in it the example it failed on, for its report (:mod:`harness.plugins.failures`).
    """

    @functools.wraps(test)
    def body(*args, **kwargs):
        global _ran, _drawn, _failed, _cut
        fixed = hypothesis_internals.running_an_explicit_example()
        if _test_deadline is not None and not _failed:
            if fixed and _skip_fixed:
                return None
            if _ran and (time.time() >= _test_deadline or not fixed and _examples_cap is not None
                         and _drawn >= _examples_cap):
                _cut = True
                return None
        calls.set_example(kwargs)  # for the breadcrumbs and messages of the kernel calls it makes
        try:
            result = test(*args, **kwargs)
        except UnsatisfiedAssumption:
            raise
        except BaseException as error:
            if not known.absorbs(error):
                _failed = True
                name_example(error, kwargs)
                raise
            result = None  # a known finding's failure: counted apart, and the search goes on (harness/plugins/known.py)
        _ran += 1
        _drawn += not fixed
        if _progress is not None:
            _progress.tick(_ran)
        return result

    return pin_seed(body)


@dataclass
class Progress:
    """A line every ``every`` seconds while a timeboxed Hypothesis test runs: examples done, time spent.

    Written past pytest's output capture, so that it reaches the terminal from an xdist worker too.
    """

    capture: object  # pytest's capture manager
    every: float
    test: str = ""
    started: float = 0.0
    shown: float = 0.0

    def start(self, test: str) -> None:
        self.test, self.started, self.shown = test, time.time(), time.time()

    def tick(self, examples: int) -> None:
        now = time.time()
        if now - self.shown < self.every:
            return
        self.shown = now
        with self.capture.global_and_fixture_disabled():
            sys.stderr.write(f"[progress] {self.test}: {examples} examples, {now - self.started:.0f} s\n")
            sys.stderr.flush()


def per_test_seconds(minutes: float, workers: int, tests: int) -> float:
    """An equal share of a round for each test: the round's worker-seconds over the tests."""
    return minutes * 60 * max(workers, 1) / max(tests, 1)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("softmax", "softmax accuracy suite")
    group.addoption("--soak-deadline", type=float, metavar="EPOCH",
                    help="soak: end of the round (seconds since the epoch); set by python -m harness.soak")
    group.addoption("--soak-minutes", type=float, metavar="M",
                    help="soak: minutes of a round, shared by the tests, counted from the end of collection "
                         "(they move --soak-deadline by the start-up time)")
    group.addoption("--soak-examples-per-test", type=int, metavar="N",
                    help="soak: every Hypothesis test draws N examples (besides its fixed inputs), the round's end "
                         "its only time limit: kernels get equal numbers of examples, not equal shares of time")
    group.addoption("--soak-fixed", choices=("run", "skip"), default="run",
                    help="soak: whether the Hypothesis tests run their fixed inputs (a night's first round) or only "
                         "what they draw (its later rounds)")
    group.addoption("--progress-every", type=float, default=30.0, metavar="SECONDS",
                    help="with -v or the nightly profile: a line per long Hypothesis test every SECONDS (default 30)")


def pytest_configure(config: pytest.Config) -> None:
    global _progress, _examples_cap, _skip_fixed
    _examples_cap = config.getoption("soak_examples_per_test")
    _skip_fixed = config.getoption("soak_fixed") == "skip"
    if config.option.verbose > 0 or session_of(config).draws.profile == "nightly":
        _progress = Progress(config.pluginmanager.getplugin("capturemanager"), config.getoption("progress_every"))


SHARE = pytest.StashKey[float]()  # seconds of the round each test may spend
ROUND_END = pytest.StashKey[float]()  # this process's end of the round


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list):
    """Around every other plugin's selection (-k, --kernel's scope, --shard): the share is of the tests that run."""
    result = yield
    deadline, minutes = config.getoption("soak_deadline"), config.getoption("soak_minutes")
    if deadline is not None:
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        cap = config.getoption("soak_examples_per_test")
        config.stash[SHARE] = math.inf if cap else per_test_seconds(minutes or 1.0, workers, len(items))
        config.stash[ROUND_END] = time.time() + minutes * 60 if minutes else deadline
    return result


NOT_REACHED = pytest.StashKey[bool]()  # on a test the round's time box ended before it started
NOT_RUN = "softmax_not_run"  # the attribute that marks the reports of such a test


def pytest_runtest_setup(item: pytest.Item) -> None:
    end = item.config.stash.get(ROUND_END, None)
    if end is not None and time.time() >= end:
        item.stash[NOT_REACHED] = True
        pytest.skip("NOT RUN: the soak round's time box ended before this test started")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    if item.stash.get(NOT_REACHED, False):
        setattr(outcome.get_result(), NOT_RUN, True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    global _test_deadline, _ran, _drawn, _failed, _cut
    deadline = item.config.stash.get(ROUND_END, None)
    if deadline is not None:
        _test_deadline = min(deadline, time.time() + item.config.stash.get(SHARE, 60.0))
    _ran, _drawn, _failed, _cut = 0, 0, False, False
    if _progress is not None:
        _progress.start(item.nodeid)
    try:
        yield
    finally:
        payload.add(item, EXAMPLES, _ran)
        payload.add(item, DRAWN, _drawn)
        payload.add(item, known.CUT_SHORT, _cut)
        _test_deadline = None
