"""Fixtures shared by the suite's own tests."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_pytest():
    """Run the suite in a fresh interpreter (no inherited TRITON_INTERPRET; xdist only when asked with -n)."""

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        clean = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTEST_XDIST_WORKER",
                                                                   "PYTEST_XDIST_WORKER_COUNT")}
        plugins = [] if "-n" in args else ["-p", "no:xdist"]
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugins, *args],
            cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=600,
        )

    return run
