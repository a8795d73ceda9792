"""The private Hypothesis internals the suite relies on still do what harness/hypothesis_internals.py says.

Each test fails when a Hypothesis version renames, drops or changes the internal: then the draws of a gate would
no longer be its baseline's, and harness/hypothesis_internals.py is the one place to fix.
"""

import inspect

import hypothesis
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase
from hypothesis.internal.conjecture import providers

from harness import hypothesis_internals


def drawn(seed: int) -> list[int]:
    values = []

    @settings(max_examples=20, database=None, phases=[Phase.generate])
    @given(st.integers())
    def draw(n):
        values.append(n)

    hypothesis_internals.pin_seed(draw, seed)
    draw()
    return values


def test_the_seed_attribute_is_the_one_hypothesis_seed_sets():
    seeded = hypothesis.seed(5)(lambda: None)
    assert getattr(seeded, hypothesis_internals.SEED_ATTRIBUTE) == 5


def test_a_pinned_seed_draws_the_same_examples_and_another_seed_others():
    assert drawn(1) == drawn(1) != drawn(2)


def test_a_pinned_test_keeps_its_example_database():
    """What ``@hypothesis.seed`` would turn off: a soak's failures would never reach the next gate."""
    database = InMemoryExampleDatabase()

    @settings(max_examples=100, database=database, phases=[Phase.generate, Phase.shrink])
    @given(st.integers())
    def fails(n):
        assert n < 10

    hypothesis_internals.pin_seed(fails, 0)
    with pytest.raises(AssertionError):
        fails()
    assert database.data, "the failing example was not saved"


def test_the_miner_turned_off_is_the_one_hypothesis_draws_constants_from():
    assert "_get_local_constants()" in inspect.getsource(providers.HypothesisProvider)
    assert len(providers.Constants()) == 0


def test_no_constant_is_mined_from_the_suites_own_modules():
    """Hypothesis would draw now and then a constant of the suite's source: then editing a suite module,
    or importing one earlier, would change what a derandomised run draws, and move the baseline."""
    import harness.strategies  # noqa: F401  (a local module full of constants, imported)

    assert len(providers._get_local_constants()) == 0
