"""Root conftest: the suite's plugin and its Hypothesis profiles.

Profiles (pick with ``--hypothesis-profile NAME`` or ``HYPOTHESIS_PROFILE``):

* ``dev``: the default on a workstation: a quick, randomised look;
* ``ci``: loaded when ``CI`` is set: each test's seed pinned (the same examples
  every run, whatever the tests' source; :mod:`harness.seeding`),
  no deadline (kernels JIT-compile on first call), a budget that keeps the run
  on two CPU cores well under the CI limit;
* ``nightly``: ten times the ``ci`` budget, randomised, with Hypothesis's
  target phase climbing toward the worst error-to-bound ratio; what
  ``python -m harness.soak`` runs in time-boxed rounds;
* ``mutation``: what the mutation test runs against each planted bug: the
  ``ci`` profile's examples (same budget, same pinned seeds), stopping at the
  first failing example, without shrinking (a caught mutant needs no minimal
  example, only the name of the test that caught it).

``SOFTMAX_SUITE_EXAMPLES=DIR`` keeps failing examples in a directory database
that every profile reads first, so a failure found by the nightly run replays
in the next gate run.
"""

import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.internal.conjecture import providers

from harness.profiles import default_profile

pytest_plugins = ["harness.payload", "harness.session", "harness.plugin", "harness.scheduling", "harness.sharding",
                  "harness.seeding", "harness.soak", "harness.reporting"]

CI_EXAMPLES = 25
EXAMPLES_DIR = os.environ.get("SOFTMAX_SUITE_EXAMPLES")
DATABASE = DirectoryBasedExampleDatabase(EXAMPLES_DIR) if EXAMPLES_DIR else None

common = dict(deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=10, database=DATABASE, **common)
if DATABASE is None:
    settings.register_profile("ci", max_examples=CI_EXAMPLES, derandomize=True, database=None, **common)
else:
    settings.register_profile("ci", max_examples=CI_EXAMPLES, database=DATABASE, **common)
settings.register_profile("nightly", max_examples=10 * CI_EXAMPLES, database=DATABASE, **common)
settings.register_profile("mutation", max_examples=CI_EXAMPLES, database=None, report_multiple_bugs=False,
                          phases=[Phase.explicit, Phase.generate, Phase.target], **common)
settings.load_profile(default_profile())

# Now and then Hypothesis draws a constant mined from this checkout's own modules, and it
# caches what it mined in its home directory (.hypothesis/constants), which xdist workers
# and the suite's sub-runs share.  In a fresh checkout one process can read a cache file
# that another is still writing, find it empty, and draw other inputs: a derandomised run
# then no longer draws its baseline's inputs (seen in CI: a gate "regression" of torch's own
# softmax).  Each process mines for itself, in a home of its own: a few milliseconds.  No
# profile keeps anything else there (the example database has its own directory).
HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="softmax-suite-hypothesis-")
atexit.register(shutil.rmtree, HYPOTHESIS_HOME, ignore_errors=True)
set_hypothesis_home_dir(HYPOTHESIS_HOME)

# The mined constants also make a derandomised run's inputs depend on the suite's own source
# (any edit of a module could move the baseline's categories and fail the gate on a correct
# kernel) and on which modules happened to be imported when a draw was made.  The strategies
# name every interesting value themselves (harness/strategies.py), so the suite mines none.
if hasattr(providers, "_get_local_constants") and hasattr(providers, "Constants"):
    providers._get_local_constants = providers.Constants

