"""Which device the kernels run on: ``--device {auto,cpu,cuda,npu}``.

``auto`` picks an Ascend NPU when ``torch_npu`` imports and reports a device,
else a CUDA GPU, else the CPU.  ``cpu`` means Triton's interpreter.  Triton reads
``TRITON_INTERPRET=1`` when it decorates functions, its own standard library
(``tl.max``, ``tl.sum``) included, so :func:`activate` sets it before triton
is first imported and refuses to go on when triton was loaded without it.
Under ``pytest -n`` each worker takes one device (:mod:`harness.device.pinning`).
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from dataclasses import dataclass

import torch

from ..internals import triton_internals
from . import pinning, tiling

CHOICES = ("auto", "cpu", "cuda", "npu")
SATURATING = "INF_NAN_MODE_FORCE_DISABLE"  # set to 1, an Ascend NPU saturates inf and NaN (CANN's INF_NAN mode off)
# The settings of the device's stack that change what a run computes, recorded with its results.
SETTINGS = {"npu": (SATURATING, "TRITON_ALL_BLOCKS_PARALLEL", "ASCEND_LAUNCH_BLOCKING", "ACL_PRECISION_MODE"),
            "cuda": ("CUDA_LAUNCH_BLOCKING", "NVIDIA_TF32_OVERRIDE", "TRITON_DEFAULT_FP_FUSION")}


def stack(name: str) -> dict[str, str]:
    """The versions of the device's stack beside torch and Triton (torch_npu, CANN, triton-ascend on an NPU; the
    driver-side CUDA on NVIDIA) and the settings of :data:`SETTINGS` set in the environment."""
    found: dict[str, str] = {}
    if name == "npu":
        import importlib.metadata

        try:
            import torch_npu

            found["torch_npu"] = str(getattr(torch_npu, "__version__", "unknown"))
            cann = getattr(getattr(getattr(torch_npu, "npu", None), "utils", None), "get_cann_version", None)
            found["CANN"] = str(cann()) if callable(cann) else "unknown"
        except Exception:  # noqa: BLE001 (not installed, or no CANN: said as unknown)
            found.setdefault("torch_npu", "not importable")
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found["triton-ascend"] = importlib.metadata.version("triton-ascend")
    if name == "cuda":
        found["CUDA"] = str(torch.version.cuda)
    found.update({variable: os.environ[variable] for variable in SETTINGS.get(name, ()) if variable in os.environ})
    return found


class BackendError(RuntimeError):
    """The requested device cannot be used in this process."""


@dataclass(frozen=True)
class Backend:
    name: str  # "cpu" (Triton interpreter), "cuda" or "npu"
    device: torch.device
    device_name: str

    @property
    def interpreted(self) -> bool:
        return self.name == "cpu"

    def describe(self) -> str:
        mode = "Triton interpreter" if self.interpreted else "compiled Triton"
        return f"{self.name} ({mode}) on {self.device_name} [{self.device}]"


def npu_installed() -> bool:
    """Whether torch_npu is there to import (asking no runtime anything)."""
    import importlib.util

    if "torch_npu" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("torch_npu") is not None
    except (ImportError, ValueError):
        return False


def npu_available() -> bool:
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)
    except ImportError:
        return False
    return torch.npu.is_available()


def runtime(name: str):
    """``torch.cuda`` or ``torch.npu`` (which exists once torch_npu is imported)."""
    if name == "npu" and not npu_available():
        raise BackendError("--device npu: torch_npu is not installed or sees no NPU")
    return getattr(torch, name)


def resolve_name(requested: str) -> str:
    if requested not in CHOICES:
        raise BackendError(f"--device must be one of {', '.join(CHOICES)}; got {requested!r}")
    if requested != "auto":
        return requested
    if npu_available():
        return "npu"
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def _device_name(name: str, device: torch.device) -> str:
    if name == "cuda":
        return torch.cuda.get_device_name(device)
    if name == "npu":
        return torch.npu.get_device_name(device)
    return platform.processor() or platform.machine()


def activate(requested: str, worker_id: str | None = None) -> Backend:
    """Resolve ``--device`` and prepare this process (an xdist worker: ``worker_id``) to run kernels there."""
    if requested in ("npu", "auto"):
        problem = pinning.npu_list_problem(os.environ)
        if problem and (requested == "npu" or npu_installed()):
            raise BackendError(f"--device {requested}: {problem}")
    pins = pinning.narrow(worker_id)  # before any device runtime starts
    name = resolve_name(requested)
    interpret_env = os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on")
    if name == "cpu":
        if "triton" in sys.modules and not interpret_env:
            raise BackendError("triton was imported before TRITON_INTERPRET=1 was set; cannot run kernels on cpu")
        os.environ["TRITON_INTERPRET"] = "1"
        triton_internals.speed_up_the_interpreter()
        triton_internals.watch_the_sums(tiling.saw_sum)
        return Backend(name, torch.device("cpu"), _device_name(name, torch.device("cpu")))
    if interpret_env:
        raise BackendError(f"TRITON_INTERPRET is set, which runs kernels on the CPU; unset it for --device {name}")
    if name == "cuda" and not torch.cuda.is_available():
        raise BackendError("--device cuda: torch sees no CUDA device")
    if name == "npu" and os.environ.get(SATURATING, "0") not in ("", "0"):
        raise BackendError(f"--device npu: {SATURATING}={os.environ[SATURATING]} makes the NPU saturate infinities "
                           "and NaN to the largest finite values, and the suite judges every special value a softmax "
                           "meets (a row of -inf, a NaN, an overflowing exp): each would fail on the kernel's account; "
                           f"unset {SATURATING} to judge on this NPU")
    devices = runtime(name)
    pinning.select(name, worker_id, devices.device_count, devices.set_device, pins)
    device = torch.device(name, devices.current_device())
    return Backend(name, device, _device_name(name, device))
