"""The refusal machinery, a user's kernel refusing as torch does, and the documents' wrapper's own refusals
(the refusals of every kernel under test: tests/kernel/test_refusals.py)."""

from dataclasses import replace

import pytest
import torch

from harness.guard.calls import ContractBroken
from harness.judging.judge import judge_softmax
from harness.judging.pipeline import run_and_judge
from kernels.fused_softmax import softmax as fused_softmax
from oracles.call import Call
from specs.operations import SOFTMAX
from specs.registry import Capabilities, resolve


def test_a_user_kernel_refuses_as_torch_does_and_silence_is_caught():
    """A user's kernel may refuse with torch's own errors, but never return numbers torch would refuse."""
    user = resolve("torch.nn.functional:softmax")
    assert not user.clear_refusals
    ints, empty = torch.ones(2, 3, dtype=torch.int32), torch.ones(0, 3, dtype=torch.int32)
    refusal = Capabilities().refusal(ints, 1)
    of_ints, of_empty = Call(ints, 1, SOFTMAX, "cpu"), Call(empty, 1, SOFTMAX, "cpu")
    refused = run_and_judge(user, of_ints, replay="ints")  # RuntimeError: not implemented for 'Int'
    assert str(refused.refusal) == str(refusal) and isinstance(refused.raised, RuntimeError)
    refused.check()
    run_and_judge(user, of_empty, replay="empty ints").check()  # torch accepts an empty int tensor
    silent = replace(user, softmax=lambda x, dim: torch.zeros(x.shape))
    with pytest.raises(AssertionError, match="returned numbers for an input outside"):
        run_and_judge(silent, of_ints, replay="ints").check()
    with pytest.raises(RuntimeError):  # this project's kernels must raise the TypeError naming x.dtype
        run_and_judge(replace(user, clear_refusals=True), of_ints, replay="ints").check()


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


@pytest.mark.parametrize("returned", [torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, 2)], ids=["dtype", "shape"])
def test_a_result_of_another_dtype_or_shape_is_a_broken_contract_not_a_verdict_on_numbers(returned):
    user = resolve("torch.nn.functional:softmax")
    with pytest.raises(ContractBroken, match=r"returned a result of shape .* for softmax, whose result has x's shape "
                                             r"\(2, 3\) and dtype torch.float32"):
        judge_softmax(user, Call(torch.zeros(2, 3), 1, SOFTMAX, "cpu"), returned, replay="here")
