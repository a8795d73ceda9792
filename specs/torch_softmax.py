"""The record of torch.softmax as a kernel under test (``kernels/torch_softmax.py``): the suite's false-alarm check."""

from kernels import torch_softmax
from oracles.bounds import PrecisionProfile
from oracles.call import Call
from oracles.profiles import ORDER_FREE, TORCH_CPU, TORCH_CPU_OTHER_DIMS, TORCH_CUDA

from .registry import ALL_INVARIANCES, Capabilities, KernelSpec, register, unknown_arithmetic

TORCH_CONTRACT = Capabilities.extending(
    torch_softmax.LIMITS,
    log_softmax=True, masked=True, out_dtype=True, backward=True, log_softmax_backward=True, scaled=True, biased=True,
    causal=True,
    # Measured, not documented: on the CPU every invariance held in every run; on CUDA an fp16 row
    # of 13635 alone and inside a batch took different vectorised paths (misaligned rows) and 6
    # elements differed, and nothing was measured on NPUs.
    promises=frozenset(), promises_by_device={"cpu": ALL_INVARIANCES, "cuda": frozenset({"shift", "determinism"})},
)
"""The capabilities of torch.softmax itself: any float dtype, rank, dim and layout."""

ARITHMETIC = {"cpu": TORCH_CPU, "cuda": TORCH_CUDA}  # elsewhere unmeasured: the loosest known


def torch_profile(call: Call) -> PrecisionProfile:
    """torch.softmax on ``backend``, which takes another path for a dim that is not the last."""
    arithmetic = ARITHMETIC.get(call.backend) or unknown_arithmetic()
    if arithmetic is TORCH_CPU and call.dim % max(call.x.dim(), 1) != call.x.dim() - 1:
        arithmetic = TORCH_CPU_OTHER_DIMS
    return PrecisionProfile(arithmetic, ORDER_FREE)


SPEC = register(KernelSpec(
    name="torch", softmax=torch_softmax.softmax, capabilities=TORCH_CONTRACT,
    log_softmax=torch_softmax.log_softmax, masked_softmax=torch_softmax.masked_softmax,
    softmax_backward=torch_softmax.softmax_backward, log_softmax_backward=torch_softmax.log_softmax_backward,
    scaled_softmax=torch_softmax.scaled_softmax, biased_softmax=torch_softmax.biased_softmax,
    causal_softmax=torch_softmax.causal_softmax, precision=torch_profile,
    description="torch.softmax on the same device (the reference implementation)",
))
