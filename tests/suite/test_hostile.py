"""Hostile kernels (tests/hostile/) get an honest verdict: each fails for what it does, saying so and naming the
input; the correct ones pass.  They run in sub-runs of the suite, several kernels a sub-run where they can share
one, under the mutation profile (the gate's examples, each test stopping at its first failing example)."""

import json
import re
import signal
import time
from pathlib import Path

import pytest

from harness.guard.replay_command import PYTHON
from tests import outcomes, subruns
from tests.hostile.misbehaving import PLANTED

HOSTILE = "tests.hostile."
FP32_ACCURACY = ("tests/kernel/test_accuracy.py", "-k", "test_output_within and -softmax- and float32")
# Tests of another module beside, which must still report when a kernel hangs or kills its process.
FP32_AND_OTHERS = ("tests/kernel/test_accuracy.py", "tests/suite/test_ulp.py", "-k", "test_output_within and -softmax- and float32 or test_ulp")
QUICK = ("--device", "cpu", "--hypothesis-profile", "mutation", "--self-tests")
# One sub-run for the kernels that keep to their process: these tests, each kernel by name.
BATCH_TESTS = ("tests/kernel/test_accuracy.py", "tests/kernel/test_statistical_bias.py", "tests/kernel/test_refusals.py", "tests/kernel/test_metamorphic.py",
               "-k", "test_output_within and (-softmax- or biased_softmax or -softmax_backward) and float32 or "
                     "mean_signed or refused_exactly or unit_interval or determinism or shift_invariance")
# The kernels that leave the arithmetic flushing, or torch changed, go first: every other kernel is judged after
# their calls.
BATCH_KERNELS = ("flushing:flushes_on_call", "torch_state:replaces_on_call", "torch_state:sets_default_dtype",
                 "torch_state:enters_a_mode", "flushing:keeps_watch",
                 "in_place:zeroes_input",
                 "in_place:transposes_input", "in_place:writes_result_into_input", "in_place:declared_in_place",
                 "in_place:zeroes_bias", "in_place:zeroes_gradient",
                 "cached_output:noisy", "cached_output:noisy_cached", "out_of_capabilities:zeros_outside",
                 "misbehaving:raises")


def failed_tests(stdout: str) -> list[str]:
    return re.findall(r"^FAILED (\S+)", stdout, re.MULTILINE)


@pytest.fixture
def batch(once) -> dict:
    """The batch's sub-run, once for the whole run: per kernel, its tests' failure messages by test function (None:
    passed), and the run's report folder."""
    result, folder = once("hostile-batch", run_batch)
    return {**result, "report": folder / "report"}


def run_batch(folder: Path) -> dict:
    kernels = [arg for name in BATCH_KERNELS for arg in ("--kernel", HOSTILE + name)]
    result = subruns.run(subruns.python("pytest", *BATCH_TESTS, *QUICK, *kernels, "--outcomes",
                                        str(folder / "outcomes.jsonl"), "--accuracy-report", str(folder / "report")),
                         timeout=900)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout[-3000:] + result.stderr[-3000:]
    verdicts: dict = {}
    for case in outcomes.read(folder / "outcomes.jsonl"):
        kernel = re.search(r"\[(tests\.hostile\.[^\]-]+)", case.name).group(1).removeprefix(HOSTILE)
        if case.kind != "skipped":
            verdicts.setdefault(kernel, {})[case.name.split("[")[0]] = \
                None if case.kind == "passed" else case.message + case.text
    return {"verdicts": verdicts, "stdout": result.stdout}


def failures_of(batch: dict, kernel: str) -> dict:
    return {test: said for test, said in batch["verdicts"][kernel].items() if said is not None}


def test_a_kernel_that_zeroes_its_input_fails_for_changing_it(batch):
    """Judged against the zeros it left, its uniform rows (off by up to 0.99) would be exact."""
    failed = failures_of(batch, "in_place:zeroes_input")
    # test_contract judges inside the capabilities only the fp32 inputs it happens to draw: none in its 25 examples
    assert {"test_output_within_derived_bound", "test_mean_signed_error_is_within_the_statistical_bound",
            "test_outputs_lie_in_the_unit_interval_and_rows_sum_to_one"} <= set(failed), failed
    assert all("the kernel changed its input x" in said for said in failed.values()), failed


def test_a_kernel_that_writes_its_result_into_its_input_fails_for_it(batch):
    failed = failures_of(batch, "in_place:writes_result_into_input")
    assert "test_output_within_derived_bound" in failed
    assert all("the kernel changed its input x" in said for said in failed.values()), failed


@pytest.mark.parametrize("hostile,argument", [("zeroes_bias", "bias"), ("zeroes_gradient", "grad")])
def test_a_kernel_that_zeroes_its_bias_or_its_gradient_fails_for_changing_it_named(batch, hostile, argument):
    """Judged against the input it left, each would be exact: the guard names the argument it changed."""
    failed = failures_of(batch, f"in_place:{hostile}")
    assert "test_output_within_derived_bound" in failed, failed
    changed = f"the kernel changed its input {argument} (its storage differs"
    assert all(changed in said for said in failed.values()), failed


def test_a_kernel_that_transposes_its_input_in_place_fails_for_it(batch):
    """Judged against the transposed input it left, its softmax along the other dim, transposed, would be exact."""
    failed = failures_of(batch, "in_place:transposes_input")
    assert "test_output_within_derived_bound" in failed, failed
    assert all("the kernel changed the view of its input x in place" in said for said in failed.values()), failed


def test_a_kernel_that_declares_it_works_in_place_is_handed_a_copy_and_passes(batch):
    assert failures_of(batch, "in_place:declared_in_place") == {}
    assert len(batch["verdicts"]["in_place:declared_in_place"]) >= 5  # accuracy, contract, determinism, shift, ...


def test_an_output_buffer_reused_across_calls_fails_and_is_never_baselined_as_deterministic(batch):
    noisy = failures_of(batch, "cached_output:noisy")
    assert "noisy promises determinism invariance: two runs of" in noisy["test_run_to_run_determinism_is_bitwise"]
    assert "noisy promises determinism invariance: two runs of softmax_backward" in noisy[
        "test_run_to_run_determinism_of_every_other_operation_is_bitwise"]
    cached = failures_of(batch, "cached_output:noisy_cached")
    assert "returned memory it returned before, still in use" in cached["test_run_to_run_determinism_is_bitwise"]
    assert not re.search(r"^tests\.hostile\.cached_output:noisy_cached +\S* *held", batch["stdout"], re.MULTILINE)


def test_a_kernel_that_leaves_the_arithmetic_flushing_subnormals_fails_and_the_next_kernels_are_judged_without(batch):
    """Left flushing, the suite would read subnormal outputs, and its own correctly rounded values, as zeros, and
    so misjudge every kernel after it: keeps_watch, judged after it in the same process, fails if it ever is."""
    failed = failures_of(batch, "flushing:flushes_on_call")
    assert "test_output_within_derived_bound" in failed, failed
    assert all("the call left this process's CPU arithmetic flushing: it reads subnormal operands as zero (DAZ)"
               in said and "the suite turned it off again" in said for said in failed.values()), failed
    assert failures_of(batch, "flushing:keeps_watch") == {}
    assert len(batch["verdicts"]["flushing:keeps_watch"]) >= 5


def test_a_kernel_that_replaces_torchs_softmax_fails_and_the_next_kernels_are_judged_with_torchs(batch):
    """Left replaced, torch.softmax would raise in every later verdict's torch call and in the torch control: the
    kernels judged after it in the same process would all fail."""
    failed = failures_of(batch, "torch_state:replaces_on_call")
    assert "test_output_within_derived_bound" in failed, failed
    assert all("the call changed torch (torch.softmax)" in said and "the suite put torch's back" in said
               for said in failed.values()), failed
    assert failures_of(batch, "flushing:keeps_watch") == {}


def test_a_kernel_that_leaves_a_torch_function_mode_entered_fails_and_the_next_kernels_are_judged_without(batch):
    """Left entered, the mode would turn the torch.softmax of every later kernel (keeps_watch's result is one) and of
    every verdict's torch into zeros."""
    failed = failures_of(batch, "torch_state:enters_a_mode")
    assert "test_output_within_derived_bound" in failed, failed
    assert all("the call changed torch (torch function modes entered (0, now 1))" in said
               and "the suite put torch's back" in said for said in failed.values()), failed
    assert failures_of(batch, "flushing:keeps_watch") == {}


def test_a_kernel_that_leaves_torchs_default_dtype_changed_fails_for_it(batch):
    failed = failures_of(batch, "torch_state:sets_default_dtype")
    assert "test_output_within_derived_bound" in failed, failed
    assert all("the call changed torch (default dtype (torch.float32, now torch.float64))" in said
               and "the suite put torch's back" in said for said in failed.values()), failed


@pytest.mark.parametrize("module, replaced", [("replaces_on_import", "torch.nn.functional.softmax"),
                                               ("registers_on_import", "aten::_softmax on CPU, aten::_softmax on CUDA")])
def test_a_kernel_whose_import_replaces_torchs_softmax_is_refused_before_any_test(run_pytest, module, replaced):
    """In Python (torch.nn.functional.softmax = ...) or in torch's dispatcher (a kernel registered for ATen's
    operator through torch.library, as flag_gems.enable() does)."""
    result = run_pytest(*FP32_ACCURACY, *QUICK, "--kernel", f"{HOSTILE}{module}:softmax")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"importing the kernels ({HOSTILE}{module}:softmax) changed torch ({replaced}):" in result.stderr, \
        result.stderr[-2000:]


def test_a_flushing_mode_is_told_in_words_and_turned_off():
    import torch

    from harness.internals.subnormals import flushing, restore

    assert flushing() is None
    if not torch.set_flush_denormal(True):
        pytest.skip("torch cannot set this CPU's flushing mode")
    try:
        assert flushing() == "reads subnormal operands as zero (DAZ) and flushes subnormal results to zero (FTZ)"
    finally:
        assert restore() is None
    assert flushing() is None


def test_a_kernel_whose_import_turns_on_flushing_subnormals_is_refused_before_any_test(run_pytest):
    result = run_pytest(*FP32_ACCURACY, *QUICK, "--kernel", f"{HOSTILE}flushes_on_import:softmax")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-2000:] + result.stderr[-2000:]
    assert ("flushes subnormal results to zero (FTZ) once the kernels were imported "
            f"({HOSTILE}flushes_on_import:softmax") in result.stderr, result.stderr[-2000:]


def test_numbers_returned_outside_the_declared_capabilities_are_judged(batch):
    """Declared fp32 rank 2, zeros for anything else: right where it declares, wrong elsewhere."""
    failed = failures_of(batch, "out_of_capabilities:zeros_outside")
    assert list(failed) == ["test_inputs_are_refused_exactly_outside_the_declared_capabilities"], failed
    assert "returned numbers for an input outside its declared capabilities" in failed[
        "test_inputs_are_refused_exactly_outside_the_declared_capabilities"]


def test_a_kernel_raising_inside_its_capabilities_fails_and_cannot_plant_a_replay_in_the_reports(batch):
    said = failures_of(batch, "misbehaving:raises")["test_output_within_derived_bound"]
    assert "the kernel raised RuntimeError: an illegal memory access" in said
    assert "on an input inside its declared capabilities" in said
    failures = json.loads((batch["report"] / "accuracy.json").read_text())["failures"]
    replays = [f["replay"] for f in failures if "misbehaving:raises" in f["test"]]
    assert replays and all(r.startswith(f"{PYTHON} -m harness.replay --kernel {HOSTILE}misbehaving:raises")
                           for r in replays)
    assert f"replay: `{PLANTED}" not in (batch["report"] / "summary.md").read_text()
    assert "replay: <code>python -c" not in (batch["report"] / "index.html").read_text()


def test_a_hanging_call_fails_its_test_by_the_watchdog_names_its_input_and_the_run_goes_on(run_pytest):
    """Each call that hangs for good is stopped at the watchdog's 2 s, which its message says (a loaded machine's
    clock would say nothing more)."""
    result = run_pytest("tests/kernel/test_accuracy.py", "tests/suite/test_ulp.py", "-k", "test_output_within and -softmax- or test_ulp", *QUICK,
                        "--call-timeout", "2", "--kernel", f"{HOSTILE}misbehaving:hangs")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout[-3000:]
    assert len(failed_tests(result.stdout)) == 4 and re.search(r"\b\d+ passed", result.stdout.splitlines()[-1])
    # A failure is printed in its section and again in the short summary, which pytest leaves whole under CI.
    hangs = set(re.findall(r"KernelHang: tests.hostile.misbehaving:hangs softmax on shape=\(.*? dim=\d .*?replay: "
                           rf"{re.escape(PYTHON)} -m harness.replay .*?: the call did not return within 2 s", result.stdout))
    assert len(hangs) == 4, result.stdout[-3000:]  # its softmax in fp32, fp16, bf16 and fp64


# The misbehaving kernels registered, so that they run in the suite's processes (a kernel named by its path runs in
# its own: tests/suite/test_kernel_process.py); the plugin registers them before the session imports the kernels.
REGISTERED = ("-p", "tests.scenarios.misbehaving_registered")
INTERPRETED = {"TRITON_INTERPRET": "1"}  # the plugin imports Triton before the suite sets the interpreter up


def test_workers_that_die_in_registered_kernel_calls_name_their_inputs_and_the_run_goes_on(run_pytest, tmp_path):
    """One kernel deaf to the watchdog's alarm (it stands for a GPU kernel that never finishes), one that ends
    its process; xdist starts new workers, and the other tests still run."""
    result = run_pytest("-n", "2", *REGISTERED, *FP32_AND_OTHERS, *QUICK, "--call-timeout", "2",
                        "--kernel", "registered_hangs_deaf", "--kernel", "registered_exits",
                        "--accuracy-report", str(tmp_path), **INTERPRETED)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout[-3000:]
    assert re.search(r"\b\d+ passed", result.stdout.splitlines()[-1])  # the other tests still ran
    for kernel, why in (("hangs_deaf", "the watchdog ended this process"), ("exits", "the process died during the call")):
        assert re.search(rf"crashed while running .*: {why}; the call: registered_{kernel} softmax on shape=\(",
                         result.stdout), (kernel, result.stdout[-3000:])
    replays = [f["replay"] for f in json.loads((tmp_path / "accuracy.json").read_text())["failures"]]
    assert sorted(r.split(" --device")[0] for r in replays) == [
        f"{PYTHON} -m harness.replay --kernel {HOSTILE}misbehaving:exits",
        f"{PYTHON} -m harness.replay --kernel {HOSTILE}misbehaving:hangs_deaf"]


def test_a_run_that_dies_in_a_registered_kernel_call_leaves_no_verdict_but_the_call(run_pytest, tmp_path):
    result = run_pytest(*REGISTERED, *FP32_ACCURACY, *QUICK, "--kernel", "registered_exits",
                        "--accuracy-report", str(tmp_path), **INTERPRETED)
    assert result.returncode == 3  # the kernel's own exit status: the run died with it
    summary = (tmp_path / "summary.md").read_text()
    assert "INCOMPLETE" in summary and "PASSED" not in summary
    crumb = json.loads((breadcrumbs(tmp_path) / "main.json").read_text())
    assert crumb["state"] == "running" and crumb["input"].startswith("shape=(") and crumb["replay"]


def breadcrumbs(report: Path) -> Path:
    """The folder of the breadcrumbs of a run writing its report to ``report`` (its placeholder says where)."""
    return Path(re.search(r"kernel calls in progress are in (\S+?)\*\*", (report / "summary.md").read_text()).group(1))


def running(report: Path, shape: str) -> bool:
    """Whether a breadcrumb says a kernel call on an input of ``shape`` is running."""
    try:
        return any(json.loads(path.read_text() or "{}").get("state") == "running" and
                   json.loads(path.read_text() or "{}").get("input", "").startswith(f"shape={shape}")
                   for path in breadcrumbs(report).glob("*.json"))
    except (OSError, AttributeError, ValueError):
        return False


@pytest.mark.parametrize("workers,signum", [("-n 2", signal.SIGTERM), ("-p no:xdist", signal.SIGINT)])
def test_an_interrupted_run_says_interrupted_and_names_the_calls_in_progress(tmp_path, workers, signum):
    run = subruns.start(subruns.python("pytest", *workers.split(), *FP32_ACCURACY, *QUICK, "--kernel",
                                       f"{HOSTILE}misbehaving:hangs", "--accuracy-report", str(tmp_path)))
    deadline = time.monotonic() + 100  # before the watchdog's 120 s would stop the call itself
    while time.monotonic() < deadline and not running(tmp_path, "(2, 1, 2047)"):
        time.sleep(0.5)
    run.send_signal(signum)
    stdout, _ = run.communicate(timeout=120)
    assert run.returncode == pytest.ExitCode.INTERRUPTED, stdout[-3000:]
    summary = (tmp_path / "summary.md").read_text()
    assert summary.splitlines()[2].startswith("**INTERRUPTED"), summary[:500]
    assert "## Kernel calls in progress when the run was interrupted" in summary
    assert f"{HOSTILE}misbehaving:hangs softmax on shape=(2, 1, 2047)" in summary


def test_the_replay_holds_a_kernel_to_the_same_rules_as_a_run():
    """It was fooled as the run was: "0 of 388 elements beyond the derived bound", the row's input shown as zeros."""
    result = subruns.run(subruns.python("harness.replay", "--kernel", f"{HOSTILE}in_place:zeroes_input", "--device",
                                        "cpu", "Case(shape=(4, 97), dim=1, dtype=torch.float32, seed=3)"))
    assert result.returncode == 1 and "the kernel changed its input x" in result.stdout, result.stdout + result.stderr


def test_a_call_for_an_fp32_output_is_named_and_replayed_as_that_operation(tmp_path, monkeypatch):
    """A call's breadcrumb and replay name its operation: a crash asking for fp32 output replays that call."""
    import torch

    from harness.guard import calls
    from harness.inputs.strategies import Case, Values
    from specs.registry import resolve

    started = []
    breadcrumbs = calls.Breadcrumbs(tmp_path, "this")
    monkeypatch.setattr(breadcrumbs, "started", started.append)
    guard = calls.Guard(calls.Watchdog(None, 1.0, breadcrumbs), breadcrumbs, calls.Outputs())
    kernel = calls.guarded(resolve("torch"), guard)
    monkeypatch.setattr(calls.CONTEXT, "backend", "cpu")
    monkeypatch.setattr(calls.CONTEXT, "case", Case((2, 8), 1, torch.float16, Values("normal", 1.0), seed=0))
    x = torch.randn(2, 8).half()
    kernel.softmax(x, 1, out_dtype=torch.float32)
    kernel.softmax(x, 1)
    assert [call["op"] for call in started] == ["softmax_fp32_out", "softmax"]
    assert "--op softmax_fp32_out " in started[0]["replay"] and "--op softmax " in started[1]["replay"]


def test_a_call_through_the_kernels_record_names_its_operation_and_replay_and_guesses_neither(tmp_path, monkeypatch):
    """KernelSpec.run tells a guarded callable the operation it runs and the command that replays it; the guess from
    out_dtype, and the replay of the example running, are left to a test calling the callable itself."""
    import torch

    from harness.guard import calls
    from oracles.call import Call
    from specs.operations import OPERATIONS
    from specs.registry import resolve

    started = []
    breadcrumbs = calls.Breadcrumbs(tmp_path, "this")
    monkeypatch.setattr(breadcrumbs, "started", started.append)
    kernel = calls.guarded(resolve("torch"), calls.Guard(calls.Watchdog(None, 1.0, breadcrumbs), breadcrumbs,
                                                         calls.Outputs()))

    def no_guess(runs, kwargs):
        raise AssertionError(f"the operation of a call of {runs} guessed")

    monkeypatch.setattr(calls, "operation_named", no_guess)
    x = torch.randn(2, 8).half()
    monkeypatch.setattr(calls.CONTEXT, "case", None)  # no example running: only the caller can say the replay
    for name in ("softmax_fp32_out", "softmax", "log_softmax"):
        kernel.run(Call(x, 1, OPERATIONS[name], "cpu"), replay=f"python -m harness.replay --op {name} CASE")
    assert [(call["op"], call["replay"]) for call in started] == [
        (name, f"python -m harness.replay --op {name} CASE") for name in ("softmax_fp32_out", "softmax", "log_softmax")]
    with pytest.raises(AssertionError, match="guessed"):
        kernel.softmax(x, 1)


def test_a_call_that_finds_the_arithmetic_flushing_fails_turns_it_off_and_the_next_call_is_judged(tmp_path):
    """What a call the watchdog stopped after it turned flushing on leaves behind (its checks never ran)."""
    import torch

    from harness.guard import calls
    from harness.internals.subnormals import flushing
    from specs.registry import resolve

    breadcrumbs = calls.Breadcrumbs(tmp_path, "this")
    kernel = calls.guarded(resolve("torch"), calls.Guard(calls.Watchdog(None, 1.0, breadcrumbs), breadcrumbs,
                                                         calls.Outputs()))
    if not torch.set_flush_denormal(True):
        pytest.skip("torch cannot set this CPU's flushing mode")
    with pytest.raises(calls.ContractBroken, match="before the call, this process's CPU arithmetic reads subnormal "
                                                   "operands as zero .* the suite turned it off again, and this call "
                                                   "is not judged"):
        kernel.softmax(torch.randn(2, 8), 1)
    assert flushing() is None
    assert kernel.softmax(torch.tensor([[0.0, -100.0]]), 1)[0, 1] > 0  # e^-100, a subnormal, not flushed


def test_a_kernel_off_its_callers_stream_reads_its_input_unwritten_and_fails(backend):
    """CUDA: off_stream works on the default stream whatever the caller's, and is judged wrong there; torch, on
    the caller's stream, right."""
    from specs.registry import resolve
    from tests.kernel.test_streams import judged_on_a_busy_stream

    assert judged_on_a_busy_stream(resolve("torch"), backend).ok
    assert not judged_on_a_busy_stream(resolve(f"{HOSTILE}off_stream:softmax"), backend).ok


def test_a_kernel_that_goes_wrong_at_its_thousandth_call_fails_by_the_call_that_showed_it(run_pytest):
    """Its process takes every call of the test; the calls before the thousandth pass, the thousandth fails."""
    result = run_pytest("tests/kernel/test_many_calls.py", "--device", "cpu", "--kernel",
                        f"{HOSTILE}breaks_after_many_calls:softmax", "--kernel", "examples.torch_kernels:softmax")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout[-3000:]
    assert failed_tests(result.stdout) == [f"tests/kernel/test_many_calls.py::test_a_kernel_stays_within_its_bounds_"
                                           f"past_its_thousandth_call[{HOSTILE}breaks_after_many_calls:softmax]"], \
        result.stdout[-3000:]
    assert "call 1000 of 1100 in one process" in result.stdout, result.stdout[-3000:]
