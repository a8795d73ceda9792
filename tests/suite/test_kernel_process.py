"""A kernel named by its path runs in a process of its own (harness/guard/host.py): whatever it does there, from inside a
call or at its import, reaches neither the input the suite judges by, nor the test's outcome, nor the run's exit
status, nor its time; and the suite's process never imports it."""

import re
import signal
import sys
import time
from pathlib import Path

import pytest
import torch

from harness.guard import sandbox
from harness.guard.calls import Breadcrumbs, ContractBroken
from harness.guard.host import KernelRefused, Pool, hosted, raised, record_of
from harness.guard.replay_command import PYTHON
from specs.registry import Capabilities
from tests import outcomes
from tests import subruns
from tests.suite.test_hostile import running

ROOT = Path(__file__).resolve().parents[2]
REACHES_OUT = "tests.hostile.reaches_out"
FP32_ACCURACY = ("tests/kernel/test_accuracy.py", "-k", "test_output_within and -softmax- and float32")
QUICK = ("--hypothesis-profile", "mutation", "--self-tests")  # and the run's device: on a GPU gate, its kernels there
LIMIT = 3  # --call-timeout of these sub-runs: the grace is as long again
WATCHDOG = 600  # --call-timeout of the run Ctrl-C ends
# Kernel -> what its accuracy test must say ("passed" for the one that is right).
EXPECTED = {
    "detach_trick": "beyond the derived bound",
    "attribute_on_output": "a tensor carrying attributes (detach) cannot cross",
    "subclass_output": "a tensor subclass (Marked) cannot cross",
    "skips": "the kernel raised Skipped",
    "xfails": "the kernel raised XFailed",
    "exits_zero": "the kernel's process ended (exit status 0) before it answered: a kernel must return or raise, never "
                  "end its process; the end of what it printed:\nexits_zero: leaving with status 0",
    "holds_the_gil": f"the call did not return within {LIMIT} s (the watchdog's limit, --call-timeout) nor stop at the "
                     f"alarm within {LIMIT} s more: its process was killed",
    "sleeps_in_precision": f"sleeps_in_precision precision on shape=(",
    "leaves_a_thread": "passed",
    "undoes_its_guard": "inside its declared capabilities (held to the guard's rule by the suite's process)",
    "refuses_at_length": "the kernel raised ValueError: x: I do not like this input: xxxx",
    "names_its_arithmetic_at_length": "names_its_arithmetic_at_length precision on shape=(",
    "cuts_its_answer": f"the call did not return within {LIMIT} s (the watchdog's limit, --call-timeout) nor stop at "
                       f"the alarm within {LIMIT} s more: its process was killed",
}


@pytest.fixture
def reaching(once, backend) -> dict:
    """One serial sub-run of every kernel of tests/hostile/reaches_out.py: each kernel's outcome, the exit status
    and the end of its output."""

    def run(folder: Path) -> dict:
        kernels = [arg for name in EXPECTED for arg in ("--kernel", f"{REACHES_OUT}:{name}")]
        result = subruns.run(subruns.python("pytest", *FP32_ACCURACY, *QUICK, "--device", backend.name, "--call-timeout",
                                            str(LIMIT), *kernels, "--outcomes", str(folder / "outcomes.jsonl")), timeout=600)
        by_kernel = {re.search(r"\[tests\.hostile\.reaches_out:(\w+)-", case.name).group(1): case.said
                     for case in outcomes.read(folder / "outcomes.jsonl")}
        return {"status": result.returncode, "outcomes": by_kernel, "stdout": result.stdout[-3000:]}

    return once("reaching", run)[0]


@pytest.mark.parametrize("hostile", list(EXPECTED))
def test_what_a_kernel_does_in_its_process_fails_it_and_no_more(reaching, hostile):
    said = reaching["outcomes"].get(hostile, "not run")
    expected = EXPECTED[hostile]
    assert said == "passed" if expected == "passed" else (said.startswith("failure") and expected in said), \
        (hostile, said[:1500], reaching["stdout"])


def test_a_run_whose_kernels_end_their_process_or_leave_threads_ends_and_fails(reaching):
    """os._exit(0) in a call did not end the run "passed", and a thread left running did not keep it alive (the
    sub-run ended within its 600 s; the hangs were stopped at their limits, which their messages say)."""
    assert reaching["status"] == pytest.ExitCode.TESTS_FAILED, reaching["stdout"]


@pytest.fixture
def under_xdist(once, run_pytest, backend) -> dict:
    """One sub-run under ``-n 2`` of two kernels: one holding the GIL in its calls, one whose import reaches for the
    run (import_tricks: an exit handler ending the process with status 0, PYTEST_ADDOPTS deselecting fp16): its
    exit status and output."""

    def run(folder: Path) -> dict:
        result = run_pytest("-n", "2", "tests/kernel/test_accuracy.py", "-k",
                            "test_output_within and (-softmax-float32 or -softmax-float16)", *QUICK,
                            "--device", backend.name, "--call-timeout", str(LIMIT), "--kernel",
                            f"{REACHES_OUT}:holds_the_gil", "--kernel", "tests.hostile.import_tricks:softmax")
        return {"status": result.returncode, "stdout": result.stdout}

    return once("kernel-process-under-xdist", run)[0]


def test_a_kernel_holding_the_gil_is_stopped_at_its_limit_and_named_under_xdist(under_xdist):
    """Serially, the batch above stops it (``holds_the_gil``)."""
    assert under_xdist["status"] == pytest.ExitCode.TESTS_FAILED, under_xdist["stdout"][-3000:]
    assert re.search(rf"KernelHang: {REACHES_OUT}:holds_the_gil softmax on shape=\(.*replay: {re.escape(PYTHON)} -m harness.replay "
                     rf".*: the call did not return within {LIMIT} s .*nor stop at the alarm", under_xdist["stdout"]), \
        under_xdist["stdout"][-3000:]


def test_ctrl_c_ends_a_run_stuck_in_a_kernel_holding_the_gil_long_before_its_watchdog(tmp_path, backend):
    """The call would hold the GIL until the watchdog's 600 s: Ctrl-C ends the run within a tenth of that (seconds on
    an idle machine; 8 s on a loaded one)."""
    run = subruns.start(subruns.python("pytest", *FP32_ACCURACY, *QUICK, "--device", backend.name, "--call-timeout",
                                       str(WATCHDOG), "--kernel", f"{REACHES_OUT}:holds_the_gil", "--accuracy-report",
                                       str(tmp_path)))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not running(tmp_path, "("):  # any call
        time.sleep(0.5)
    run.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    stdout, _ = run.communicate(timeout=60)
    ended = time.monotonic() - interrupted
    assert ended < WATCHDOG / 10, (ended, stdout[-3000:])
    assert run.returncode == pytest.ExitCode.INTERRUPTED, stdout[-3000:]
    assert f"{REACHES_OUT}:holds_the_gil softmax on shape=" in (tmp_path / "summary.md").read_text()


def test_a_kernel_whose_import_ends_the_process_at_exit_or_deselects_tests_still_fails_its_fp16_bug(under_xdist):
    """Its import registers os._exit(0) at exit and sets PYTEST_ADDOPTS to deselect fp16: in its own process,
    neither reaches the run."""
    assert under_xdist["status"] == pytest.ExitCode.TESTS_FAILED, under_xdist["stdout"][-3000:]
    assert re.search(r"FAILED \S+\[tests\.hostile\.import_tricks:softmax-softmax-float16\]", under_xdist["stdout"]), \
        under_xdist["stdout"][-3000:]
    assert not re.search(r"FAILED \S+\[tests\.hostile\.import_tricks:softmax-softmax-float32\]", under_xdist["stdout"])


def test_the_suite_never_imports_a_kernel_it_hosts(backend, tmp_path):
    """The suite's process holds the kernel's declarations and its results, never its module."""
    kernel = hosted(f"{REACHES_OUT}:leaves_a_thread", backend, 60.0, 5.0, Breadcrumbs(None, "main"))
    x = torch.randn(3, 5)
    y = kernel.softmax(x, 1)
    assert REACHES_OUT not in sys.modules and not any(
        "reaches_out" in str(getattr(module, "__file__", "")) for module in list(sys.modules.values()))
    assert type(y) is torch.Tensor and torch.allclose(y, torch.softmax(x, 1)) and kernel.capabilities.dtypes == {
        torch.float32}


def test_a_dense_result_of_an_expanded_input_crosses(backend):
    """An answer is capped by the bytes of its call: counted by storage, an input expanded 40 times (246 kB) capped
    its dense result (9.8 MB), and torch's softmax broke the contract (the H100 gate's monotonicity test)."""
    kernel = hosted("torch.nn.functional:softmax", backend, 60.0, 5.0, Breadcrumbs(None, "main"))
    x = torch.randn(1, 2049, 30, device=backend.device).expand(40, 2049, 30)
    assert torch.equal(kernel.softmax(x, 1), torch.softmax(x, 1))


def test_an_answer_larger_than_its_call_allows_does_not_cross(backend):
    kernel = hosted(f"{REACHES_OUT}:floods_its_answer", backend, 60.0, 5.0, Breadcrumbs(None, "main"))
    with pytest.raises(ContractBroken, match=r"sent what cannot cross \(tensors of \d+ bytes, more than the \d+ an "
                                             r"answer may hold\)"):
        kernel.softmax(torch.randn(3, 5, device=backend.device), 1)


def test_a_kernel_process_cannot_name_its_kernel_nor_declare_what_the_suite_cannot_take():
    """The suite names the kernel by its selector, whatever its process says (it could claim a registered kernel's
    name and baseline); declarations that do not hold are refused."""
    fair = {"capabilities": Capabilities(), "callables": ["softmax"], "precision": False,
            "name": "full_softmax", "description": "the reviewed full_softmax"}
    spec = record_of("mine.py:softmax", fair)
    assert (spec.name, spec.description, spec.clear_refusals) == ("mine.py:softmax", "user kernel mine.py:softmax",
                                                                  False)
    assert spec.replay_selector == f"{Path('mine.py').resolve()}:softmax"
    for unfair in ({**fair, "capabilities": {"dtypes": "all"}}, {**fair, "callables": ["softmax", "__init__"]},
                   {**fair, "callables": ["softmax", "log_softmax"]},  # log_softmax its capabilities do not declare
                   {**fair, "precision": "yes"}):
        with pytest.raises(KernelRefused, match="declared what the suite cannot take"):
            record_of("mine.py:softmax", unfair)


def test_the_folder_a_replay_puts_on_pythonpath_is_the_suites_finding_never_the_kernels_word(tmp_path, monkeypatch):
    """A kernel process declared a folder of its own, holding a sitecustomize.py, and the printed replay of a failing
    input exited 0 there.  The suite finds the folder of a module-named kernel on its own path, running none of its
    code: a package whose import would write a file writes nothing."""
    package = tmp_path / "elsewhere" / "kernelpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    (package / "mod.py").write_text("def softmax(x, dim):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))  # on the path from PYTHONPATH, as a user puts it there
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "elsewhere"))
    declared = {"capabilities": Capabilities(), "callables": ["softmax"], "precision": False,
                "pythonpath": str(tmp_path / "evil")}
    assert record_of("kernelpkg.mod:softmax", declared).pythonpath == str((tmp_path / "elsewhere").resolve())
    assert record_of("tests.hostile.misbehaving:raises", declared).pythonpath == ""  # found from the checkout's root
    assert not (tmp_path / "ran").exists()


def test_what_a_kernel_process_raised_carries_the_suites_replay_never_its_own():
    """A kernel's process may not choose the command reports tell users to run (nor crash them with a non-string)."""
    for planted in ("python -c 'open(\"pwned\", \"w\")'", [1, 2]):
        error = raised({"type": "ContractBroken", "message": "boom", "replay": planted}, "python -m harness.replay x")
        assert isinstance(error, ContractBroken) and error.replay == "python -m harness.replay x"
    assert type(raised({"type": "SystemExit", "message": "0"}, None)) is RuntimeError  # not an Exception: no exit


def test_kernels_named_by_path_beyond_the_processes_a_worker_keeps_are_all_judged(run_pytest, tmp_path, backend):
    """Fifty-five kernels named by path ran an H100 out of memory before any test: each of the run's seventeen
    processes started a kernel process per kernel at configure, each with a CUDA context of its own.  Now the run's
    first process reads the declarations, a worker starts a kernel's process at its first call, and keeps at most
    --kernel-processes alive: twelve copies of the example kernel, one alive at a time in each of two workers."""
    copies = 12
    many = tmp_path / "many.py"
    many.write_text((ROOT / "examples" / "my_kernels.py").read_text()
                    + "".join(f"\nsoftmax_{i} = softmax" for i in range(copies)) + "\n")
    kernels = [arg for i in range(copies) for arg in ("--kernel", f"{many}:softmax_{i}")]
    result = run_pytest("-n", "2", *FP32_ACCURACY, "--hypothesis-profile", "ci", "--device", backend.name,
                        "--kernel-processes", "1", *kernels)
    assert result.returncode == pytest.ExitCode.OK and f"{copies} passed" in result.stdout, result.stdout[-3000:]
    said = re.search(r"kernel processes: (\d+) started in 2 workers .*at most (\d+) alive at once in any", result.stdout)
    assert said and int(said.group(1)) >= copies and said.group(2) == "1", result.stdout[-3000:]
    assert f"kernel processes: {copies} kernel(s) named by path" in result.stdout  # the header


def test_a_pool_keeps_at_most_its_cap_alive_stopping_the_one_used_least_recently():
    stopped = []

    class Process:
        def __init__(self, name):
            self.name = name

        def stop(self):
            stopped.append(self.name)
            pool.leave(self)

    pool = Pool(2)
    a, b, c = Process("a"), Process("b"), Process("c")
    pool.admit(a)
    pool.admit(b)
    pool.used(a)  # b is now the least recently used
    pool.admit(c)
    assert stopped == ["b"] and pool.alive == [a, c] and pool.most == 2 and pool.started == 3
    with pytest.raises(ValueError, match="--kernel-processes must be at least 1"):
        Pool(0)


def test_kernels_that_split_over_processes_return_padded_views_or_print_pass_and_their_output_stays_out(run_pytest,
                                                                                                         backend):
    """tests/hostile/ordinary_but_odd.py: a kernel process may have children, a padded view's values cross, and 1 MiB
    printed a call stays with its test, capped (it put 193 MB into a sub-run's output of three tests)."""
    odd = "tests.hostile.ordinary_but_odd"
    kernels = [arg for name in ("splits_over_processes", "returns_a_padded_view", "prints_a_lot")
               for arg in ("--kernel", f"{odd}:{name}")]
    result = run_pytest(*FP32_ACCURACY, "--hypothesis-profile", "ci", "--device", backend.name, *kernels, "-rA")
    assert result.returncode == pytest.ExitCode.OK and "3 passed" in result.stdout, result.stdout[-3000:]
    assert len(result.stdout) + len(result.stderr) < 1 << 20, len(result.stdout)
    assert f"[{odd}:prints_a_lot printed during {odd}:prints_a_lot softmax on shape=" in result.stdout


WRITES = "tests.hostile.writes_the_suite"  # never imported here: its import writes the suite's files
PLANTED = "planted-by-a-kernel"  # what it names the files it writes (tests/hostile/writes_the_suite.py)
WRITTEN = (ROOT / "harness" / "judging" / "__pycache__" / f"{PLANTED}.pyc", ROOT / "harness" / "judging" / f"{PLANTED}.py",
           ROOT / "baselines" / "cpu.json")


@pytest.mark.skipif(not sandbox.abi(), reason="no Landlock on this machine: the fingerprint's test below covers it")
def test_a_kernel_process_cannot_write_the_suites_files_and_its_bug_still_fails(run_pytest, backend):
    """At its import the kernel writes a .pyc beside the judge, a module into the checkout and the baseline: Landlock
    forbids each, and its temperature bug fails its test."""
    before = {path: path.stat().st_mtime_ns for path in WRITTEN if path.exists()}
    result = run_pytest(*FP32_ACCURACY, "--hypothesis-profile", "ci", "--device", backend.name, "--kernel",
                        f"{WRITES}:softmax", "-q")
    try:
        assert result.returncode == pytest.ExitCode.TESTS_FAILED and "BeyondBound" in result.stdout, \
            result.stdout[-3000:]
        assert {path: path.stat().st_mtime_ns for path in WRITTEN if path.exists()} == before
        assert not any(path.exists() for path in WRITTEN if PLANTED in path.name)
    finally:
        for path in WRITTEN:
            if PLANTED in path.name:
                path.unlink(missing_ok=True)


def test_where_a_kernel_process_can_write_the_suites_files_a_change_gives_no_verdict(tmp_path, backend):
    """Without Landlock (forced here: SOFTMAX_SUITE_NO_LANDLOCK), the kernel's writes land in a copy of the checkout:
    the run digests the suite's files and the baseline before any kernel runs and at its end, and gives no verdict."""
    from tests.conftest import copy_of_checkout

    checkout = tmp_path / "checkout"
    copy_of_checkout(checkout)
    result = subruns.run(subruns.python("pytest", *FP32_ACCURACY, "--hypothesis-profile", "ci", "--device",
                                        backend.name, "--kernel", f"{WRITES}:softmax", "--accuracy-baseline", "auto"),
                         cwd=checkout, **{sandbox.NO_LANDLOCK: "1"})
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout[-3000:]
    assert "kernel processes can write the suite's files (no Landlock on this machine)" in result.stdout
    assert "NO VERDICT: " in result.stdout and "planted-by-a-kernel.py" in result.stdout, result.stdout[-3000:]
    assert result.stdout.splitlines()[-1].startswith("verdict: NO VERDICT: the suite's files changed"), \
        result.stdout[-2000:]
