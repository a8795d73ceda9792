"""Inputs outside a kernel's declared capabilities are refused.

Inside them the kernel must compute (the accuracy tests judge how well); outside
them it must refuse, never return numbers.  This project's kernels refuse with a
clear TypeError or ValueError; a user's ``module:function`` refuses as torch does,
with any exception, and need not refuse what torch.softmax itself accepts (an
empty int32 tensor, say).  The first test draws inputs from the whole space (any
dtype, rank, dim and layout) and checks each against the kernel's own declaration.
"""

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from harness.inputs.fixed_inputs import fixed_dtype
from harness.inputs.strategies import Case, Values, cases
from harness.judging import pipeline
from harness.judging.judge import describe_input
from harness.plugins.timebox import timeboxed
from oracles.call import Call
from specs.operations import SOFTMAX
from specs.registry import Capabilities

EVERYTHING = Capabilities()  # torch's contract: the widest space there is
FOREIGN_DTYPES = (torch.int32, torch.int64, torch.bool, torch.complex64)
# Rows of length zero once the dim moves by one: the judge's bounds crashed on them.
EMPTY_ROWS = Case((1, 0), 0, torch.bfloat16, Values("subnormal"), seed=0)


@pytest.mark.first
def test_inputs_are_refused_exactly_outside_the_declared_capabilities(kernel, backend):
    @given(case=cases(EVERYTHING, backend.name), foreign=st.sampled_from((None,) + FOREIGN_DTYPES),
           dim_shift=st.sampled_from([0, 0, 0, 1, -1, 7]))
    @example(case=EMPTY_ROWS, foreign=None, dim_shift=1)
    @timeboxed
    def check(case, foreign, dim_shift):
        x, _ = case.make(backend.device)
        x = x if foreign is None else x.to(foreign)
        dim = case.dim + dim_shift
        replay = f"{case!r}, dim {dim}: {describe_input(x, dim)}"
        pipeline.run_and_judge(kernel, Call(x, dim, SOFTMAX, backend.name), replay=replay).check()

    check()



@pytest.mark.first
def test_sparse_and_nested_tensors_are_refused_by_name(kernel, backend):
    """Strides are what a Triton kernel reads its input by: a tensor without them (sparse, nested)
    must meet the clear TypeError, not an error from deep inside torch: in a dtype the kernel declares, so that
    the layout alone is what it refuses."""
    if not kernel.clear_refusals:
        pytest.skip(f"{kernel.name} may refuse with any exception, as torch does (only this project's kernels must "
                    "name the argument)")
    dtype = fixed_dtype(kernel.capabilities)
    sparse = torch.randn(4, 8, dtype=dtype, device=backend.device).to_sparse()
    nested = torch.nested.nested_tensor([torch.randn(3), torch.randn(5)], dtype=dtype, device=backend.device)
    for x, named in ((sparse, "a tensor of layout torch.sparse_coo"), (nested, "a nested tensor")):
        with pytest.raises(TypeError, match=f"x must be a dense tensor .*got {named}"):
            kernel.softmax(x, -1)
