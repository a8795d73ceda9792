"""Root conftest: the suite's pytest plugins.

The run's settings (backend, kernels, Hypothesis profile and seeds, baseline,
report) are decided once, by :mod:`harness.session`'s configure step; the
Hypothesis profiles are defined in :mod:`harness.profiles`.
"""

pytest_plugins = ["harness.payload", "harness.known", "harness.session", "harness.plugin", "harness.scheduling",
                  "harness.sharding", "harness.seeding", "harness.timebox", "harness.reporting", "harness.soak_log"]
