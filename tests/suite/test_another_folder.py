"""The suite run from another folder than its checkout's root, as a user runs it from their kernel's folder:
``python -m pytest CHECKOUT --kernel mine/k.py:softmax``.  A kernel path is the user's folder's, and the replay
lines a failure prints run when pasted there.  Given without the checkout, the suite's options are answered by the
plugin that installing the suite installs (pytest_softmax_suite.py) with the command that runs them."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import pytest_softmax_suite
from harness.guard.replay_command import PREFIX
from tests import subruns

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
    return subruns.pasted(command, cwd=folder)


def test_a_run_from_another_folder_judges_the_kernel_named_from_there_and_its_replay_lines_run_there(
        run_pytest, user_folder):
    failed = run_pytest(str(ROOT), "-k", FAILING, "--hypothesis-profile", "mutation", "--device", "cpu",
                        "--kernel", "mine/k.py:softmax_half_sum", cwd=user_folder)
    assert failed.returncode == pytest.ExitCode.TESTS_FAILED, failed.stdout[-3000:] + failed.stderr[-3000:]
    assert "test_output_within_derived_bound[mine/k.py:softmax_half_sum-softmax-float16]" in failed.stdout
    printed = [line.removeprefix(PREFIX) for line in failed.stdout.splitlines() if line.startswith(PREFIX)]
    one_step = next(command for command in printed if " -m harness.replay " in command)
    rerun = next(command for command in printed if " -m pytest " in command)
    for command, said in ((one_step, "beyond the derived bound"), (rerun, "1 failed")):
        again = pasted(command, user_folder)
        assert again.returncode == 1 and said in again.stdout, command + "\n" + again.stdout[-3000:] + again.stderr


def test_a_kernel_file_named_without_its_function_from_another_folder_is_refused_naming_the_form(run_pytest,
                                                                                                user_folder):
    refused = run_pytest(str(ROOT), "--collect-only", "-q", "--kernel", "mine/k.py", cwd=user_folder)
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, refused.stdout[-3000:] + refused.stderr[-3000:]
    assert "as path/to/file.py:function (--kernel mine/k.py:FUNCTION)" in refused.stderr, refused.stderr


def suggested(refused: subprocess.CompletedProcess) -> str:
    """The command a run refused by pytest_softmax_suite.py names, its usage error's last line."""
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, refused.stdout[-3000:] + refused.stderr[-3000:]
    assert "unrecognized arguments: --kernel: options of the softmax accuracy suite" in refused.stderr, refused.stderr
    return refused.stderr.strip().splitlines()[-1].strip()


def test_the_suites_options_without_its_checkout_are_answered_with_the_command_that_runs_them(run_pytest,
                                                                                               user_folder):
    """Loaded here by its name from the checkout (an installed suite loads it by its entry point): from the user's
    folder, and from the checkout's root given a kernel file outside it without its function, a path that moves
    pytest's root out of the checkout."""
    plugin = ("-p", "pytest_softmax_suite")
    elsewhere = suggested(run_pytest(*plugin, "--collect-only", "-q", "--kernel", "mine/k.py:softmax",
                                     cwd=user_folder, PYTHONPATH=str(ROOT)))
    assert elsewhere.startswith(f"python -m pytest {ROOT} -p ") and elsewhere.endswith(" --kernel mine/k.py:softmax")
    outside = os.path.relpath(user_folder / "mine" / "k.py", ROOT)
    here = suggested(run_pytest(*plugin, "--collect-only", "-q", "--kernel", outside, PYTHONPATH=str(ROOT)))
    assert here.endswith(f" --kernel {outside}:FUNCTION"), here
    for command, folder in ((elsewhere, user_folder), (here.replace(":FUNCTION", ":softmax"), ROOT)):
        collected = pasted(command, folder)
        assert collected.returncode == 0 and " tests collected " in collected.stdout, collected.stderr[-3000:]


class Declared:
    """A stand-in for pytest's parser: the names of the options declared to it."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def getgroup(self, *args, **kwargs) -> "Declared":
        return self

    def addoption(self, *names: str, **kwargs) -> None:
        self.names.update(names)


def test_the_plugin_knows_the_suites_options_and_installing_the_suite_installs_it(pytestconfig):
    declared = Declared()
    for name, plugin in pytestconfig.pluginmanager.list_name_plugin():
        if name.startswith("harness.") and hasattr(plugin, "pytest_addoption"):
            plugin.pytest_addoption(declared)
    assert pytest_softmax_suite.OPTIONS == declared.names
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # Named as its module: `-p pytest_softmax_suite` and the entry point register it once.
    assert project["project"]["entry-points"]["pytest11"] == {"pytest_softmax_suite": "pytest_softmax_suite"}
    assert project["tool"]["setuptools"]["py-modules"] == ["pytest_softmax_suite"]
