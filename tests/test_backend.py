"""Device selection: --device auto/cpu/cuda/npu, the interpreter switch, the header."""

import pytest
import torch

from harness import backend as backend_module
from harness.backend import BackendError, resolve_name


def test_auto_prefers_npu_then_cuda_then_cpu(monkeypatch):
    monkeypatch.setattr(backend_module, "npu_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_name("auto") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_name("auto") == "cuda"
    monkeypatch.setattr(backend_module, "npu_available", lambda: True)
    assert resolve_name("auto") == "npu"
    assert resolve_name("cpu") == "cpu"


def test_unknown_device_is_refused():
    with pytest.raises(BackendError, match="--device must be one of"):
        resolve_name("gpu")


def test_header_names_the_interpreter_backend_and_versions(run_pytest):
    result = run_pytest("--collect-only", "--device", "cpu", "tests/test_formats.py")
    assert result.returncode == 0, result.stderr
    assert "softmax suite backend: cpu (Triton interpreter)" in result.stdout
    for package in ("torch", "triton", "hypothesis", "mpmath"):
        assert f"{package} " in result.stdout


def test_interpreter_switch_conflicts_with_a_compiled_device(run_pytest):
    result = run_pytest("--collect-only", "--device", "cuda", "tests/test_formats.py", TRITON_INTERPRET="1")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "TRITON_INTERPRET is set" in result.stderr


def test_unknown_kernel_is_a_usage_error(run_pytest):
    result = run_pytest("--collect-only", "--kernel", "no_such_kernel", "tests/test_formats.py")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "not a registered kernel" in result.stderr
