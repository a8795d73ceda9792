"""Which Hypothesis profile a run uses (the profiles themselves are registered in the root conftest)."""

import os

import pytest


def default_profile() -> str:
    """The profile a run gets without --hypothesis-profile: ``ci`` when CI is set, else ``dev``."""
    return os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")


def active_profile(config: pytest.Config) -> str:
    return config.getoption("hypothesis_profile", None) or default_profile()
