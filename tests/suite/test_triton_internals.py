"""The private internal of Triton's interpreter the suite changes still does what harness/triton_internals.py says,
and the change costs no bit: a kernel whose helpers patch the language once computes what it did before."""

import inspect

import pytest
import torch

from harness import triton_internals


@pytest.fixture
def interpreter(backend):
    if not backend.interpreted:
        pytest.skip(f"Triton's interpreter runs on the cpu backend; this run's is {backend.name}")
    from triton.runtime import interpreter

    return interpreter


def test_a_device_function_call_still_patches_the_language(interpreter):
    """When it no longer does, harness/triton_internals.py has nothing left to do: remove it."""
    assert "_patch_lang(self.fn)" in inspect.getsource(interpreter.InterpretedFunction.__call__)


def test_the_run_patches_the_language_once_a_launch_and_restores_it_after(interpreter, monkeypatch):
    import triton.language as tl

    from kernels.full_softmax import host

    patch_once = interpreter._patch_lang
    assert getattr(patch_once, "patches_once", False), "the cpu backend did not apply the change"
    asked, patched = [], []
    original = patch_once.original
    monkeypatch.setattr(patch_once, "original", lambda fn: patched.append(fn) or original(fn))
    monkeypatch.setattr(interpreter, "_patch_lang", lambda fn: asked.append(fn) or patch_once(fn))
    host.softmax(torch.randn(3, 3000), -1)  # split rows: two launches, helpers called in every chunk
    # Patched: each launch, and a helper whose module names the language otherwise (tl.core), once.
    assert len(patched) == len(set(patched)) and len(asked) > 10 * len(patched), (len(asked), patched)
    assert tl.core.is_builtin(tl.load), "the launch left the language patched"


def test_the_same_bits_with_the_language_patched_once_or_at_every_call(interpreter, monkeypatch):
    from kernels.full_softmax import host

    x = (torch.randn(5, 3000, generator=torch.Generator().manual_seed(0)) * 8).to(torch.float16)
    keep = torch.rand(5, 3000, generator=torch.Generator().manual_seed(1)) > 0.3
    once = [host.softmax(x, -1), host.log_softmax(x, -1), host.masked_softmax(x, keep, -1)]
    monkeypatch.setattr(interpreter, "_patch_lang", interpreter._patch_lang.original)
    every_call = [host.softmax(x, -1), host.log_softmax(x, -1), host.masked_softmax(x, keep, -1)]
    for a, b in zip(once, every_call):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))
