"""Scenario for tests/suite/test_known_findings.py: tests of a kernel failing as known findings describe, and not.

Importing it replaces the suite's list of known findings (``specs/known_findings.py``) with this module's, in the
process that collects it: entries for the planted failures of the tests below, run with ``--kernel torch``.
``SOFTMAX_SUITE_PLANT_LOSS=slow`` makes the first test take two seconds, so that a soak's short time box ends
before the others start.
"""

import os
import time

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from harness.plugins.timebox import timeboxed

from specs import known_findings
from specs.known_findings import ANY, KnownFinding

FINDINGS = (
    # The planted bug of test_known_bug, in float32 only.
    KnownFinding("torch", "test_known_bug", ANY, ("float32",), r"returns 0\.5 for a NaN",
                 "docs/findings/planted.md 1: NaN read as 0.5", ("torch", ""), rules=ANY, every_run=False),
    # A bug every run would show, whose test passes: fixed.
    KnownFinding("torch", "test_fixed_bug", ANY, ANY, r"overflows", "docs/findings/planted.md 2: an overflow",
                 ("torch", ""), rules=ANY, every_run=True),
    # An entry about a torch version that is not installed: its failures are new.
    KnownFinding("torch", "test_bug_of_another_version", ANY, ANY, r"returns 0\.5 for a NaN",
                 "docs/findings/planted.md 3: of torch 0.1", ("torch", "0.1."), rules=ANY, every_run=False),
)
known_findings.KNOWN_FINDINGS = FINDINGS + (
    # The known bug of a Hypothesis test that also has a new one (SOFTMAX_SUITE_PLANT_LOSS=new).
    KnownFinding("torch", "test_known_and_new_bug", ANY, ANY, r"known bug at", "docs/findings/planted.md 4: x % 5 == 3",
                 ("torch", ""), rules=ANY, every_run=False),
)


def test_slow_first(kernel):
    if os.environ.get("SOFTMAX_SUITE_PLANT_LOSS") == "slow":
        time.sleep(2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
def test_known_bug(kernel, dtype):
    assert False, f"{kernel.name} returns 0.5 for a NaN ({dtype})"


def test_fixed_bug(kernel):
    assert kernel.name == "torch"


def test_bug_of_another_version(kernel):
    assert False, f"{kernel.name} returns 0.5 for a NaN"


@given(x=st.integers(0, 10**4))
@example(x=3)
@timeboxed
def test_known_and_new_bug(kernel, x):
    """Fails as its known finding says at every x % 5 == 3, first at the explicit example; with the new bug
    planted, also above 50, which Hypothesis finds only if the known failure does not end its search."""
    assert x % 5 != 3, f"known bug at {x}"
    assert not (os.environ.get("SOFTMAX_SUITE_PLANT_LOSS") == "new" and x > 50), f"new bug at {x}"
