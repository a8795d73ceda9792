"""Root conftest: the suite's plugin and its Hypothesis profiles.

Profiles (pick with ``--hypothesis-profile NAME`` or ``HYPOTHESIS_PROFILE``):

* ``dev``: the default on a workstation: a quick, randomised look;
* ``ci``: loaded when ``CI`` is set: derandomised (the same examples every run),
  no deadline (kernels JIT-compile on first call), a budget that keeps the run
  on two CPU cores well under the CI limit;
* ``nightly``: many more examples, for devices and scheduled runs.
"""

import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["harness.plugin"]

_SLOW_DATA = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("dev", max_examples=10, deadline=None, suppress_health_check=_SLOW_DATA)
settings.register_profile(
    "ci", max_examples=25, deadline=None, derandomize=True, database=None,
    print_blob=True, suppress_health_check=_SLOW_DATA,
)
settings.register_profile("nightly", max_examples=200, deadline=None, suppress_health_check=_SLOW_DATA)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
