"""Hostile kernels (tests/hostile/) get an honest verdict: each fails for what it does, saying so and naming the
input; the correct ones pass.  Each runs in a sub-run of the suite, under the mutation profile (the gate's
examples, stopping at the first failure) unless the test says otherwise."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hostile.misbehaving import PLANTED

ROOT = Path(__file__).resolve().parents[1]
FP32_ACCURACY = ("tests/test_accuracy.py", "-k", "test_softmax_within and float32")
# Tests of other modules beside, which must still report when a kernel hangs or kills its process.
FP32_AND_OTHERS = ("tests/test_accuracy.py", "tests/test_ulp.py", "-k", "test_softmax_within and float32 or test_ulp")
EVERY_AND_OTHERS = ("tests/test_accuracy.py", "tests/test_ulp.py", "-k", "test_softmax_within or test_ulp")
QUICK = ("--device", "cpu", "--hypothesis-profile", "mutation", "--self-tests")


def failed_tests(stdout: str) -> list[str]:
    return re.findall(r"^FAILED (\S+)", stdout, re.MULTILINE)


def test_a_kernel_that_zeroes_its_input_fails_every_test_for_changing_it(run_pytest):
    """Judged against the zeros it left, its uniform rows (off by up to 0.99) would be exact."""
    result = run_pytest("tests/test_accuracy.py", "tests/test_bias.py", "tests/test_contract.py",
                        "tests/test_metamorphic.py", "-k", "test_softmax_within and float32 or mean_signed or "
                        "refused_exactly or unit_interval", *QUICK, "--kernel", "tests.hostile.in_place:zeroes_input")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout[-3000:]
    failed = {test.split("::")[0] for test in failed_tests(result.stdout)}
    # test_contract judges inside the capabilities only the fp32 inputs it happens to draw: none in its 25 examples
    assert failed >= {"tests/test_accuracy.py", "tests/test_bias.py", "tests/test_metamorphic.py"}, result.stdout[-3000:]
    assert result.stdout.count("the kernel changed its input x") >= 3


def test_a_kernel_that_writes_its_result_into_its_input_fails_for_it(run_pytest):
    result = run_pytest(*FP32_ACCURACY, *QUICK, "--kernel", "tests.hostile.in_place:writes_result_into_input")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED and "the kernel changed its input x" in result.stdout


def test_a_kernel_that_declares_it_works_in_place_is_handed_a_copy_and_passes(run_pytest):
    result = run_pytest(*FP32_ACCURACY[:2], "test_softmax_within and float32 or refused_exactly or determinism or shift",
                        "tests/test_contract.py", "tests/test_metamorphic.py", *QUICK,
                        "--kernel", "tests.hostile.in_place:declared_in_place")
    assert result.returncode == 0, result.stdout[-3000:]


def test_an_output_buffer_reused_across_calls_fails_and_is_never_baselined_as_deterministic(run_pytest):
    noisy = run_pytest("tests/test_metamorphic.py", "-k", "determinism", *QUICK, "--kernel",
                       "tests.hostile.cached_output:noisy")
    assert noisy.returncode == pytest.ExitCode.TESTS_FAILED and "BROKEN (promised)" in noisy.stdout
    cached = run_pytest("tests/test_metamorphic.py", "-k", "determinism", *QUICK, "--kernel",
                        "tests.hostile.cached_output:noisy_cached")
    assert cached.returncode == pytest.ExitCode.TESTS_FAILED
    assert "returned memory it returned before, still in use" in cached.stdout
    assert not re.search(r"^tests\.hostile\.cached_output:noisy_cached +held", cached.stdout, re.MULTILINE)


def test_numbers_returned_outside_the_declared_capabilities_are_judged(run_pytest):
    """Declared fp32 rank 2, zeros for anything else: right where it declares, wrong elsewhere."""
    result = run_pytest("tests/test_contract.py", "tests/test_accuracy.py", "-k",
                        "refused_exactly or test_softmax_within and float32", *QUICK,
                        "--kernel", "tests.hostile.out_of_capabilities:zeros_outside")
    assert failed_tests(result.stdout) == [
        "tests/test_contract.py::test_inputs_are_refused_exactly_outside_the_declared_capabilities"
        "[tests.hostile.out_of_capabilities:zeros_outside]"], result.stdout[-3000:]
    assert "returned numbers for an input outside its declared capabilities" in result.stdout


def test_a_hanging_call_fails_its_test_by_the_watchdog_names_its_input_and_the_run_goes_on(run_pytest):
    started = time.monotonic()
    result = run_pytest(*EVERY_AND_OTHERS, *QUICK, "--call-timeout", "2", "--kernel", "tests.hostile.misbehaving:hangs")
    elapsed = time.monotonic() - started
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout[-3000:]
    assert len(failed_tests(result.stdout)) == 3 and re.search(r"\b\d+ passed", result.stdout.splitlines()[-1])
    hangs = re.findall(r"KernelHang: tests.hostile.misbehaving:hangs softmax on shape=\(.*? dim=\d .*?replay: python "
                       r"-m harness.replay .*?: the call did not return within 2 s", result.stdout)
    assert len(hangs) == 3, result.stdout[-3000:]
    assert elapsed < 90, elapsed  # three calls stopped at 2 s each, and the start-up of a sub-run


@pytest.mark.parametrize("hostile,why", [("hangs_deaf", "the watchdog ended this process"),
                                         ("exits", "the process died during the call")])
def test_a_worker_that_dies_in_a_kernel_call_names_the_input_and_the_run_goes_on(run_pytest, tmp_path, hostile, why):
    result = run_pytest("-n", "2", *FP32_AND_OTHERS, *QUICK, "--call-timeout", "2",
                        "--kernel", f"tests.hostile.misbehaving:{hostile}", "--accuracy-report", str(tmp_path))
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout[-3000:]
    assert re.search(r"\b\d+ passed", result.stdout.splitlines()[-1])  # the other tests still ran
    assert re.search(rf"crashed while running .*: {why}; the call: tests.hostile.misbehaving:{hostile} softmax on "
                     r"shape=\(", result.stdout), result.stdout[-3000:]
    failure = json.loads((tmp_path / "accuracy.json").read_text())["failures"][0]
    assert failure["replay"].startswith(f"python -m harness.replay --kernel tests.hostile.misbehaving:{hostile}")


def test_a_run_that_dies_in_a_kernel_call_leaves_no_verdict_but_the_call(run_pytest, tmp_path):
    result = run_pytest(*FP32_ACCURACY, *QUICK, "--kernel", "tests.hostile.misbehaving:exits",
                        "--accuracy-report", str(tmp_path))
    assert result.returncode == 3  # the kernel's own exit status: the run died with it
    summary = (tmp_path / "summary.md").read_text()
    assert "INCOMPLETE" in summary and "PASSED" not in summary
    crumbs = Path(re.search(r"kernel calls in progress are in (\S+)\*\*", summary).group(1))
    crumb = json.loads((crumbs / "main.json").read_text())
    assert crumb["state"] == "running" and crumb["input"].startswith("shape=(") and crumb["replay"]


def test_a_kernel_raising_inside_its_capabilities_fails_and_cannot_plant_a_replay_in_the_reports(run_pytest, tmp_path):
    result = run_pytest(*FP32_ACCURACY, *QUICK, "--kernel", "tests.hostile.misbehaving:raises",
                        "--accuracy-report", str(tmp_path))
    assert result.returncode == pytest.ExitCode.TESTS_FAILED
    assert "the kernel raised RuntimeError: an illegal memory access" in result.stdout
    assert "on an input inside its declared capabilities" in result.stdout
    failures = json.loads((tmp_path / "accuracy.json").read_text())["failures"]
    assert [f["replay"].split(" --kernel")[0] for f in failures] == ["python -m harness.replay"]
    assert f"replay: `{PLANTED}" not in (tmp_path / "summary.md").read_text()
    assert "replay: <code>python -c" not in (tmp_path / "index.html").read_text()


@pytest.mark.parametrize("workers,signum", [("-n 2", signal.SIGTERM), ("-p no:xdist", signal.SIGINT)])
def test_an_interrupted_run_says_interrupted_and_names_the_calls_in_progress(tmp_path, workers, signum):
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTEST_XDIST_WORKER",
                                                            "PYTEST_XDIST_WORKER_COUNT")}
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *workers.split(), *FP32_ACCURACY,
                            *QUICK, "--kernel", "tests.hostile.misbehaving:hangs", "--accuracy-report", str(tmp_path)],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "hangs softmax on shape=(2, 1, 2047)" not in crumbs(tmp_path):
        time.sleep(0.5)
    run.send_signal(signum)
    stdout, _ = run.communicate(timeout=120)
    assert run.returncode == pytest.ExitCode.INTERRUPTED, stdout[-3000:]
    summary = (tmp_path / "summary.md").read_text()
    assert summary.splitlines()[2].startswith("**INTERRUPTED"), summary[:500]
    assert "## Kernel calls in progress when the run was interrupted" in summary
    assert "tests.hostile.misbehaving:hangs softmax on shape=(2, 1, 2047)" in summary


def crumbs(report: Path) -> str:
    """The breadcrumbs of a run writing its report to ``report`` (the placeholder says where they are)."""
    try:
        folder = re.search(r"kernel calls in progress are in (\S+)\*\*", (report / "summary.md").read_text()).group(1)
        return " ".join(path.read_text() for path in Path(folder).glob("*.json"))
    except (OSError, AttributeError):
        return ""


def test_the_replay_holds_a_kernel_to_the_same_rules_as_a_run():
    """It was fooled as the run was: "0 of 388 elements beyond the derived bound", the row's input shown as zeros."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-m", "harness.replay", "--kernel", "tests.hostile.in_place:zeroes_input",
                             "--device", "cpu", "Case(shape=(4, 97), dim=1, dtype=torch.float32, seed=3)"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and "the kernel changed its input x" in result.stdout, result.stdout + result.stderr
