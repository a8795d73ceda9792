"""A kernel judged past its thousandth call in one process.

A counter, a cache or a pool that goes wrong after some hundreds of calls (an
output buffer recycled at the thousandth, a launch cache that overflows, a
workspace that grows past its allocation) passes every test that calls a
kernel a few hundred times, and a gate's kernel process took about 800 calls
in all.  Here one test makes 1100 calls of eleven small inputs in turn, in one
process (a kernel named by path: its own process, the same for every call),
and judges each output that differs bit for bit from the one judged before for
its input: a deterministic kernel is judged eleven times, any other wherever it
moves.
"""

import pytest
import torch

from harness.inputs.fixed_inputs import fixed_dtype, row_inputs
from harness.inputs.strategies import Case, Values
from harness.judging.judge import describe_input, judge_softmax
from oracles.call import Call
from specs.operations import SOFTMAX

CALLS = 1100
INPUTS = 11  # distinct inputs, called in turn


def test_a_kernel_stays_within_its_bounds_past_its_thousandth_call(kernel, backend):
    dtype = fixed_dtype(kernel.capabilities)
    inputs = []
    for i in range(INPUTS):
        x, _ = Case((3, 8 + i), 1, dtype, Values("normal", 4.0), seed=i).make(backend.device)
        inputs += [x for x, _ in row_inputs(kernel.capabilities, x)][:1]
    inputs = [x for x in inputs if kernel.capabilities.refusal(x, -1) is None]
    if not inputs:
        pytest.skip(f"{kernel.name} takes none of these small rows")
    judged: dict[int, torch.Tensor] = {}
    for call in range(1, CALLS + 1):
        x = inputs[call % len(inputs)]
        y = kernel.softmax(x, -1)
        before = judged.get(call % len(inputs))
        if before is not None and torch.equal(before.view(torch.uint8), y.detach().cpu().contiguous().view(torch.uint8)):
            continue
        judge_softmax(kernel, Call(x, -1, SOFTMAX, backend.name), y,
                      replay=f"call {call} of {CALLS} in one process: {describe_input(x, -1)}").check()
        judged[call % len(inputs)] = y.detach().cpu().contiguous()
