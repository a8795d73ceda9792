"""A kernel process that cannot write the suite's files: Linux's Landlock, which an unprivileged process applies to
itself and to the processes it starts, for good.

Run as the suite's own user, a kernel could write anything the suite can: at its import, a ``.pyc`` of the judge
that finds no violation (loaded by every later process of the run, and of the runs after, invisible to ``git
status``), the baseline the gate reads, the reports, the example database.  Before it imports the kernel, a kernel
process forbids itself every write (creating, writing, truncating, removing, renaming, linking files and folders)
but under the folders it needs: its own temporary folder (``TMPDIR``, where what it prints goes too), Triton's and
Inductor's caches, and the devices (``/dev``: a GPU's, ``/dev/shm``).  On a device, writing procfs's existing files
too (nothing can be made there): the CUDA driver names the threads it starts in ``/proc/<pid>/task/<tid>/comm``,
and its ``cuInit`` fails where it cannot (error 304, NVIDIA/OpenShell#710: every kernel process on an H100 died at
its first call); a rule for the process's own ``/proc/self/task`` would bind to inodes procfs makes anew.
Reading stays free.

Landlock needs Linux 5.13 or later with the Landlock LSM enabled (ABI 1; 5.19 adds renames across folders, 6.2
truncation); :func:`restrict` says what it could not do, and the run's header says so: where a kernel process can
write the suite's files (an older kernel, gVisor, macOS), the suite's own files are hashed before any kernel runs and
again at the end, and a run whose files changed gives no verdict (``harness.plugins.reporting``); a planted
``.pyc`` is not seen so.  What Landlock does
not close: a kernel process can still signal the suite's processes and read their memory where ptrace allows it
(the same user; on a device write it too, through procfs), and write to the terminal it inherited; ARCHITECTURE.md,
"The process boundary".
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from pathlib import Path

# Syscall numbers (x86-64 and aarch64 share them: Landlock came after the tables were unified) and flags.
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
# Access rights to the file system, by the ABI that brought them.
WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block devices and symlinks
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2 and 3
READ_DIR_AND_FILE = (1 << 2) | (1 << 3)  # never handled: reading stays free


def writes(abi: int) -> int:
    """Every right that writes the file system, at Landlock ABI ``abi``."""
    return WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)


NO_LANDLOCK = "SOFTMAX_SUITE_NO_LANDLOCK"  # set: act as on a machine without Landlock (the suite's tests of that path)


def abi() -> int:
    """The Landlock ABI this kernel offers; 0 where there is none (not Linux, too old, disabled, gVisor)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64") or os.environ.get(NO_LANDLOCK):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(version), 0)


def writable(home: str | None = None) -> list[str]:
    """The folders a kernel process may write under, beside its own temporary folder: the devices, and the caches
    compilers keep (Triton's, Inductor's, CUDA's), where they exist."""
    home = home or os.path.expanduser("~")
    folders = ["/dev", os.environ.get("TRITON_CACHE_DIR") or os.path.join(home, ".triton"),
               os.path.join(home, ".nv"), os.path.join(home, ".cache")]
    return [folder for folder in folders if os.path.isdir(folder)]


def restrict(allowed: list[str], files_only: tuple[str, ...] = ()) -> str | None:
    """Forbid this process, and what it starts, every write but under ``allowed``, and under ``files_only`` the
    writing of files that exist; None where it is done, else why it could not be."""
    version = abi()
    if not version:
        return "no Landlock here (Linux 5.13 or later, with its LSM on, has it)"
    libc = ctypes.CDLL(None, use_errno=True)
    handled = writes(version)
    attr = struct.pack("=Q", handled)
    ruleset = libc.syscall(CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
    try:
        files = WRITE_FILE | (TRUNCATE if version >= 3 else 0)  # opened for writing, with O_TRUNC or not
        for folder, rights in [(folder, handled) for folder in allowed] + [(folder, files) for folder in files_only]:
            descriptor = os.open(folder, os.O_PATH | os.O_CLOEXEC)
            try:
                beneath = struct.pack("=Qi", rights, descriptor)  # struct landlock_path_beneath_attr (packed)
                if libc.syscall(ADD_RULE, ruleset, ctypes.c_uint32(RULE_PATH_BENEATH), beneath, ctypes.c_uint32(0)):
                    return f"landlock_add_rule({folder}) failed: {os.strerror(ctypes.get_errno())}"
            finally:
                os.close(descriptor)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            return f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
        if libc.syscall(RESTRICT_SELF, ruleset, ctypes.c_uint32(0)):
            return f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return None


def protection() -> str:
    """What the run's header says of a kernel process's writes."""
    version = abi()
    if version:
        return (f"kernel processes write only under their own temporary folder, the compilers' caches and /dev, and "
                f"on a device procfs's files (Landlock ABI {version})")
    return ("kernel processes can write the suite's files (no Landlock on this machine): the suite's files are hashed "
            "before any kernel runs and at the end, and a change refuses the verdict")


def fingerprint(root: Path, baseline: Path | None) -> dict[str, str]:
    """A digest of each of the suite's own source files under ``root`` (its packages' ``.py``) and of the
    ``baseline`` read: what a kernel writing the suite's files would change.  Not their cached bytecode, which the
    suite's own processes write as they import: a planted ``.pyc`` is closed by Landlock alone."""
    import hashlib

    files = [path for package in ("harness", "oracles", "report", "specs", "kernels", "tests")
             for path in (root / package).rglob("*.py")]
    files += [baseline] if baseline is not None and baseline.is_file() else []
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(files)}
