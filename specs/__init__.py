"""One record a kernel: what it computes, handles, promises and how precisely, above both kernels and oracles.

Importing this package registers this project's kernels (and decorates their
Triton code, so TRITON_INTERPRET must be set first when they run on the CPU).
"""

from . import full_softmax, fused_softmax, peers, rowwise, torch_softmax  # noqa: F401  (registration)
from .registry import Capabilities, KernelSpec, register, registered, resolve

__all__ = ["Capabilities", "KernelSpec", "register", "registered", "resolve"]
