"""The kernel process's Landlock rules (harness/guard/sandbox.py), applied in a process of their own."""

import subprocess
import sys

import pytest

from harness.guard import sandbox
from tests import subruns

# In a fresh process: restrict, then write /proc/self/task/<tid>/comm (as the CUDA driver names its threads) and a
# file of the folder given; print what each did.
PROBE = """
import os, sys, threading
from harness.guard import sandbox
print(sandbox.restrict([sys.argv[1]], files_only=tuple(sys.argv[3:])))
for path in (f"/proc/self/task/{threading.get_native_id()}/comm", sys.argv[2]):
    try:
        with open(path, "w") as file:
            file.write("probe")
        print("wrote")
    except OSError as error:
        print(type(error).__name__)
"""


@pytest.mark.skipif(not sandbox.abi(), reason="no Landlock on this machine")
@pytest.mark.parametrize("files_only,comm", [((), "PermissionError"), (("/proc",), "wrote")])
def test_a_confined_process_names_its_threads_only_where_procfs_is_left_writable(tmp_path, files_only, comm):
    """cuInit writes its threads' names under /proc and fails where it cannot (every kernel process on an H100 died
    at its first call so): a device's kernel process keeps procfs's files writable, and nothing else beside its
    folder."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside.txt"
    allowed.mkdir()
    result = subprocess.run([sys.executable, "-c", PROBE, str(allowed), str(outside), *files_only], capture_output=True,
                            text=True, cwd=subruns.ROOT, env=subruns.environment(), timeout=60)
    assert result.stdout.split() == ["None", comm, "PermissionError"], result.stdout + result.stderr
    assert not outside.exists()
