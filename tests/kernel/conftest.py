"""Fixtures of the tests that judge a kernel: device memory a large-input test waits for.

Each xdist worker keeps the device memory its tests freed in torch's caching allocator: on an H100 sixteen
workers held some 45 GiB, and a large input of 2^32 elements (40 GiB with its copies) found 31 GiB free.  A large
test that finds too little asks the others to give their caches back (a file in the run's folder), and each
worker does so after its current test while the file is there.
"""

import time

import pytest
import torch

WANTED = "large-tests.want-device-memory"  # in the run's folder while a large test waits for memory
WAIT_SECONDS = 180  # the longest a large test waits before it skips, saying what it needed and found


@pytest.fixture(autouse=True)
def device_memory_given_back_when_wanted(run_folder, backend):
    yield
    if not backend.interpreted and (run_folder / WANTED).exists():
        getattr(torch, backend.name).empty_cache()


@pytest.fixture
def free_device_memory(run_folder, backend):
    """``free_device_memory(nbytes)``: the device's free memory, once it reaches ``nbytes`` (the other workers
    asked to give their caches back meanwhile) or WAIT_SECONDS have passed."""

    def wait_for(nbytes: int) -> int:
        runtime = getattr(torch, backend.name)
        runtime.empty_cache()  # what this process's earlier tests left cached counts as free
        free, _ = runtime.mem_get_info(backend.device)
        if free >= nbytes:
            return free
        wanted = run_folder / WANTED
        wanted.touch()
        try:
            deadline = time.monotonic() + WAIT_SECONDS
            while free < nbytes and time.monotonic() < deadline:
                time.sleep(0.5)
                free, _ = runtime.mem_get_info(backend.device)
        finally:
            wanted.unlink(missing_ok=True)
        return free

    return wait_for
