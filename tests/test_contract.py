"""Inputs outside a kernel's declared capabilities raise a clear TypeError or ValueError.

Inside them the kernel must compute (the accuracy tests judge how well); outside
them it must refuse, never return numbers.  The first test draws inputs from the
whole space (any dtype, rank, dim and layout) and checks each against the
kernel's own declaration.
"""

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from harness.judge import describe_input, judge_softmax
from harness.soak import timeboxed
from harness.strategies import Case, Values, cases
from kernels.fused_softmax import softmax as fused_softmax
from kernels.registry import Capabilities

EVERYTHING = Capabilities()  # torch's contract: the widest space there is
FOREIGN_DTYPES = (torch.int32, torch.int64, torch.bool, torch.complex64)
# Rows of length zero once the dim moves by one: the judge's bounds crashed on them.
EMPTY_ROWS = Case((1, 0), 0, torch.bfloat16, Values("subnormal"), seed=0)


def test_inputs_are_refused_exactly_outside_the_declared_capabilities(kernel, backend):
    @given(case=cases(EVERYTHING, backend.name), foreign=st.sampled_from((None,) + FOREIGN_DTYPES),
           dim_shift=st.sampled_from([0, 0, 0, 1, -1, 7]))
    @example(case=EMPTY_ROWS, foreign=None, dim_shift=1)
    @timeboxed
    def check(case, foreign, dim_shift):
        x, _ = case.make(backend.device)
        x = x if foreign is None else x.to(foreign)
        dim = case.dim + dim_shift
        refusal = kernel.capabilities.refusal(x, dim)
        if refusal is not None:
            with pytest.raises(type(refusal)):
                kernel.softmax(x, dim)
            return
        verdict = judge_softmax(kernel, backend.name, x, dim, kernel.softmax(x, dim),
                                replay=f"{case!r}, dim {dim}: {describe_input(x, dim)}")
        assert verdict.ok, verdict.explain()

    check()


def test_offsets_past_31_bits_are_refused():
    # A meta tensor carries shape and strides without memory: 2^31 + 1 fp16 elements.
    x = torch.empty(2**16 + 1, 2**15, dtype=torch.float16, device="meta")
    with pytest.raises(ValueError, match="offset"):
        fused_softmax(x, -1)


def test_documents_wrapper_names_what_it_refuses(backend):
    with pytest.raises(ValueError, match=r"x\.stride\(1\) must be 1"):
        fused_softmax(torch.randn(64, 50, device=backend.device).t())
    with pytest.raises(TypeError, match="x.dtype must be one of .*got torch.int32"):
        fused_softmax(torch.ones(4, 8, dtype=torch.int32, device=backend.device))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        fused_softmax([[1.0, 2.0]])
    with pytest.raises(ValueError, match="row limit"):
        fused_softmax(torch.zeros(1, (1 << 20) + 1, device=backend.device))


def test_documents_wrapper_refuses_tensors_on_another_device(backend):
    elsewhere = "meta" if backend.interpreted else "cpu"
    with pytest.raises(ValueError, match=f"x is on {elsewhere}"):
        fused_softmax(torch.randn(4, 8, device=elsewhere))
