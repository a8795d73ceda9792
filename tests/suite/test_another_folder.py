"""The suite run from another folder than its checkout's root, as a user runs it from their kernel's folder:
``python -m pytest CHECKOUT --kernel mine/k.py:softmax``.  A kernel path is the user's folder's, and the replay
lines a failure prints run when pasted there."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.replay import PREFIX

ROOT = Path(__file__).resolve().parents[2]
# The planted half-precision sum fails its fp16 softmax accuracy test (a one-step replay) and its permutation test
# (a pytest replay).
FAILING = "(test_output_within and -softmax- and float16 and not bfloat16) or test_permutation"


@pytest.fixture
def user_folder(tmp_path) -> Path:
    """A user's folder outside the checkout, their kernel file (examples/my_kernels.py) in its subfolder mine/."""
    folder = tmp_path / "work"
    (folder / "mine").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "my_kernels.py", folder / "mine" / "k.py")
    return folder


def pasted(command: str, folder: Path) -> subprocess.CompletedProcess:
    """A printed command run by a shell in ``folder``, with nothing inherited that it does not say."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET", "PYTEST_XDIST_WORKER",
                                                             "PYTEST_XDIST_WORKER_COUNT")}
    return subprocess.run(command, shell=True, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_a_run_from_another_folder_judges_the_kernel_named_from_there_and_its_replay_lines_run_there(
        run_pytest, user_folder):
    failed = run_pytest(str(ROOT), "-k", FAILING, "--hypothesis-profile", "mutation", "--device", "cpu",
                        "--kernel", "mine/k.py:softmax_half_sum", cwd=user_folder)
    assert failed.returncode == pytest.ExitCode.TESTS_FAILED, failed.stdout[-3000:] + failed.stderr[-3000:]
    assert "test_output_within_derived_bound[mine/k.py:softmax_half_sum-softmax-float16]" in failed.stdout
    printed = [line.removeprefix(PREFIX) for line in failed.stdout.splitlines() if line.startswith(PREFIX)]
    one_step = next(command for command in printed if "python -m harness.replay " in command)
    rerun = next(command for command in printed if "python -m pytest " in command)
    for command, said in ((one_step, "beyond the derived bound"), (rerun, "1 failed")):
        again = pasted(command, user_folder)
        assert again.returncode == 1 and said in again.stdout, command + "\n" + again.stdout[-3000:] + again.stderr
