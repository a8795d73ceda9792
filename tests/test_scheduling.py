"""Sharing the machine under ``pytest -n``: idle workers steal queued tests, unless the command line chose a
``--dist``, and start on the first tests collected (the longest); each worker takes its share of the CPU
threads and its children (the suite's sub-runs) inherit it."""

import pytest

QUICK = ("--device", "cpu", "tests/test_formats.py")


@pytest.mark.parametrize("args,scheduler", [((), "WorkStealingScheduling"),
                                            (("--dist", "load"), "LoadScheduling")])
def test_workers_steal_work_unless_the_command_line_chose(run_pytest, args, scheduler):
    result = run_pytest("-n", "2", "-v", *args, *QUICK)
    assert result.returncode == pytest.ExitCode.OK, result.stdout[-2000:]
    assert f"scheduling tests via {scheduler}" in result.stdout


def test_each_worker_starts_on_one_of_the_first_tests_collected(run_pytest, tmp_path):
    result = run_pytest("-n", "2", "tests/scenarios/cards.py", CARDS_SEEN=str(tmp_path))
    assert result.returncode == pytest.ExitCode.OK, result.stdout[-2000:]
    hands = {path.name: [int(card) for card in path.read_text().split()] for path in tmp_path.iterdir()}
    assert sorted(hand[0] for hand in hands.values()) == [0, 1], hands  # not a contiguous half each: 0 and 4


@pytest.mark.parametrize("args,share", [((), 4), (("-n", "2"), 2)])
def test_each_process_takes_its_share_of_the_threads_and_passes_it_on(run_pytest, tmp_path, args, share):
    result = run_pytest(*args, "--device", "cpu", "tests/scenarios/thread_share.py", OMP_NUM_THREADS="4",
                        THREADS_SEEN=str(tmp_path))
    assert result.returncode == pytest.ExitCode.OK, result.stdout[-2000:]
    seen = {path.name: path.read_text() for path in tmp_path.iterdir()}
    assert seen and set(seen.values()) == {f"{share} {share}"}, seen
