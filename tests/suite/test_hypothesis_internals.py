"""The private Hypothesis internals the suite relies on still do what harness/hypothesis_internals.py says.

Each test fails when a Hypothesis version renames, drops or changes the internal: then the draws of a gate would
no longer be its baseline's, and harness/hypothesis_internals.py is the one place to fix.
"""

import inspect
import time

import hypothesis
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase
from hypothesis.internal.conjecture import engine, providers

from harness import hypothesis_internals, profiles
from harness.session import session_of


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


def test_the_shrinking_bound_is_the_one_hypothesis_reads_when_it_starts_shrinking():
    assert "time.perf_counter() + MAX_SHRINKING_SECONDS" in inspect.getsource(engine.ConjectureRunner)


def test_this_run_shrinks_for_its_profiles_bound(pytestconfig):
    bound = profiles.SHRINKING_SECONDS[session_of(pytestconfig).draws.profile]
    assert engine.MAX_SHRINKING_SECONDS == (hypothesis_internals.HYPOTHESIS_SHRINKING_SECONDS if bound is None
                                            else bound)


def test_a_failing_example_shrinks_within_the_bound_and_still_fails(monkeypatch):
    monkeypatch.setattr(engine, "MAX_SHRINKING_SECONDS", engine.MAX_SHRINKING_SECONDS)  # restored after the test
    hypothesis_internals.bound_shrinking(1)
    failures = []

    @settings(max_examples=100, database=None, deadline=None, phases=[Phase.generate, Phase.shrink])
    @given(st.lists(st.integers(0, 2**32), min_size=3))
    def fails(values):
        time.sleep(0.1)
        if sum(values) >= 2**20:
            failures.append(time.perf_counter())
            raise AssertionError("planted")

    with pytest.raises(AssertionError, match="planted"):
        fails()
    # Unbounded, shrinking these three integers takes about sixty calls, six seconds, past the first failure; the
    # bound is checked between calls, and the smallest example found is run once more to report it.
    assert 1 < time.perf_counter() - failures[0] < 4
