"""Softmax kernels under test and their registry.

Importing this package decorates the Triton kernels, so TRITON_INTERPRET must be
set before it is imported when kernels are to run on the CPU.
"""

from . import full_softmax, fused_softmax, peers, rowwise, torch_softmax  # noqa: F401  (registration)
from .registry import Capabilities, KernelSpec, register, registered, resolve

__all__ = ["Capabilities", "KernelSpec", "register", "registered", "resolve"]
