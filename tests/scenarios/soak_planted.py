"""Scenario for tests/test_soak.py: a quick Hypothesis test, and a failure planted on demand
(``SOFTMAX_SUITE_PLANT_LOSS=1``)."""

import os
import time

from hypothesis import given
from hypothesis import strategies as st

from harness.soak import timeboxed


@given(st.integers(0, 10))
@timeboxed
def test_slow_examples(n):
    time.sleep(0.05)  # 250 nightly examples would take 12 s: the soak's share ends it sooner
    assert n >= 0


def test_planted_failure():
    assert os.environ.get("SOFTMAX_SUITE_PLANT_LOSS") != "1", "the planted failure"
