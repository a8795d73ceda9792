"""Inputs past hardware and index limits: past 2^31 and 2^32 elements, more than 65535 rows.

Every operation a kernel declares (``specs/operations.py``), in every dtype it
is tested in and the kernel declares (a backward in its smallest), on an input
of rows past element offset 2^31; every operation but the backward, in its
smallest declared dtype (8 GiB at 2^32 half elements), past 2^32, where pytorch
issue 84144 reported wrong results.  An
input beyond the kernel's declared ``max_offset`` must be refused.  The rows
are short, many, and random (no two alike), the last but one ending in -inf
and the last in a NaN, so that a kernel whose offsets wrap (reading row r mod
2^31 / n, or r mod 2^32 / n, for rows of n) reads another row and fails; the
first and last rows are judged (the oracle over all would take hours), the
first catching writes that wrapped onto them.

Device only: under the interpreter such inputs take hours.  Where the device
lacks the memory the test is skipped, naming the GiB each buffer alive at once
needs (:func:`bytes_needed`) and the GiB free.
One such test runs at a time on a machine, and gives its memory back to the
device when it ends: 16 GiB held by each of several xdist workers at once
(PyTorch's caching allocator keeps what a test freed) left the other workers'
kernels out of memory on an H100.

The builder and the judge take any size: ``tests/suite/test_large_inputs.py``
runs them past 2^14 elements, where ``specs.mutants:offset_wrap`` wraps.
"""

import fcntl
import gc
import math
import sys
import traceback

import pytest
import torch

from harness.inputs.strategies import ATTENTION_SCALES
from harness.judging import pipeline
from harness.judging.judge import Judgement, describe_input
from oracles.call import Call
from oracles.formats import format_of
from specs.operations import OPERATIONS, SOFTMAX, TESTED_DTYPES, Declared

pytestmark = pytest.mark.large

ROW = 1024  # the rows' length, or the kernel's row limit where shorter: many short rows past each bound
JUDGED_ROWS = 4  # judged at each end of the input; the last ones lie wholly past the bound
SEED = 0  # of the inputs' generator on the device
ROWS_PAST_GRID_LIMIT = 65535 + 2  # one more row than an Ascend grid (and CUDA's y / z) allows, of rows of 16
KEEP_ABOVE = -2.0  # the masked operation keeps the elements above this (97.7 % of normal ones), per row another set


@pytest.fixture(autouse=True)
def one_at_a_time(backend, run_folder):
    """Hold the run's lock of the large tests, and empty this process's cache of device memory after the test."""
    with open(run_folder / "large-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if not backend.interpreted:
                # A failure's traceback, which pytest keeps (sys.last_traceback) until the next test, holds the
                # frames that hold the input and output, tens of GiB, in reference cycles: let them go now.
                if getattr(sys, "last_traceback", None) is not None:
                    traceback.clear_frames(sys.last_traceback)
                    gc.collect()
                getattr(torch, backend.name).empty_cache()


def declared(kernel, op: Declared, dtypes) -> list[torch.dtype]:
    """The ``dtypes`` the kernel declares, skipping the test where it declares ``op`` in none of them."""
    if not kernel.declares(op):
        pytest.skip(f"{kernel.name} declares no {op.what}")
    chosen = [d for d in dtypes if d in kernel.capabilities.dtypes]
    if not chosen:
        pytest.skip(f"{kernel.name} declares no {' nor '.join(str(format_of(d)) for d in dtypes)}")
    return chosen


def device_only(backend) -> None:
    if backend.interpreted:
        pytest.skip("device only: the interpreter would take hours over 2^31 elements")


def rows_of(kernel, rows: int, cols: int) -> tuple[int, ...]:
    """``rows`` rows of ``cols`` elements in the lowest rank from 2 up the kernel declares (leading sizes 1)."""
    ranks = kernel.capabilities.ranks
    rank = 2 if ranks is None or 2 in ranks else min((r for r in ranks if r > 2), default=None)
    if rank is None:
        pytest.skip(f"{kernel.name} declares rank 1 only: one row of all the elements, which the oracle cannot "
                    "judge in time")
    return (1,) * (rank - 2) + (rows, cols)


def shape_past(kernel, backend, elements: int) -> tuple[int, ...]:
    """Rows of ROW elements (of the kernel's row limit where shorter), the last JUDGED_ROWS wholly past
    ``elements`` elements."""
    cols = min(ROW, kernel.capabilities.row_limit(backend.name) or ROW)
    return rows_of(kernel, -(-elements // cols) + JUDGED_ROWS, cols)


def bytes_needed(kernel, op: Declared, dtype: torch.dtype, shape: tuple[int, ...]) -> dict[str, int]:
    """The device memory alive at once, by buffer, while the kernel runs ``op`` on an input of ``shape``: the
    peak is the guard's comparison after the call (``harness/guard/calls.py``).  The kernel's own workspace is not
    known here: none for full_softmax, 2 to 4 GiB for torch's masked and bf16-to-fp32 softmax on an H100
    (measured peaks, 2026-11-27)."""
    n, row, out = math.prod(shape), shape[-1], (op.out_dtype or dtype).itemsize
    # The second input: a mask (a bool per entry), or a backward's gradient (x being the forward's output).
    second = n if op.masked else n * dtype.itemsize if op.backward else 0
    x, y = n * dtype.itemsize, n * out
    refused = kernel.capabilities.refusal(torch.empty(shape, dtype=dtype, device="meta"), -1) is not None
    returned = y if not (refused and kernel.clear_refusals) else 0
    return {
        "x": x, "the mask or grad": second, "the guard's copy of x": x, "the guard's copy of the mask or grad": second,
        "the guard's comparison of x with its copy (a bool per byte)": max(x, second),
        "y": returned,
        # A kernel that need not refuse clearly and returns numbers: torch must accept that input (harness/judging/judge.py).
        "torch's softmax of x": x if refused and not kernel.clear_refusals else 0,
        "the judged rows of x, mask or grad, y and torch's y": 2 * JUDGED_ROWS * row * (
            dtype.itemsize + second // max(n, 1) + 2 * out),
    }


def size(nbytes: int) -> str:
    """``nbytes`` in GiB, MiB or KiB, the first that reads 1 or more."""
    for unit, name in ((2**30, "GiB"), (2**20, "MiB")):
        if nbytes >= unit:
            return f"{nbytes / unit:.1f} {name}"
    return f"{nbytes / 2**10:.1f} KiB"


def need_device_memory(free_device_memory, needed: dict[str, int]) -> None:
    """Skip, naming the GiB needed (by buffer) and free, where the device has less free (after the other workers
    gave back what they keep cached: tests/kernel/conftest.py)."""
    total = sum(needed.values())
    free = free_device_memory(total)
    if free < total:
        parts = ", ".join(f"{name} {size(nbytes)}" for name, nbytes in needed.items() if nbytes)
        pytest.skip(f"needs {size(total)} of free device memory ({parts}), {size(free)} free")


def large_call(op: Declared, dtype: torch.dtype, shape: tuple[int, ...], backend) -> Call:
    """The call of ``op`` on random rows of ``shape`` made on the device (no copy through the host), row -2 ending
    in -inf and row -1 in a NaN, whose wrong reads show (an exact 0, a row all NaN); for a masked ``op`` a keep-mask
    that differs from row to row and keeps that NaN.  A backward takes finite inputs: the softmax (log_softmax) of
    those rows (row -2 ending in an exact 0, or -inf) with the NaN made -1, and a random gradient."""
    generator = torch.Generator(device=backend.device).manual_seed(SEED)
    x = torch.randn(shape, dtype=dtype, device=backend.device, generator=generator)
    rows = x.view(-1, shape[-1])
    rows[-2, -1], rows[-1, -1] = -torch.inf, torch.nan
    if op.backward:
        rows[-1, -1] = -1.0
        grad = torch.randn(shape, dtype=dtype, device=backend.device, generator=generator)
        return Call((torch.log_softmax if op.log else torch.softmax)(x, -1), -1, op, backend.name, grad=grad)
    if op.scaled:  # attention's 1/sqrt(80); a bias of one row (random, its last entry -inf), broadcast over all
        bias = torch.randn(shape[-1], dtype=dtype, device=backend.device, generator=generator) if op.biased else None
        if bias is not None:
            bias[-1] = -torch.inf
        return Call(x, -1, op, backend.name, scale=ATTENTION_SCALES[5], bias=bias)
    if not op.masked:
        return Call(x, -1, op, backend.name)
    keep = x > KEEP_ABOVE
    keep.view(-1, shape[-1])[-1, -1] = True
    return Call(x, -1, op, backend.name, keep)


def ends(t: torch.Tensor) -> torch.Tensor:
    """The first and last JUDGED_ROWS rows of ``t``, in its rank."""
    rows = t.view(-1, t.shape[-1])
    return torch.cat([rows[:JUDGED_ROWS], rows[-JUDGED_ROWS:]]).view(*t.shape[:-2], 2 * JUDGED_ROWS, t.shape[-1])


def judged_large(kernel, backend, op: Declared, dtype: torch.dtype, shape: tuple[int, ...]) -> Judgement | None:
    """The kernel's ``op`` of :func:`large_call` judged on its first and last rows; None where that input lies
    outside the kernel's capabilities and was refused as it must be."""
    call = large_call(op, dtype, shape, backend)
    x = call.x
    n = x.numel() // shape[-1]
    judged = Call(ends(x), -1, op, backend.name, *(None if t is None else ends(t) for t in (call.mask, call.grad)),
                  scale=call.scale, bias=call.bias)
    replay = (f"rows 0-{JUDGED_ROWS - 1} and {n - JUDGED_ROWS}-{n - 1} (judged as rows 0-{2 * JUDGED_ROWS - 1}) of "
              f"{describe_input(x, -1)}, tests/kernel/test_large.py large_call seed {SEED}")

    ran = pipeline.run_and_judge(kernel, call, replay=replay, judged=lambda y: (judged, ends(y)))
    if ran.refusal is not None or ran.verdict is None:
        ran.check()
        return None
    return ran.verdict


def check_large(kernel, backend, free_device_memory, op: Declared, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    """Skipped where the device lacks the memory; else refused as declared, or right on its first and last rows."""
    need_device_memory(free_device_memory, bytes_needed(kernel, op, dtype, shape))
    verdict = judged_large(kernel, backend, op, dtype, shape)
    if verdict is not None:
        verdict.check()


def large_cases() -> list:
    """Each operation in each dtype it is tested in but fp64 (16 GiB an input past 2^31, beside its copies); a
    backward, whose call holds two inputs and their copies (24 GiB of fp16 past 2^31), and a scaled softmax (the
    forward's path, its logits formed first), in their smallest dtype only.  Not the causal softmax: its mask follows
    a row's place in its matrix, which judging the first and last rows apart would move."""
    return [pytest.param(op, dtype, id=f"{op.name}-{format_of(dtype)}") for op in OPERATIONS.values() if not op.causal
            for dtype in (smallest(op.dtypes) if op.backward or op.scaled else op.dtypes) if dtype in TESTED_DTYPES]


def smallest(dtypes) -> tuple[torch.dtype]:
    return (min(dtypes, key=lambda d: d.itemsize),)


@pytest.mark.parametrize("op,dtype", large_cases())
def test_offsets_past_2_31_elements(kernel, backend, free_device_memory, op, dtype):
    declared(kernel, op, (dtype,))
    device_only(backend)
    check_large(kernel, backend, free_device_memory, op, dtype, shape_past(kernel, backend, 2**31))


# A backward past 2^32 holds 48 GiB at once, which an H100 shared with the gate's other workers frees only after
# minutes of waiting (measured 2026-11-27): its offsets are tested past 2^31.
@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in OPERATIONS.values()
                                if not (op.backward or op.scaled)])
def test_offsets_past_2_32_elements(kernel, backend, free_device_memory, op):
    """In the op's smallest dtype the kernel declares: 8 GiB of half input, 16 of fp32."""
    dtype = min(declared(kernel, op, op.dtypes), key=lambda d: d.itemsize)
    device_only(backend)
    check_large(kernel, backend, free_device_memory, op, dtype, shape_past(kernel, backend, 2**32))


@pytest.mark.parametrize("dtype", [pytest.param(dtype, id=str(format_of(dtype))) for dtype in TESTED_DTYPES])
def test_more_rows_than_a_grid_dimension_holds(kernel, backend, free_device_memory, dtype):
    declared(kernel, SOFTMAX, (dtype,))
    device_only(backend)
    cols = min(16, kernel.capabilities.row_limit(backend.name) or 16)
    check_large(kernel, backend, free_device_memory, SOFTMAX, dtype, rows_of(kernel, ROWS_PAST_GRID_LIMIT, cols))
