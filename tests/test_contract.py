"""Inputs outside a kernel's declared capabilities raise a clear TypeError or ValueError."""

import pytest
import torch

from kernels.fused_softmax import softmax as fused_softmax


def candidates(device):
    """(label, x, dim): inputs that some kernel or other cannot take."""
    base = torch.randn(64, 50, device=device)
    return [
        ("transposed", base.t(), -1),
        ("int32", base.to(torch.int32), -1),
        ("float64", base.double(), -1),
        ("rank 1", base[0], -1),
        ("rank 3", base.reshape(4, 16, 50), -1),
        ("dim 0", base, 0),
        ("dim out of range", base, 2),
        ("column step 2", base[:, ::2], -1),
        ("row too long for one block", torch.randn(1, (1 << 20) + 1, device=device), -1),
    ]


@pytest.mark.parametrize("index", range(len(candidates("cpu"))), ids=[c[0] for c in candidates("cpu")])
def test_outside_capabilities_raises_clear_error(kernel, backend, index):
    label, x, dim = candidates(backend.device)[index]
    refusal = kernel.capabilities.refusal(x, dim)
    if refusal is None:
        result = kernel.softmax(x, dim)
        assert result.shape == x.shape, f"{kernel.name} on {label}: output shape {tuple(result.shape)}"
        return
    with pytest.raises(type(refusal)):
        kernel.softmax(x, dim)


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


def test_documents_wrapper_refuses_tensors_on_another_device(backend):
    elsewhere = "meta" if backend.interpreted else "cpu"
    with pytest.raises(ValueError, match=f"x is on {elsewhere}"):
        fused_softmax(torch.randn(4, 8, device=elsewhere))
