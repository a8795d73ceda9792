"""Which Hypothesis profile a run uses (the profiles themselves are registered in the root conftest)."""

import os

import pytest


def default_profile() -> str:
    """The profile a run gets without --hypothesis-profile nor a gate: ``ci`` when CI is set, else ``dev``."""
    return os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")


def active_profile(config: pytest.Config) -> str:
    """The profile this run uses, as :mod:`harness.session` decided it."""
    from .session import session_of

    return session_of(config).draws.profile
