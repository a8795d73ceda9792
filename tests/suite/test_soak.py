"""The soak: time-boxed rounds that end every test within its share and report what failed."""

import json
import re
import signal
import sys
import time

import pytest

from harness.plugins import timebox
from harness.soak import INCOMPLETE
from tests.scenarios.soak_stalled import is_running, stalled_pid
from tests import subruns

SCENARIO = "tests/scenarios/soak_planted.py"
STALLED = "tests/scenarios/soak_stalled.py"


def test_each_test_gets_an_equal_share_of_the_workers_time():
    assert timebox.per_test_seconds(minutes=2, workers=4, tests=60) == 8.0
    assert timebox.per_test_seconds(minutes=1, workers=0, tests=0) == 60.0


def test_a_spent_share_ends_the_examples_left_but_never_a_failures_replays(monkeypatch):
    calls = []

    @timebox.timeboxed
    def body(n):
        calls.append(n)
        if n < 0:
            raise AssertionError("fails")

    monkeypatch.setattr(timebox, "_ran", 0)
    monkeypatch.setattr(timebox, "_failed", False)
    monkeypatch.setattr(timebox, "_test_deadline", time.time() - 1)
    body(1)  # the first example always runs
    body(2)  # the share is spent: returns at once
    assert calls == [1]
    with pytest.raises(AssertionError):
        timebox._ran = 0
        body(-1)
    body(3)  # after a failure every example runs, so that Hypothesis can replay it
    assert calls == [1, -1, 3]
    monkeypatch.setattr(timebox, "_test_deadline", None)
    monkeypatch.setattr(timebox, "_failed", False)
    body(4)  # no soak: everything runs
    assert calls[-1] == 4


def test_a_round_counts_its_time_from_the_end_of_collection_not_from_start_up(run_pytest):
    """The driver's deadline passed during start-up (a loaded machine): the round's minutes still run its tests;
    without --soak-minutes the deadline is kept, and tests starting after it are skipped."""
    late = ("--device", "cpu", SCENARIO, "-k", "slow or value", "--hypothesis-profile", "nightly",
            f"--soak-deadline={time.time() - 60}", "-rs")
    moved = run_pytest(*late, "--soak-minutes", "0.1")
    assert moved.returncode == pytest.ExitCode.OK and re.search(r"\b2 passed\b", moved.stdout), moved.stdout[-2000:]
    kept = run_pytest(*late)
    assert re.search(r"\b2 skipped\b", kept.stdout) and "NOT RUN: the soak round's time box ended" in kept.stdout, \
        kept.stdout[-2000:]


def soak_command(out, *options, tests=(STALLED, "-k", "passes"), workers=0, **constants):
    """``python -m harness.soak`` into ``out``, a round of ``tests`` on the CPU (under xdist with ``workers``);
    ``constants`` of harness.soak replaced (shorter waits)."""
    patch = "".join(f"soak.{name} = {value!r}; " for name, value in constants.items())
    driver = ["-c", f"import sys; from harness import soak; {patch}sys.exit(soak.main())"] if constants else [
        "-m", "harness.soak"]
    xdist = ["-n", str(workers)] if workers else ["-p", "no:xdist"]
    return [sys.executable, *driver, "--out", str(out), *options, "--", *xdist, "--device", "cpu", *tests]


def run_soak(tmp_path, **env):
    # 24 s of testing (a round's minutes count from the end of its collection, so a loaded machine's start-up
    # does not eat them).
    return subruns.run(soak_command(tmp_path, "--minutes", "0.4", tests=[SCENARIO]), **env)


def test_the_driver_runs_rounds_and_writes_what_ran(tmp_path):
    started = time.time()
    result = run_soak(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((tmp_path / "soak.json").read_text())
    first = summary["rounds"][0]
    assert first["passed"] == 5 and first["failed"] == 0 and isinstance(first["seed"], int)
    assert 1 <= first["examples_per_test"][f"{SCENARIO}::test_slow_examples"] < 250  # ended by its share
    assert time.time() - started < 120
    assert f"| 1 | {first['seed']} |" in (tmp_path / "soak.md").read_text()
    fewest = min(r["drawn_per_test"][test] for r in summary["rounds"] for test, count in r["examples_per_test"].items()
                 if count)
    assert f"nothing failed or erred; the fewest inputs a test drew in a round: {fewest}, beside " in \
        (tmp_path / "soak.md").read_text()


def test_the_driver_fails_and_says_how_to_replay_a_failure(tmp_path):
    result = run_soak(tmp_path, SOFTMAX_SUITE_PLANT_LOSS="1")
    assert result.returncode == 1, result.stdout + result.stderr
    report = (tmp_path / "soak.md").read_text()
    assert f"failed: `{SCENARIO}::test_planted_failure`" in report and "the planted failure" in report
    replay = report.split("Replay: `")[1].split("`")[0]
    assert replay.startswith("SOFTMAX_SUITE_EXAMPLES=") and "--soak-seed=" in replay and "--soak-deadline" not in replay


def test_what_a_soak_finds_is_replayed_by_the_next_gate(tmp_path):
    found = run_soak(tmp_path, SOFTMAX_SUITE_PLANT_LOSS="from")
    assert found.returncode == 1 and "test_planted_value" in (tmp_path / "soak.md").read_text()
    gate, env = subruns.python("pytest", SCENARIO, "-k", "value"), {"CI": "1", "SOFTMAX_SUITE_PLANT_LOSS": "exact"}
    alone = subruns.run(gate, **env)
    assert alone.returncode == 0, alone.stdout[-2000:]  # 25 pinned-seed examples never draw 123456
    replayed = subruns.run(gate, **env, SOFTMAX_SUITE_EXAMPLES=str(tmp_path / "examples"))
    assert replayed.returncode == 1 and "n=123456" in replayed.stdout, replayed.stdout[-2000:]


DRAWING_TEST = """
from hypothesis import given, strategies as st

@given(st.integers())
def test_draws(n):
{edit}    with open("draws.txt", "a") as f:
        f.write(f"{{n}}\\n")
"""
CI_PROFILE_ONLY = """
from hypothesis import settings
pytest_plugins = ["harness.plugins.seeding"]
settings.register_profile("ci", max_examples=20, derandomize=True, database=None)
"""


@pytest.mark.parametrize("minutes", ["-5", "0", "nan", "inf"])
def test_a_time_box_that_is_not_a_positive_number_of_minutes_is_refused(tmp_path, minutes):
    result = subruns.run(soak_command(tmp_path, f"--minutes={minutes}"), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "argument --minutes" in result.stderr and "above 0" in result.stderr, result.stderr
    assert not any(tmp_path.iterdir())  # no round ran


@pytest.mark.parametrize("selected, why", [("skipped", "all 1 of its tests were skipped"),
                                            ("no_such_test", "pytest ran no test (exit status 5)")])
def test_a_round_that_tested_nothing_fails(tmp_path, selected, why):
    result = subruns.run(soak_command(tmp_path, "--minutes", "0.2", tests=[STALLED, "-k", selected]))
    assert result.returncode == 1, result.stdout + result.stderr
    first = json.loads((tmp_path / "soak.json").read_text())["rounds"][0]
    assert first["passed"] == first["failed"] == 0 and first["error"] == 1
    assert f"round 1 tested nothing: {why}" in (tmp_path / "soak.md").read_text()


def test_a_round_that_tested_nothing_of_a_kernel_it_named_fails(tmp_path):
    """torch passing beside a kernel whose every test was skipped (it declares no log_softmax)."""
    tests = ["tests/kernel/test_accuracy.py", "-k", "test_output_within_derived_bound and log_softmax-float32",
             "--kernel", "examples/my_kernels.py:softmax", "--kernel", "torch"]
    result = subruns.run(soak_command(tmp_path, "--minutes", "0.2", tests=tests))
    assert result.returncode == 1, result.stdout + result.stderr
    first = json.loads((tmp_path / "soak.json").read_text())["rounds"][0]
    assert first["passed"] == 1 and first["error"] == 1, first
    assert "round 1 tested nothing of a kernel it named" in (tmp_path / "soak.md").read_text()


def start_stalling_soak(tmp_path, *options, workers=0, constants=None, **env):
    """A soak into tmp_path/soak whose round stalls in tests/scenarios/soak_stalled.py's test_stalls: the driver,
    and the process running that test (the round's pytest, or its xdist worker) once it stalls."""
    pid_file = tmp_path / "stalled.pid"
    command = soak_command(tmp_path / "soak", *options, tests=[STALLED, "-k", "stalls"], workers=workers,
                           **(constants or {}))
    driver = subruns.start(command, SOFTMAX_SUITE_PID_FILE=str(pid_file), **env)
    try:
        return driver, stalled_pid(pid_file, driver)
    except BaseException:
        driver.kill()
        raise


@pytest.mark.parametrize("signum, workers", [(signal.SIGINT, 0), (signal.SIGTERM, 0), (signal.SIGTERM, 1)],
                         ids=["SIGINT", "SIGTERM", "SIGTERM-to-an-xdist-round"])
def test_a_signal_stops_the_round_and_the_driver_writes_what_ran_marked_interrupted(tmp_path, signum, workers):
    driver, stalled = start_stalling_soak(tmp_path, "--minutes", "1", workers=workers)
    driver.send_signal(signum)
    try:
        output = driver.communicate(timeout=60)[0]
    finally:
        driver.kill()
    assert driver.returncode == 128 + signum, output
    assert not is_running(stalled), "the stalled test's process outlived the driver"
    summary = json.loads((tmp_path / "soak" / "soak.json").read_text())
    assert summary["interrupted"] == signum.name and [r["round"] for r in summary["rounds"]] == [1]
    assert summary["rounds"][0]["stopped"] == f"interrupted: stopped with {signum.name}"
    assert (tmp_path / "soak" / "soak.md").read_text().startswith(f"# Soak\n\n**INTERRUPTED** by {signum.name}")


def test_a_round_past_its_time_box_is_stopped_killed_if_it_ignores_that_and_errs(tmp_path):
    driver, stalled = start_stalling_soak(tmp_path, "--minutes", "0.4",
                                          constants={"ROUND_MARGIN_SECONDS": 2, "GRACE_SECONDS": 2},
                                          SOFTMAX_SUITE_IGNORE_SIGTERM="1")
    try:
        output = driver.communicate(timeout=90)[0]
    finally:
        driver.kill()
    assert driver.returncode == 1, output
    assert not is_running(stalled), "the round's pytest outlived its time box"
    first = json.loads((tmp_path / "soak" / "soak.json").read_text())["rounds"][0]
    assert first["error"] == 1 and first["stopped"] == "time box"
    assert re.search(r"^\* round 1 exceeded its time box by \d+ s: stopped with SIGTERM, then SIGKILL 2 s later",
                     (tmp_path / "soak" / "soak.md").read_text(), re.MULTILINE), output


def test_a_rerun_into_a_folder_holding_rounds_is_refused_and_resume_adds_its_rounds_after_them(tmp_path):
    def soak_into_tmp_path(*options):
        return subruns.run(soak_command(tmp_path, "--minutes", "0.2", *options))

    first = soak_into_tmp_path()
    assert first.returncode == 0, first.stdout + first.stderr
    earlier = json.loads((tmp_path / "soak.json").read_text())
    refused = soak_into_tmp_path()
    assert refused.returncode == 2 and "round-1" in refused.stderr and "--resume" in refused.stderr, refused.stderr
    assert json.loads((tmp_path / "soak.json").read_text()) == earlier and not (tmp_path / "round-2").exists()
    resumed = soak_into_tmp_path("--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    rounds = json.loads((tmp_path / "soak.json").read_text())["rounds"]
    assert [r["round"] for r in rounds] == [1, 2] and rounds[0] == earlier["rounds"][0]
    assert f"| 2 | {rounds[1]['seed']} |" in (tmp_path / "soak.md").read_text()


def test_an_edit_of_a_tests_source_moves_none_of_its_ci_draws(tmp_path):
    """Derandomised draws follow a hash of the test's source: the ci gate drew other inputs than
    its baseline's after an edit of a test, and flagged correct kernels.  The pinned seed holds."""
    draws = []
    for name, edit in (("before", ""), ("after", "    n = int(n)  # an edit that changes no draw\n")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "test_draws.py").write_text(DRAWING_TEST.format(edit=edit))
        (folder / "conftest.py").write_text(CI_PROFILE_ONLY)
        run = subruns.run(subruns.python("pytest", "--hypothesis-profile", "ci", "test_draws.py"), cwd=folder,
                          PYTHONPATH=str(subruns.ROOT))
        assert run.returncode == 0, run.stdout[-2000:]
        draws.append((folder / "draws.txt").read_text().split())
    assert len(draws[0]) > 1 and draws[0] == draws[1]


def test_a_long_hypothesis_test_reports_its_progress_from_an_xdist_worker(run_pytest):
    result = run_pytest("-n", "2", "-v", "--hypothesis-profile", "ci", "--progress-every", "0.3", SCENARIO, "-k", "slow")
    assert result.returncode == 0, result.stdout[-2000:]
    lines = re.findall(rf"\[progress\] {re.escape(SCENARIO)}::test_slow_examples: (\d+) examples, \d+ s",
                       result.stdout + result.stderr)
    assert len(lines) >= 2 and int(lines[-1]) > int(lines[0])


def test_parallel_rounds_run_at_once_each_with_its_seed_and_say_each_kernels_depth(tmp_path):
    """Two rounds at once (seed shards): both in the time of one, with seeds of their own; soak.md's table per
    kernel counts the examples of both."""
    started = time.time()
    result = subruns.run(soak_command(tmp_path, "--minutes", "0.25", "--parallel", "2",
                                      tests=["--kernel", "torch", "tests/scenarios/known_findings.py", "-k",
                                             "slow_first"]))
    assert result.returncode == 0, result.stdout + result.stderr
    rounds = json.loads((tmp_path / "soak.json").read_text())["rounds"]
    assert len(rounds) >= 2 and len(rounds) % 2 == 0 and len({r["seed"] for r in rounds}) == len(rounds), rounds
    assert time.time() - started < 0.25 * 60 + 60 * len(rounds) / 2, result.stdout
    text = (tmp_path / "soak.md").read_text()
    assert f"| torch | {len(rounds)} | 0 | 0 |" in text, text


def test_examples_per_test_gives_every_test_that_many_examples_whatever_its_share_of_time(tmp_path):
    """The planted scenario's slow test (0.05 s an example) runs its 180 examples (9 s), though its share of a 12 s
    round (6 s: two tests, one worker) would end it near 120; the quick one runs 180 too."""
    result = subruns.run(soak_command(tmp_path, "--minutes", "0.2", "--examples-per-test", "180",
                                      tests=[SCENARIO, "-k", "slow or value"]))
    assert result.returncode == 0, result.stdout + result.stderr
    ran = json.loads((tmp_path / "soak.json").read_text())["rounds"][0]["examples_per_test"]
    assert ran[f"{SCENARIO}::test_slow_examples"] == 180 and ran[f"{SCENARIO}::test_planted_value"] == 180, ran


def test_a_nights_first_round_runs_the_fixed_inputs_and_every_round_draws_its_count(tmp_path):
    """--examples-per-test counts what a test draws: the README's nightly (20 a test) had run 20 of an accuracy
    test's 160 fixed inputs and drawn none, the same inputs every night.  Two rounds at once: the night's first runs
    the test's three fixed inputs and draws 5, the other draws 5 alone."""
    result = subruns.run(soak_command(tmp_path, "--minutes", "1", "--rounds", "2", "--parallel", "2",
                                      "--examples-per-test", "5", tests=[SCENARIO, "-k", "fixed_and_drawn"]))
    assert result.returncode == 0, result.stdout + result.stderr
    rounds = json.loads((tmp_path / "soak.json").read_text())["rounds"]
    test = f"{SCENARIO}::test_fixed_and_drawn"
    assert [(r["examples_per_test"][test], r["drawn_per_test"][test]) for r in rounds] == [(8, 5), (5, 5)], rounds
    assert f"| `{test}` | 10 | 3 |" in (tmp_path / "soak.md").read_text()


def test_a_night_that_drew_nothing_is_incomplete(tmp_path):
    result = subruns.run(soak_command(tmp_path, "--minutes", "0.2", "--rounds", "1", "--examples-per-test", "5",
                                      tests=[SCENARIO, "-k", "fixed_only"]))
    assert result.returncode == INCOMPLETE, result.stdout + result.stderr
    assert "**INCOMPLETE** 1 round(s) drew no input" in (tmp_path / "soak.md").read_text()


def test_rounds_caps_the_rounds_however_much_of_the_time_box_is_left(tmp_path):
    """A fixed amount of search (one round of 20 examples a test) in a time box of ten minutes: the soak ends after
    its round, not at the box's end, and --parallel does not add rounds past the cap."""
    started = time.time()
    result = subruns.run(soak_command(tmp_path, "--minutes", "10", "--rounds", "1", "--parallel", "2",
                                      "--examples-per-test", "20", tests=[SCENARIO, "-k", "value"]))
    assert result.returncode == 0, result.stdout + result.stderr
    rounds = json.loads((tmp_path / "soak.json").read_text())["rounds"]
    assert [r["examples_per_test"] for r in rounds] == [{f"{SCENARIO}::test_planted_value": 20}], rounds
    assert time.time() - started < 5 * 60, result.stdout
