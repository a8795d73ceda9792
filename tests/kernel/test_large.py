"""Inputs past hardware and index limits: more than 2^31 elements, more than 65535 rows.

Device only: under the interpreter such inputs take hours.  Where the device
lacks the memory the test is skipped, saying how much it needs.  One such test
runs at a time on a machine, and gives its memory back to the device when it
ends: 16 GiB held by each of several xdist workers at once (PyTorch's caching
allocator keeps what a test freed) left the other workers' kernels out of
memory on an H100.
"""

import fcntl

import pytest
import torch

from harness.judge import describe_input, judge_softmax
from oracles.call import Call
from specs.operations import SOFTMAX

pytestmark = pytest.mark.large

ROWS_PAST_31_BITS = (2**31 // 1024 + 8, 1024)  # 2^31 + 8192 fp16 elements, 4 GiB
ROWS_PAST_GRID_LIMIT = (65535 + 2, 16)  # one more row than an Ascend grid (and CUDA's y / z) allows


@pytest.fixture(autouse=True)
def one_at_a_time(backend, run_folder):
    """Hold the run's lock of the large tests, and empty this process's cache of device memory after the test."""
    with open(run_folder / "large-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if not backend.interpreted:
                getattr(torch, backend.name).empty_cache()


def need_device_memory(backend, nbytes: int) -> None:
    if backend.interpreted:
        pytest.skip("device only: the interpreter would take hours over 2^31 elements")
    free, _ = getattr(torch, backend.name).mem_get_info(backend.device)
    if free < nbytes:
        pytest.skip(f"needs {nbytes / 2**30:.1f} GiB of free device memory, {free / 2**30:.1f} GiB free")


def check_tail(kernel, backend, x: torch.Tensor, rows: int = 4) -> None:
    """Refused with a clear error, or right on the first and last rows (the oracle on all would take hours)."""
    refusal = kernel.capabilities.refusal(x, -1)
    if refusal is not None:
        with pytest.raises(type(refusal)):
            kernel.softmax(x, -1)
        return
    y = kernel.softmax(x, -1)
    for part in (slice(0, rows), slice(-rows, None)):
        verdict = judge_softmax(kernel, Call(x[part], -1, SOFTMAX, backend.name), y[part],
                                replay=f"rows {part} of torch.randn{ROWS_PAST_31_BITS}: {describe_input(x, -1)}")
        verdict.check()


def test_offsets_past_2_31_elements(kernel, backend):
    need_device_memory(backend, 4 * ROWS_PAST_31_BITS[0] * ROWS_PAST_31_BITS[1] * 2)  # x, its snapshot, y, torch's
    x = torch.randn(ROWS_PAST_31_BITS, device=backend.device, dtype=torch.float16)
    check_tail(kernel, backend, x)


def test_more_rows_than_a_grid_dimension_holds(kernel, backend):
    need_device_memory(backend, 1 << 26)
    x = torch.randn(ROWS_PAST_GRID_LIMIT, device=backend.device)
    check_tail(kernel, backend, x)
