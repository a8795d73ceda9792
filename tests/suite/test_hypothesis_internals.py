"""The private Hypothesis internals the suite relies on still do what harness/internals/hypothesis_internals.py says.

Each test fails when a Hypothesis version renames, drops or changes the internal: then the draws of a gate would
no longer be its baseline's, and harness/internals/hypothesis_internals.py is the one place to fix.
"""

import inspect
import time

import hypothesis
import pytest
from hypothesis import Phase, core, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase
from hypothesis.errors import DidNotReproduce
from hypothesis.internal.conjecture import engine, providers
from hypothesis.reporting import with_reporter

from harness.internals import hypothesis_internals
from harness.plugins import profiles
from harness.plugins.session import session_of


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
    import harness.inputs.strategies  # noqa: F401  (a local module full of constants, imported)

    assert len(providers._get_local_constants()) == 0


def test_the_shrinking_bound_is_the_one_hypothesis_reads_when_it_starts_shrinking():
    assert "time.perf_counter() + MAX_SHRINKING_SECONDS" in inspect.getsource(engine.ConjectureRunner)


def test_this_run_shrinks_for_its_profiles_bound(pytestconfig):
    bound = profiles.SHRINKING_SECONDS[session_of(pytestconfig).draws.profile]
    assert engine.MAX_SHRINKING_SECONDS == (hypothesis_internals.HYPOTHESIS_SHRINKING_SECONDS if bound is None
                                            else bound)


def test_the_slow_shrink_warnings_are_what_hypothesis_reports_when_the_bound_stops_a_shrink():
    source = inspect.getsource(engine.ConjectureRunner)
    assert f'report(\n                "{hypothesis_internals.SLOW_SHRINK_WARNING}' in source
    assert "self.exit_with(ExitReason.very_slow_shrinking)" in source
    assert "report(msg)" in inspect.getsource(core) and "it took too long to shrink" in inspect.getsource(core)
    assert core.report is engine.report  # the one report the run's bound replaces in both


def test_a_failing_example_shrinks_within_the_bound_still_fails_and_says_the_bound_stopped_it(monkeypatch):
    """Not Hypothesis's "more than five minutes ... PLEASE REPORT THIS", five lines in every failure's output."""
    monkeypatch.setattr(engine, "MAX_SHRINKING_SECONDS", engine.MAX_SHRINKING_SECONDS)  # restored after the test
    monkeypatch.setattr(engine, "report", engine.report)
    monkeypatch.setattr(core, "report", core.report)
    hypothesis_internals.bound_shrinking(1)
    failures, said = [], []

    @settings(max_examples=100, database=None, deadline=None, phases=[Phase.generate, Phase.shrink])
    @given(st.lists(st.integers(0, 2**32), min_size=3))
    def fails(values):
        time.sleep(0.1)
        if sum(values) >= 2**20:
            failures.append(time.perf_counter())
            raise AssertionError("planted")

    with pytest.raises(AssertionError, match="planted"), with_reporter(said.append):
        fails()
    # Unbounded, shrinking these three integers takes about sixty calls, six seconds, past the first failure; the
    # bound is checked between calls, and the smallest example found is run once more to report it.
    assert 1 < time.perf_counter() - failures[0] < 4
    assert not any(words in line for line in said for words in ("five minutes", "PLEASE REPORT", "@seed(")), said
    assert "Hypothesis stopped shrinking at the run's bound of 1 s (harness/plugins/profiles.py): the failing example told " \
           "is the smallest it had found by then" in said


FAILING_EXAMPLE = ("Falsifying example", "Failing test case")  # how Hypothesis introduces it, by its version


def test_a_failures_blob_replays_its_example_alone_and_a_passing_replay_is_told_apart():
    """What a replay line's --replay-example runs (harness/plugins/seeding.py): the failing example, and no other."""
    seen = []

    def body(n):
        seen.append(n)
        assert n < 1000, "planted"

    @settings(max_examples=200, database=None, phases=[Phase.generate, Phase.shrink])
    @given(st.integers())
    def fails(n):
        body(n)

    with pytest.raises(AssertionError) as caught:
        fails()
    blob, failing = hypothesis_internals.failure_blob(caught.value), seen[-1]
    assert blob and blob.startswith(f"{hypothesis.__version__}:")
    seen.clear()
    said = []  # what Hypothesis says of the replayed example, which it would print
    with pytest.raises(AssertionError, match="planted"), hypothesis_internals.reports_kept(said):
        given(st.integers())(hypothesis_internals.reproduced(body, blob))()
    told = [note.split(": ", 1) for note in said]  # "Falsifying example" (Hypothesis 6.155), "Failing test case"
    assert seen == [failing] and [(head in FAILING_EXAMPLE, rest) for head, rest in told] == \
        [(True, f"body(\n    n={failing},\n)")], said
    with pytest.raises(DidNotReproduce) as passed:
        given(st.integers())(hypothesis_internals.reproduced(lambda n: None, blob))()
    assert hypothesis_internals.replay_passed(passed.value)
    with pytest.raises(DidNotReproduce) as other:  # the blob of another test's choices
        given(st.lists(st.integers(), min_size=5))(hypothesis_internals.reproduced(lambda values: None, blob))()
    assert not hypothesis_internals.replay_passed(other.value)
    with pytest.raises(ValueError, match="not VERSION:BLOB"):
        hypothesis_internals.reproduced(body, "'; rm -rf ~")


def test_an_explicit_example_is_told_from_a_generated_one():
    """A nightly counts drawn inputs apart from the fixed ones, which it runs once a night."""
    seen = []

    @settings(max_examples=5, database=None, phases=[Phase.explicit, Phase.generate])
    @given(st.integers(min_value=10))
    @hypothesis.example(1)
    @hypothesis.example(2)
    def test(n):
        seen.append((n, hypothesis_internals.running_an_explicit_example()))

    test()
    assert seen[:2] == [(1, True), (2, True)] and len(seen) > 2, seen
    assert not any(explicit for _, explicit in seen[2:]), seen
    assert not hypothesis_internals.running_an_explicit_example()
