"""The suite's Hypothesis profiles, and the one a run gets unless told.

* ``dev``: the default on a workstation: a quick, randomised look;
* ``ci``: loaded when ``CI`` is set, and by every gate: each test's seed pinned
  (the same examples every run, whatever the tests' source;
  :mod:`harness.plugins.seeding`), no deadline (kernels JIT-compile on first call), a
  budget that keeps the run on two CPU cores well under the CI limit;
* ``nightly``: ten times the ``ci`` budget, randomised, with Hypothesis's
  target phase climbing toward the worst error-to-bound ratio; what
  ``python -m harness.soak`` runs in time-boxed rounds;
* ``mutation``: what the mutation test runs against each planted bug: the
  ``ci`` profile's examples (same budget, same pinned seeds), stopping at the
  first failing example, without shrinking (a caught mutant needs no minimal
  example, only the name of the test that caught it).

A failing test shrinks its example for at most :data:`SHRINKING_SECONDS` of its
profile, then reports the smallest failing example found so far: a gate ends
with its verdict in time; a night may shrink for Hypothesis's own five minutes.

An example database (``SOFTMAX_SUITE_EXAMPLES=DIR``) is read first by every
profile but ``mutation``, so a failure found by the nightly run replays in the
next gate run.  :mod:`harness.plugins.session` decides the run's profile and database
and registers the profiles with that database before loading one.
"""

import os

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

NAMES = ("dev", "ci", "nightly", "mutation")
CI_EXAMPLES = 25
# Seconds a failing test may shrink (harness.internals.hypothesis_internals.bound_shrinking); None: Hypothesis's own 300.
SHRINKING_SECONDS = {"dev": 20, "ci": 20, "nightly": None, "mutation": None}
_registered = False  # whether this process registered the profiles (Hypothesis has a "ci" profile of its own)


def register(database: str | None) -> None:
    """Register the profiles of :data:`NAMES`, reading the example database in folder ``database`` (if any) first."""
    global _registered
    examples = DirectoryBasedExampleDatabase(database) if database else None
    common = dict(deadline=None, print_blob=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.register_profile("dev", max_examples=10, database=examples, **common)
    if examples is None:
        settings.register_profile("ci", max_examples=CI_EXAMPLES, derandomize=True, database=None, **common)
    else:
        settings.register_profile("ci", max_examples=CI_EXAMPLES, database=examples, **common)
    settings.register_profile("nightly", max_examples=10 * CI_EXAMPLES, database=examples, **common)
    settings.register_profile("mutation", max_examples=CI_EXAMPLES, database=None, report_multiple_bugs=False,
                              phases=[Phase.explicit, Phase.generate, Phase.target], **common)
    _registered = True


def registered(name: str) -> settings:
    """The suite's profile ``name``; RuntimeError in a process that did not register the suite's profiles, where
    ``name`` could be Hypothesis's own profile of that name."""
    if not _registered:
        raise RuntimeError("the suite's Hypothesis profiles are not registered in this process: harness.plugins.session's "
                           "configure step registers them (harness.plugins.profiles.register)")
    return settings.get_profile(name)


def default_profile() -> str:
    """The profile a run gets without --hypothesis-profile nor a gate: ``$HYPOTHESIS_PROFILE``, else ``ci`` when CI
    is set, else ``dev``."""
    return os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")
