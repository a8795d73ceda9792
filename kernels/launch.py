"""Launch settings that come from the device a tensor lives on.

Under the Triton interpreter (CPU tensors) a small fixed program count keeps the
persistent loops of the kernels exercised (each program handles several rows)
without slowing the interpreter down.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
from triton import backends

INTERPRETER_PROGRAMS = 4
NPU_FALLBACK_PROGRAMS = 32  # the Ascend tutorial's own fixed count
# Gluon's layouts across a thread-block cluster, which full_softmax's cluster path is written in, from Triton 3.9 on.
HAS_CLUSTER_LAYOUTS = tuple(int(part) for part in triton.__version__.split(".")[:2]) >= (3, 9)


@functools.cache  # fixed once triton has decorated the kernels; triton.knobs rereads the environment
def interpreted() -> bool:
    """Whether @triton.jit yields interpreted kernels (TRITON_INTERPRET=1)."""
    knobs = getattr(triton, "knobs", None)  # triton >= 3.4
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") == "1"  # triton-ascend 3.2's own test, in its @jit


def float64_math() -> bool:
    """Whether this Triton's math library takes float64: triton-ascend's ``tl.exp`` and ``tl.log`` refuse it."""
    return "ascend" not in backends.backends


def require_triton_device(x: torch.Tensor) -> None:
    """Raise ValueError when x lives where this process's Triton kernels cannot run."""
    if interpreted():
        if x.device.type != "cpu":
            raise ValueError(f"x is on {x.device}; the Triton interpreter (TRITON_INTERPRET=1) needs a CPU tensor")
    elif x.device.type not in ("cuda", "npu"):
        raise ValueError(
            f"x is on {x.device}; compiled Triton kernels need a cuda or npu tensor "
            "(for CPU tensors run with TRITON_INTERPRET=1, e.g. pytest --device cpu)"
        )


@functools.cache
def compute_units(device: torch.device) -> int:
    """Streaming multiprocessors (CUDA), vector cores (Ascend), or a small count (CPU)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    if device.type == "npu":
        return npu_vector_cores(device)
    return INTERPRETER_PROGRAMS


@functools.cache
def card_name(device: torch.device) -> str:
    """A CUDA card's name as torch reports it: its tuned launch plans are filed under it."""
    return torch.cuda.get_device_properties(device).name


@functools.cache
def cache_bytes(device: torch.device) -> int:
    """Last-level cache size: L2 on CUDA; elsewhere a modest guess (it only sizes chunked launches)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).L2_cache_size
    return 8 << 20


def npu_vector_cores(device: torch.device) -> int:
    """Vector-core count from triton-ascend's driver, or the tutorial's 32."""
    try:
        from triton.runtime import driver

        index = device.index if device.index is not None else torch.npu.current_device()
        return int(driver.active.utils.get_device_properties(index)["num_vectorcore"])
    except (ImportError, AttributeError, KeyError, RuntimeError):  # no triton-ascend driver, or no such key
        return NPU_FALLBACK_PROGRAMS
