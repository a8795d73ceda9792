"""Root conftest: the suite's pytest plugins.

The run's settings (backend, kernels, Hypothesis profile and seeds, baseline,
report) are decided once, by :mod:`harness.plugins.session`'s configure step; the
Hypothesis profiles are defined in :mod:`harness.plugins.profiles`.
"""

pytest_plugins = [
    "harness.internals.payload",
    *(f"harness.plugins.{plugin}" for plugin in ("known", "session", "plugin", "scheduling", "sharding", "seeding",
                                                 "timebox", "reporting", "soak_log")),
]
