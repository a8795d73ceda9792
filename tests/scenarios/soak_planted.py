"""Scenario for tests/suite/test_soak.py: a quick Hypothesis test, tests with fixed inputs (``@example``) beside
what they draw or alone, and a failure planted on demand (``SOFTMAX_SUITE_PLANT_LOSS=1``)."""

import os
import time

from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from harness.plugins.timebox import timeboxed


@given(st.integers(0, 10**6))
@timeboxed
def test_slow_examples(n):
    time.sleep(0.05)  # 250 nightly examples would take 12 s: the soak's share ends it sooner
    assert n >= 0


def test_planted_failure():
    assert os.environ.get("SOFTMAX_SUITE_PLANT_LOSS") != "1", "the planted failure"


@given(st.integers(0, 10**9))
@timeboxed
def test_planted_value(n):
    """``SOFTMAX_SUITE_PLANT_LOSS=from``: fails from 123456 on (a soak finds it and shrinks it to
    123456); ``=exact``: fails at 123456 alone, which only a replay of the example database reaches."""
    plant = os.environ.get("SOFTMAX_SUITE_PLANT_LOSS")
    assert not (plant == "from" and n >= 123456 or plant == "exact" and n == 123456), "the planted value"


@given(st.integers(10, 10**6))
@example(1)
@example(2)
@example(3)
@timeboxed
def test_fixed_and_drawn(n):
    assert n >= 0


@settings(phases=[Phase.explicit])
@given(st.integers())
@example(1)
@example(2)
@timeboxed
def test_fixed_only(n):
    """Its fixed inputs alone: a night of it draws nothing."""
    assert n > 0
