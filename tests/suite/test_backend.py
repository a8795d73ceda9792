"""Device selection: --device auto/cpu/cuda/npu, the interpreter switch, the header."""

import pytest
import torch

from harness.device import backend as backend_module
from harness.device.backend import BackendError, resolve_name


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
    result = run_pytest("--collect-only", "--device", "cpu", "tests/suite/test_formats.py")
    assert result.returncode == 0, result.stderr
    assert "softmax suite backend: cpu (Triton interpreter)" in result.stdout
    for package in ("torch", "triton", "hypothesis", "mpmath"):
        assert f"{package} " in result.stdout


def test_interpreter_switch_conflicts_with_a_compiled_device(run_pytest):
    result = run_pytest("--collect-only", "--device", "cuda", "tests/suite/test_formats.py", TRITON_INTERPRET="1")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "TRITON_INTERPRET is set" in result.stderr


def test_unknown_kernel_is_a_usage_error(run_pytest):
    result = run_pytest("--collect-only", "--kernel", "no_such_kernel", "tests/suite/test_formats.py")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "not a registered kernel" in result.stderr


@pytest.mark.parametrize("source,selector,message", [
    (None, "my_absent_kernels:softmax", "no module 'my_absent_kernels' on the import path: run from the folder "
                                        "that holds it, add that folder to PYTHONPATH, or name the file (--kernel "
                                        "path/to/my_absent_kernels.py:function)"),
    (None, "absent/my_kernels.py:softmax", "no file "),
    ("def softmax(x, dim):\n    return x.softmax(dim\n", "my_kernels:softmax",
     "importing my_kernels raised SyntaxError"),
    ("import liger_kernel_not_installed\n", "my_kernels:softmax",
     "importing my_kernels needs 'liger_kernel_not_installed', which is not installed"),
    ("raise RuntimeError('no GPU here')\n", "my_kernels:softmax", "importing my_kernels raised RuntimeError: no GPU"),
    ("softmax = 3\n", "my_kernels:softmax", "my_kernels has no callable 'softmax'"),
])
def test_a_broken_user_kernel_module_is_a_usage_error_naming_the_option(run_pytest, tmp_path, source, selector,
                                                                         message):
    if source is not None:
        (tmp_path / "my_kernels.py").write_text(source)
    result = run_pytest("--collect-only", "--kernel", selector, "tests/suite/test_formats.py", PYTHONPATH=str(tmp_path))
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"--kernel '{selector}': {message}" in result.stderr


def test_an_unknown_hypothesis_profile_is_a_usage_error(run_pytest):
    result = run_pytest("--collect-only", "--hypothesis-profile", "nosuch", "tests/suite/test_formats.py")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-2000:] + result.stderr[-2000:]
    assert "--hypothesis-profile 'nosuch': no such profile" in result.stderr
