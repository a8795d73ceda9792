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
  strategies name every interesting value themselves (harness/strategies.py),
  so :func:`mine_no_constants` makes the miner find none.
* **Shrinking bounded in time**: a failing test shrinks its example until
  Hypothesis's ``MAX_SHRINKING_SECONDS`` (300 s,
  ``hypothesis.internal.conjecture.engine``) have passed, then reports the
  smallest failing example it found so far; no setting changes it.  A gate's
  rows of 2^20 elements, an oracle's judgement each shrink step, would spend
  those five minutes per failing test before the run ends with its verdict.
  :func:`bound_shrinking` sets it for the run's profile
  (``harness.profiles.SHRINKING_SECONDS``).  Only a failure shrinks: the inputs
  a passing run draws do not change.  Hypothesis's own warning when the bound
  is hit still says "five minutes".
* Public, for the same cache: Hypothesis keeps what it mined in its home
  directory, which xdist workers and the suite's sub-runs share; in a fresh
  checkout one process could read a file another was still writing and draw
  other inputs (a gate "regression" of torch's own softmax).
  :func:`use_own_home` gives each process a home of its own (no profile keeps
  anything there: the example database has its own folder).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile

from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.internal.conjecture import engine, providers

SEED_ATTRIBUTE = "_hypothesis_internal_use_seed"
HYPOTHESIS_SHRINKING_SECONDS = getattr(engine, "MAX_SHRINKING_SECONDS", None)


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
    """A failing test of this process shrinks for at most ``seconds`` (None: Hypothesis's own bound).  Where a
    Hypothesis version has no such bound the run goes on as before (the suite's test of this module fails instead)."""
    if HYPOTHESIS_SHRINKING_SECONDS is not None:
        engine.MAX_SHRINKING_SECONDS = HYPOTHESIS_SHRINKING_SECONDS if seconds is None else seconds


def use_own_home() -> None:
    """This process keeps Hypothesis's files in a temporary folder of its own, removed at exit."""
    home = tempfile.mkdtemp(prefix="softmax-suite-hypothesis-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    set_hypothesis_home_dir(home)
