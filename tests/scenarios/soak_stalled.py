"""Scenario for the soak and nightly drivers' tests (its file name keeps the main run from collecting it).

* ``test_passes`` passes at once, and ``test_skipped`` skips: a round of ``-k skipped`` tests nothing;
* ``test_stalls`` is a hung test: it writes its process id to ``$SOFTMAX_SUITE_PID_FILE``, so that a
  driver's test knows the round is running and can signal it, then sleeps two minutes, longer than any of
  those tests waits; with ``SOFTMAX_SUITE_IGNORE_SIGTERM`` set it ignores SIGTERM, as a stuck process may.

Below the tests, what the drivers' tests watch it with.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

PID_FILE = "SOFTMAX_SUITE_PID_FILE"
IGNORE_SIGTERM = "SOFTMAX_SUITE_IGNORE_SIGTERM"


def test_passes():
    assert True


def test_skipped():
    pytest.skip("this scenario tests nothing here")


def test_stalls():
    if os.environ.get(IGNORE_SIGTERM):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    path = Path(os.environ[PID_FILE])
    path.with_suffix(".tmp").write_text(str(os.getpid()))
    path.with_suffix(".tmp").rename(path)  # whole, or not there yet
    time.sleep(120)


def stalled_pid(path: Path, driver: subprocess.Popen, timeout: float = 120) -> int:
    """The process id ``test_stalls`` wrote to ``path``, once it is running under ``driver``."""
    end = time.time() + timeout
    while not path.exists():
        assert driver.poll() is None, f"the driver ended (status {driver.returncode}) before the round stalled"
        assert time.time() < end, f"no round stalled within {timeout} s"
        time.sleep(0.1)
    return int(path.read_text())


def is_running(pid: int, wait: float = 5) -> bool:
    """Whether the process ``pid`` is still there ``wait`` seconds from now (it may be ending)."""
    end = time.time() + wait
    while time.time() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.1)
    return True
