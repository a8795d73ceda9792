"""The one way a suite test starts a sub-run: the interpreter, the command line, the folder and the environment.

:func:`python` builds ``python -m MODULE ...`` with this interpreter (a pytest writes no cache into the checkout,
and runs without xdist unless its arguments say ``-n``); :func:`run` runs a sub-run to its end, :func:`start`
starts one a test signals or reads while it runs, :func:`pasted` runs a printed command as a user pastes it into a
shell.  Every one takes :func:`environment`: this run's, without what belongs to this run alone.

Left out: ``TRITON_INTERPRET`` (each sub-run's backend decides it before Triton loads) and xdist's worker
variables (a sub-run is no worker of this run: under them a soak counts this run's workers and gives each test a
larger share of its round, and a sub-run takes this worker's share of the CPU threads as its whole).
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = ("TRITON_INTERPRET", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT")
TIMEOUT = 900  # seconds a sub-run may take unless its test says otherwise: a guard against a hang, not a speed test
# (a loaded 2-core host without AVX512 took 2.4 times the seconds of a Xeon)


def environment(pythonpath: bool = True, **env: str) -> dict[str, str]:
    """This process's environment without :data:`LEFT_OUT`, with ``env`` added: a ``PYTHONPATH`` given goes before
    this run's own, which may hold the suite's dependencies (a device given them with ``pip install --target``);
    ``pythonpath=False``: without ``PYTHONPATH`` too, as the shell that pastes a printed command has none."""
    left_out = LEFT_OUT if pythonpath else (*LEFT_OUT, "PYTHONPATH")
    kept = {k: v for k, v in os.environ.items() if k not in left_out}
    if "PYTHONPATH" in env and kept.get("PYTHONPATH"):
        env = {**env, "PYTHONPATH": os.pathsep.join([env["PYTHONPATH"], kept["PYTHONPATH"]])}
    return {**kept, **env}


def python(module: str, *args: str) -> list[str]:
    """The command line of ``python -m module args`` with this interpreter; a pytest's without its cache, without
    xdist unless ``args`` ask for workers (``-n``), and with the plugin that writes ``--outcomes`` where they ask
    for it (tests/outcomes.py)."""
    if module != "pytest":
        return [sys.executable, "-m", module, *args]
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *([] if "-n" in args else ["-p", "no:xdist"]),
            *(["-p", "tests.outcomes"] if "--outcomes" in args else []), *args]


def run(command: list[str], cwd: Path = ROOT, timeout: float = TIMEOUT, **env: str) -> subprocess.CompletedProcess:
    """``command`` run to its end in ``cwd``, its output captured, in :func:`environment` with ``env``."""
    return subprocess.run(command, cwd=cwd, env=environment(**env), capture_output=True, text=True, timeout=timeout)


def start(command: list[str], cwd: Path = ROOT, **env: str) -> subprocess.Popen:
    """``command`` started in ``cwd`` in :func:`environment` with ``env``, its stdout and stderr one text stream: for
    a test that signals it or reads it while it runs."""
    return subprocess.Popen(command, cwd=cwd, env=environment(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def pasted(command: str, cwd: Path = ROOT, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """A printed command as a user pastes it into a shell in ``cwd``: nothing inherited that it does not say."""
    return subprocess.run(command, shell=True, cwd=cwd, env=environment(pythonpath=False), capture_output=True,
                          text=True, timeout=timeout)
