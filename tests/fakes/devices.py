"""Fake accelerators, loaded with ``pytest -p tests.fakes.devices``.

``FAKE_NPUS=N`` makes a fake ``torch_npu`` importable that registers N Ascend
devices as ``torch.npu``; ``FAKE_CUDA=N`` makes ``torch.cuda`` report N GPUs.
Like the real runtimes, a fake one starts on its first call, and only then
reads its visible-device variable (``ASCEND_RT_VISIBLE_DEVICES``,
``CUDA_VISIBLE_DEVICES``): a worker that narrows the variable too late sees
every device.  Nothing runs on these devices; they exist to test detection,
worker pinning and the ``-n auto`` worker count.
"""

from __future__ import annotations

import os
import sys
import types

import torch

from harness.device import pinning

VISIBLE = {"npu": "ASCEND_RT_VISIBLE_DEVICES", "cuda": "CUDA_VISIBLE_DEVICES"}
RUNTIMES: dict[str, "FakeRuntime"] = {}  # the installed fakes, by device type
NPU_LIBRARIES: list = []  # the fake torch_npu's registrations for ATen's operators


class FakeRuntime:
    """The device-management calls of ``torch.cuda`` / ``torch.npu`` over ``physical`` devices."""

    def __init__(self, kind: str, physical: int):
        self.kind = kind
        self.physical = physical
        self.started_with: str | None = None  # the visible-device variable as the runtime read it
        self.visible: list[int] | None = None
        self.current = 0

    def _start(self) -> list[int]:
        if self.visible is None:
            if self.kind == "npu":
                register_npu_kernels()
            self.started_with = os.environ.get(VISIBLE[self.kind])
            if self.kind == "npu" and self.started_with is not None:  # as torch_npu reads it
                listed = pinning.torch_npu_reads(self.started_with)
                if any(later <= earlier for earlier, later in zip(listed, listed[1:])):
                    listed = []  # not ascending: no NPU at all
            else:
                listed = self.started_with.split(",") if self.started_with else range(self.physical)
            self.visible = [int(entry) for entry in listed]
            if any(not 0 <= d < self.physical for d in self.visible):
                raise RuntimeError(f"{VISIBLE[self.kind]}={self.started_with} names a device beyond {self.physical}")
        return self.visible

    def is_available(self) -> bool:
        return bool(self._start())

    def device_count(self) -> int:
        return len(self._start())

    def set_device(self, index) -> None:
        index = index.index if isinstance(index, torch.device) else int(index)
        if not 0 <= index < len(self._start()):
            raise RuntimeError(f"invalid device ordinal {index}")
        self.current = index

    def current_device(self) -> int:
        self._start()
        return self.current

    def get_device_name(self, device=None) -> str:
        return f"fake {self.kind} (physical {self.physical_id()})"

    def physical_id(self) -> int:
        """The device this process uses, numbered as the machine numbers it."""
        return self._start()[self.current]


def register_npu_kernels() -> None:
    """What torch_npu does for ATen's operators: kernels of its own on the NPU's dispatch key (PrivateUse1), here
    as the runtime starts, once the suite's plugins are loaded and before any kernel is imported; the suite must
    take them for torch's own (harness/internals/torch_state.py)."""
    library = torch.library.Library("aten", "IMPL")
    library.impl("_softmax", lambda x, dim, half_to_float: torch.softmax(x.cpu(), dim).to(x.device), "PrivateUse1")
    NPU_LIBRARIES.append(library)  # a registration lasts as long as its library object


def install_npu(count: int) -> FakeRuntime:
    runtime = FakeRuntime("npu", count)
    torch.utils.rename_privateuse1_backend("npu")  # what torch_npu does, so torch.device("npu", i) parses
    sys.modules["torch_npu"] = types.ModuleType("torch_npu")
    torch.npu = runtime
    RUNTIMES["npu"] = runtime
    return runtime


def install_cuda(count: int) -> FakeRuntime:
    runtime = FakeRuntime("cuda", count)
    for name in ("is_available", "device_count", "set_device", "current_device", "get_device_name"):
        setattr(torch.cuda, name, getattr(runtime, name))
    RUNTIMES["cuda"] = runtime
    return runtime


if os.environ.get("FAKE_NPUS"):
    install_npu(int(os.environ["FAKE_NPUS"]))
if os.environ.get("FAKE_CUDA"):
    install_cuda(int(os.environ["FAKE_CUDA"]))
