"""Fixtures shared by the suite's own tests."""

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.internals import payload
from harness.plugins import scheduling
from tests import subruns

ROOT = Path(__file__).resolve().parents[1]

# The suite's own tests start about a hundred sub-runs.  Where the environment forbids writing bytecode, each of
# them compiles the checkout's modules and assertion-rewrites the pytest plugins' packages again (about 3 s of CPU
# a process, on 2 cores a sixth of the run); here the sub-runs and this run's workers may keep what they compiled.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture
def run_pytest():
    """Run the suite in a fresh interpreter (no inherited TRITON_INTERPRET; xdist only when asked with -n), started in
    ``cwd`` (the checkout's root unless given)."""

    def run(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
        return subruns.run(subruns.python("pytest", *args), cwd=cwd, timeout=900, **env)

    return run


@pytest.fixture(scope="session")
def run_folder(tmp_path_factory) -> Path:
    """The run's own temporary folder, the same for every xdist worker (each has a subfolder of it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture
def once(run_folder, request):
    """``once(name, make)``: ``make(folder)`` runs a single time for the whole run, and every test (on every xdist
    worker) gets its JSON-safe result and its folder.  For sub-runs that several tests read.  A test that waits
    while another makes it has that wait left out of its recorded duration (:func:`harness.plugins.scheduling.waited`)."""

    def run(name: str, make) -> tuple[dict, Path]:
        folder = run_folder / name
        started = time.monotonic()
        with open(run_folder / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = run_folder / f"{name}.json"
            if done.exists():
                scheduling.waited(request.node, time.monotonic() - started)
            else:
                folder.mkdir(exist_ok=True)
                done.write_text(json.dumps(make(folder)))
            return json.loads(done.read_text()), folder

    return run


@pytest.fixture
def made_baseline(once, run_pytest, tmp_path):
    """``made_baseline(name, *args)``: a baseline of the sub-run of ``args``, made by ``--update-baseline`` as the
    README says (no profile named), once for the whole run under ``name``: the test's own copy, and the making
    run's path, exit status and output."""

    def made(name: str, *args: str) -> tuple[Path, dict]:
        def make(folder):
            written = folder / "baseline.json"
            result = run_pytest(*args, "--accuracy-baseline", str(written), "--update-baseline")
            return {"written": str(written), "returncode": result.returncode, "stdout": result.stdout}

        result, _ = once(name, make)
        assert result["returncode"] == 0, result["stdout"][-3000:]
        return Path(shutil.copy(result["written"], tmp_path / "baseline.json")), result

    return made


@pytest.fixture
def gate_kernel_baseline(made_baseline) -> tuple[Path, dict]:
    """A baseline of the gate kernel's tests (``GATE_TESTS``): :func:`made_baseline`'s copy and making run."""
    from tests.scenarios.gate_kernel import GATE_KERNEL, GATE_TESTS  # imports triton: not before the backend is set

    return made_baseline("gate-kernel-baseline", *GATE_TESTS, "--kernel", GATE_KERNEL)


# What a copy of a checkout that is not a git work tree leaves out, at its root: what .gitignore lists there, and the
# caches of every folder (nothing a README command reads).
NOT_COPIED_AT_ROOT = {"reports", "build", ".whl", "soak", ".hypothesis", ".pytest_cache"}


def copy_of_checkout(target: Path) -> None:
    """The checkout's files in ``target``: those git lists (tracked, and untracked but not ignored) in a git work
    tree, else all but :data:`NOT_COPIED_AT_ROOT`, virtual environments and caches; links copied as links."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True)
    if listed.returncode != 0:
        def ignored(folder, names):
            return {n for n in names if n in ("__pycache__", ".git") or n.endswith(".egg-info") or n.startswith(".venv")
                    or (Path(folder) == ROOT and n in NOT_COPIED_AT_ROOT)}
        shutil.copytree(ROOT, target, ignore=ignored, symlinks=True)
        return
    for name in filter(None, listed.stdout.decode().split("\0")):
        source, copy = ROOT / name, target / name
        if source.is_symlink() or source.is_file():  # a tracked file deleted in the work tree is left out
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy, follow_symlinks=False)


@pytest.fixture
def readme_command(once, backend):
    """``readme_command(command)``: the README's ``command`` run once for the whole run, as written, by a shell from
    the root of a copy of the checkout (made once for the run: what the commands write, ``reports/`` of the README,
    stays out of the user's checkout), with nothing inherited that the README does not say: its exit status and
    output, and ``root``, the copy's root.

    Only in a run on the CPU, where CI runs it: on a GPU or NPU the command would take the device too, and its own
    ``-n auto`` workers beside this run's ran out of device memory (an H100, 16 workers each)."""
    if backend.name != "cpu":
        pytest.skip(f"the README's commands are run in a run on the CPU; this one runs on {backend.name}, whose "
                    "memory a nested run's workers would share with this run's")

    def copy(folder):
        copy_of_checkout(folder / "checkout")
        return {"root": str(folder / "checkout")}

    def run(command: str) -> dict:
        def make(folder):
            root = once("readme-checkout", copy)[0]["root"]
            result = subruns.pasted(command, cwd=root, timeout=900)  # the README's commands set no PYTHONPATH
            return {"returncode": result.returncode, "stdout": result.stdout, "stderr": result.stderr, "root": root}

        return once("readme-" + hashlib.sha256(command.encode()).hexdigest()[:16], make)[0]

    return run


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The mutation test's verdict: score, and for each mutant the tests that caught it."""
    entries = [entry for reports in terminalreporter.stats.values() for report in reports
               for entry in payload.of(report, "mutation")]
    mutants = sorted((e for e in entries if "mutant" in e), key=lambda e: e["mutant"])
    correct = sorted((e for e in entries if "correct" in e), key=lambda e: e["correct"])
    if not entries:
        return
    caught = sum(bool(e["caught_by"]) for e in mutants)
    terminalreporter.write_sep("-", f"mutation score: {caught} of {len(mutants)} mutants caught")
    for e in mutants:
        tests = ", ".join(sorted({node.split("::")[-1].split("[")[0] for node in e["caught_by"]})) or "SURVIVED"
        terminalreporter.write_line(f"{e['mutant']:<26} {e['bug']:<78} caught first by {tests}")
    for e in correct:
        verdict = f"no false alarm {e['scope']}" if not e["failed"] else f"FALSE ALARMS: {', '.join(e['failed'])}"
        terminalreporter.write_line(f"correct kernel {e['correct']:<16} {verdict}")
