"""The caller's stream: a kernel does its work on the stream current when it is called (CUDA).

PyTorch orders a device's work by stream: an input the caller writes on its
current stream is ready for the kernel only if the kernel runs on that stream,
or waits for it.  A kernel that launches elsewhere (the legacy default stream,
a stream of its own) races its caller, reading the input before it is written
and handing back an output still being written: right in a test that runs
everything on one stream, wrong in a program that does not.  Here the caller's
stream is a new one, held busy (``torch.cuda._sleep``) before it writes the
input, so that such a kernel reads the input as it was before the write and
the race is no matter of luck: the result is judged as any other.
"""

import pytest
import torch

from harness.inputs.fixed_inputs import fixed_dtype, longest_fixed_row, row_inputs
from harness.inputs.strategies import Case, Values
from harness.judging.judge import Judgement, describe_input, judge_softmax
from oracles.call import Call
from specs.operations import SOFTMAX

# About 0.1 s of the caller's stream at 2 GHz: far longer than a call takes to launch once compiled.
SLEEP_CYCLES = 200_000_000
ROWS, ROW_LENGTH = 8, 256
WHY = ("the input was written on the caller's stream (a new one, held busy) just before the call: a kernel that "
       "does not run on torch.cuda.current_stream(), nor wait for it, reads it before it is written:\n")


def judged_on_a_busy_stream(kernel, backend) -> Judgement:
    """The kernel's softmax of an input it declares (its dtype, rank and longest row: ``harness/inputs/fixed_inputs.py``),
    called on a busy stream right after the input's write there."""
    if backend.name != "cuda":
        pytest.skip(f"CUDA streams; this run's backend is {backend.name}")
    capabilities = kernel.capabilities
    n = min(ROW_LENGTH, longest_fixed_row(capabilities, backend.name, rows=ROWS) or ROW_LENGTH)
    case = Case((ROWS, n), 1, fixed_dtype(capabilities), Values("normal", 4.0), seed=0)
    ready, _ = row_inputs(capabilities, case.make(backend.device)[0])[0]  # its first row, for a kernel of rank 1 only
    with torch.cuda.device(backend.device):
        kernel.softmax(ready, -1)  # compiled now: the call below must launch at once
        x = torch.zeros_like(ready)
        torch.cuda.synchronize()
        with torch.cuda.stream(torch.cuda.Stream()):
            torch.cuda._sleep(SLEEP_CYCLES)
            x.copy_(ready)
            y = kernel.softmax(x, -1)
        torch.cuda.synchronize()
    return judge_softmax(kernel, Call(ready, -1, SOFTMAX, backend.name), y,
                         replay=f"{case!r} -> {describe_input(ready, -1)}, called on a busy stream")


def test_the_kernel_runs_on_the_callers_stream(kernel, backend):
    judged_on_a_busy_stream(kernel, backend).check(WHY)
