"""Sharing the machine under ``pytest -n``: idle workers steal queued tests, unless the command line chose a
``--dist``, and start on the tests marked ``first``, then on the longest; each worker takes its share of the CPU
threads and its children (the suite's sub-runs) inherit it."""

import json

import pytest

from harness.plugins.scheduling import first_looks_then_longest

QUICK = ("--device", "cpu", "tests/suite/test_formats.py")


@pytest.mark.parametrize("args,scheduler", [((), "WorkStealingScheduling"),
                                            (("--dist", "load"), "LoadScheduling")])
def test_workers_steal_work_unless_the_command_line_chose(run_pytest, args, scheduler):
    result = run_pytest("-n", "2", "-v", *args, *QUICK)
    assert result.returncode == pytest.ExitCode.OK, result.stdout[-2000:]
    assert f"scheduling tests via {scheduler}" in result.stdout


def first_cards(seen) -> list[int]:
    hands = {path.name: [int(card) for card in path.read_text().split()] for path in seen.iterdir()}
    return sorted(hand[0] for hand in hands.values())


def test_workers_start_on_the_tests_marked_first_then_the_longest_recorded_else_the_first_collected(
        run_pytest, tmp_path):
    durations = tmp_path / "durations.json"
    unrecorded, recorded = tmp_path / "unrecorded", tmp_path / "recorded"
    for seen in (unrecorded, recorded):
        seen.mkdir()
        result = run_pytest("-n", "2", "tests/scenarios/cards.py", "--test-durations", str(durations),
                            "--record-durations", CARDS_SEEN=str(seen), CARDS_NAPS="5:0.6,2:0.3", CARDS_FIRST="7",
                            CARDS_WAITS="3:0.9")
        assert result.returncode == pytest.ExitCode.OK, result.stdout[-2000:]
    recorded_seconds = json.loads(durations.read_text())
    assert len(recorded_seconds) == 8 and recorded_seconds["tests/scenarios/cards.py::test_card[5]"] >= 0.6
    assert recorded_seconds["tests/scenarios/cards.py::test_card[3]"] < 0.3  # its wait for another test's work left out
    assert first_cards(unrecorded) == [0, 7]  # the first-marked, then the first collected: not a contiguous half each
    assert first_cards(recorded) == [5, 7]  # the first-marked, then the longest (card 5, before card 2)


@pytest.mark.parametrize("args,share", [((), 4), (("-n", "2"), 2)])
def test_each_process_takes_its_share_of_the_threads_and_passes_it_on(run_pytest, tmp_path, args, share):
    result = run_pytest(*args, "--device", "cpu", "tests/scenarios/thread_share.py", OMP_NUM_THREADS="4",
                        THREADS_SEEN=str(tmp_path))
    assert result.returncode == pytest.ExitCode.OK, result.stdout[-2000:]
    seen = {path.name: path.read_text() for path in tmp_path.iterdir()}
    assert seen and set(seen.values()) == {f"{share} {share}"}, seen


class Item:
    """What the ordering reads of a collected test: its id, whether it is marked first, its fixtures."""

    def __init__(self, nodeid, first=False, fixturenames=(), last=False):
        self.nodeid, self.first, self.fixturenames, self.last = nodeid, first, fixturenames, last

    def get_closest_marker(self, name):
        return name if (name == "first" and self.first) or (name == "last" and self.last) else None


def test_a_test_the_durations_do_not_name_takes_the_longest_of_its_family():

    items = [Item(n) for n in ("t.py::short", "t.py::acc[user-float32]", "t.py::new", "t.py::acc[full-float32]")]
    durations = {"t.py::short": 1.0, "t.py::acc[full-float32]": 90.0, "t.py::acc[torch-float32]": 40.0}
    assert [i.nodeid for i in first_looks_then_longest(items, durations)] == [
        "t.py::acc[user-float32]", "t.py::acc[full-float32]", "t.py::short", "t.py::new"]


def test_of_the_tests_marked_first_those_that_record_accuracy_come_first_of_all():
    """Their failure names the bug; a cheap check's (a special case, the bias) is often its side effect."""
    items = [Item("special[+inf]", first=True), Item("bias", first=True), Item("long"),
             Item("accuracy[float32]", first=True, fixturenames=("kernel", "accuracy_record")),
             Item("accuracy[bfloat16]", first=True, fixturenames=("kernel", "accuracy_record"))]
    durations = {"special[+inf]": 0.01, "bias": 2.0, "long": 300.0, "accuracy[float32]": 40.0,
                 "accuracy[bfloat16]": 20.0}
    assert [i.nodeid for i in first_looks_then_longest(items, durations)] == [
        "accuracy[bfloat16]", "accuracy[float32]", "special[+inf]", "bias", "long"]


def test_the_tests_marked_last_come_after_all_others_where_the_workers_are_few():
    """They read sub-runs the others make: run early on two workers, they waited for the other one to make them;
    on sixteen, run last, they made the run's tail."""
    items = [Item("reads[b]", last=True), Item("short"), Item("reads[a]", last=True), Item("cheap", first=True),
             Item("long")]
    durations = {"reads[a]": 60.0, "reads[b]": 30.0, "short": 1.0, "cheap": 0.1, "long": 300.0}
    assert [i.nodeid for i in first_looks_then_longest(items, durations, workers=2)] == [
        "cheap", "long", "short", "reads[a]", "reads[b]"]
    assert [i.nodeid for i in first_looks_then_longest(items, durations, workers=16)] == [
        "cheap", "long", "reads[a]", "reads[b]", "short"]


# xdist stops a run at -x's first failure by interrupting it.
@pytest.mark.parametrize("args,status", [((), pytest.ExitCode.TESTS_FAILED),
                                         (("-n", "2"), pytest.ExitCode.INTERRUPTED)],
                         ids=["in collection order", "under xdist"])
def test_under_x_the_first_failure_told_is_the_accuracy_tests(run_pytest, args, status):
    """NaN dropped before the max fails the special case 'nan' within milliseconds, the bias test within a second,
    and the accuracy tests, which name the bug, on their first catalog input: under -x, told first."""
    result = run_pytest(*args, "-x", "tests/kernel", "-k", "special_case or mean_signed or test_output_within",
                        "--device", "cpu", "--hypothesis-profile", "mutation", "--kernel",
                        "specs.mutants:nan_dropped_by_max")
    assert result.returncode == status, result.stdout[-3000:]
    told = [line for line in result.stdout.splitlines() if line.startswith("failure: ")]
    assert told and told[0].startswith("failure: tests/kernel/test_accuracy.py::test_output_within_derived_bound["), \
        told
