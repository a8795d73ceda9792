"""The private Hypothesis internals the suite relies on, each behind one function here and no other place.

tests/suite/test_hypothesis_internals.py fails when one of them disappears or
stops doing what is described below (a new Hypothesis version); the fix then
belongs here.

* **A test's seed, keeping the example database**: :func:`pin_seed` sets the
  attribute ``_hypothesis_internal_use_seed`` that ``@hypothesis.seed`` sets and
  ``@given`` reads.  Not ``@seed`` itself: it also turns the test's example
  database off, and what a soak stored would never be replayed by the next
  gate.  Not ``--hypothesis-seed``: one seed for every test, and no database.
* **No constants mined from the suite's source**: now and then Hypothesis
  draws a constant it mined from the modules of the checkout it runs in
  (``hypothesis.internal.conjecture.providers._get_local_constants``).  A pinned
  run's inputs then depend on the suite's own source (any edit of a module
  could move the baseline's categories and fail the gate on a correct kernel)
  and on which modules happened to be imported when a draw was made.  The
  strategies name every interesting value themselves (harness/inputs/strategies.py),
  so :func:`mine_no_constants` makes the miner find none.
* **Shrinking bounded in time**: a failing test shrinks its example until
  Hypothesis's ``MAX_SHRINKING_SECONDS`` (300 s,
  ``hypothesis.internal.conjecture.engine``) have passed, then reports the
  smallest failing example it found so far; no setting changes it.  A gate's
  rows of 2^20 elements, an oracle's judgement each shrink step, would spend
  those five minutes per failing test before the run ends with its verdict.
  :func:`bound_shrinking` sets it for the run's profile
  (``harness.plugins.profiles.SHRINKING_SECONDS``).  Only a failure shrinks: the inputs
  a passing run draws do not change.
* **Its warning said so**: when the bound stops a shrink, the engine prints,
  through ``hypothesis.reporting.report`` (the name
  ``hypothesis.internal.conjecture.engine.report``), a warning that it "has
  spent more than five minutes" shrinking, ending in "PLEASE REPORT THIS":
  false under the suite's 20 s; then ``@given`` (the name
  ``hypothesis.core.report``) that the test "exited early because it took too
  long to shrink", to be reproduced with ``@seed(N)``, which the suite's test
  bodies cannot take (a failure's replay line replays its example): seven
  lines in a failure's captured output.  :func:`bound_shrinking` gives both a
  ``report`` that says instead, in one line, that the run's bound stopped the
  shrink (Hypothesis's own words where its own bound did).
* **A failing example, replayed**: a failure's one-step replay line
  (harness/plugins/failures.py) carries the blob of the ``@reproduce_failure(version,
  blob)`` decorator Hypothesis notes on the failure (``print_blob``, every
  profile's): :func:`failure_blob` reads it, :func:`reproduced` gives a test
  body the public decorator.  Replayed, an example that no longer fails makes
  Hypothesis raise ``DidNotReproduce`` "Expected the test to raise an error,
  but it completed successfully": :func:`replay_passed` tells it from the
  other ``DidNotReproduce`` (the blob is not of this test), and the replay
  then passes (``harness.plugins.seeding``).  What Hypothesis says of a replayed
  example it prints (its "Falsifying example", a dozen lines of captured
  output), where of an example it found it makes notes on the failure:
  :func:`reports_kept` keeps it, and the replay makes the same notes.
* **Which examples are the test's own**: a nightly counts the inputs it drew
  apart from the fixed ones (the ``@example`` inputs every run judges alike),
  which it runs once a night: :func:`running_an_explicit_example` reads the
  build context's ``is_final``, which Hypothesis sets for its explicit examples
  (``execute_explicit_examples``) and for the last replay of a failing one,
  never for a generated one.
* Public, for the same cache: Hypothesis keeps what it mined in its home
  directory, which xdist workers and the suite's sub-runs share; in a fresh
  checkout one process could read a file another was still writing and draw
  other inputs (a gate "regression" of torch's own softmax).
  :func:`use_own_home` gives each process a home of its own (no profile keeps
  anything there: the example database has its own folder).
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile

import hypothesis
from hypothesis import core
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.errors import DidNotReproduce
from hypothesis.internal.conjecture import engine, providers
from hypothesis.reporting import with_reporter

SEED_ATTRIBUTE = "_hypothesis_internal_use_seed"
HYPOTHESIS_SHRINKING_SECONDS = getattr(engine, "MAX_SHRINKING_SECONDS", None)
HYPOTHESIS_REPORT = engine.report  # what the engine prints its warnings with
SLOW_SHRINK_WARNING = "WARNING: Hypothesis has spent more than five minutes working to shrink"  # the engine's
SLOW_SHRINK_SEED = "\nThis test function exited early because it took too long to shrink"  # @given's, after it
# The decorator Hypothesis's note on a failure names, and the form a replay line gives it: VERSION:BLOB.
REPRODUCE_NOTE = re.compile(r"@reproduce_failure\('([0-9][0-9.]*)', b'([A-Za-z0-9+/]+={0,2})'\)")
EXAMPLE_FORM = re.compile(r"([0-9][0-9.]*):([A-Za-z0-9+/]+={0,2})")
REPLAY_PASSED = "Expected the test to raise an error, but it completed successfully"


def pin_seed(test, seed: int):
    """Draw ``test``'s examples (a ``@given`` test, or the body it wraps) from ``seed``; returns ``test``."""
    setattr(test, SEED_ATTRIBUTE, seed)
    return test


def mine_no_constants() -> None:
    """Hypothesis draws no constant mined from local modules (this process, from now on).  Where a Hypothesis
    version has no such miner the run goes on as before (the suite's test of this module fails instead)."""
    if hasattr(providers, "_get_local_constants") and hasattr(providers, "Constants"):
        providers._get_local_constants = providers.Constants


def bound_shrinking(seconds: float | None) -> None:
    """A failing test of this process shrinks for at most ``seconds`` (None: Hypothesis's own bound), and a shrink
    the bound stops says so in a line.  Where a Hypothesis version has no such bound the run goes on as before (the
    suite's test of this module fails instead)."""
    if HYPOTHESIS_SHRINKING_SECONDS is not None:
        engine.MAX_SHRINKING_SECONDS = HYPOTHESIS_SHRINKING_SECONDS if seconds is None else seconds
        engine.report = core.report = report_shrink_bound


def report_shrink_bound(text: str) -> None:
    """Hypothesis's ``report``, but for what it says of a shrink that a bound other than its own stopped: the
    bound's line."""
    bound = engine.MAX_SHRINKING_SECONDS
    if bound != HYPOTHESIS_SHRINKING_SECONDS and text.startswith(SLOW_SHRINK_SEED):
        return
    if bound != HYPOTHESIS_SHRINKING_SECONDS and text.startswith(SLOW_SHRINK_WARNING):
        text = (f"Hypothesis stopped shrinking at the run's bound of {bound:g} s (harness/plugins/profiles.py): the failing "
                "example told is the smallest it had found by then")
    HYPOTHESIS_REPORT(text)


def failure_blob(error: BaseException) -> str | None:
    """``VERSION:BLOB`` of the ``@reproduce_failure`` Hypothesis noted on ``error``, if it did (its last)."""
    found = [match for note in getattr(error, "__notes__", ()) for match in REPRODUCE_NOTE.finditer(str(note))]
    return f"{found[-1][1]}:{found[-1][2]}" if found else None


def reproduced(test, example: str):
    """``test`` (a ``@given`` test, or the body it wraps) running only the example ``VERSION:BLOB``
    (:func:`failure_blob`); ValueError for a string of another form."""
    form = EXAMPLE_FORM.fullmatch(example)
    if form is None:
        raise ValueError(f"{example!r} is not VERSION:BLOB, as a replay line names a Hypothesis example")
    return hypothesis.reproduce_failure(form[1], form[2].encode())(test)


def reports_kept(said: list):
    """A context in which what Hypothesis reports (and would print) is appended to ``said`` instead."""
    return with_reporter(said.append)


def replay_passed(error: BaseException) -> bool:
    """Whether ``error`` is Hypothesis's word that the example :func:`reproduced` gave ran and passed."""
    return isinstance(error, DidNotReproduce) and str(error).startswith(REPLAY_PASSED)


def use_own_home() -> None:
    """This process keeps Hypothesis's files in a temporary folder of its own, removed at exit."""
    home = tempfile.mkdtemp(prefix="softmax-suite-hypothesis-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    set_hypothesis_home_dir(home)


def running_an_explicit_example() -> bool:
    """Whether the example running now is one of the test's ``@example`` inputs (or the last replay of a failure);
    False outside a Hypothesis test."""
    from hypothesis.control import current_build_context
    from hypothesis.errors import InvalidArgument

    try:
        return bool(current_build_context().is_final)
    except InvalidArgument:  # no test running
        return False
