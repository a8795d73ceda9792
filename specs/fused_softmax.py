"""The record of fused_softmax (``kernels/fused_softmax.py``), the source documents' kernel as they wrote it."""

from kernels import fused_softmax
from oracles.bounds import PrecisionProfile
from oracles.call import Call
from oracles.profiles import triton_block_profile

from .registry import ALL_INVARIANCES, Capabilities, KernelSpec, register

CAPABILITIES = Capabilities.extending(
    fused_softmax.LIMITS,
    promises=ALL_INVARIANCES,  # one program a row, one block: nothing depends on the other rows
)


def precision(call: Call) -> PrecisionProfile:
    """One tl.sum per row over the padded block, Triton's default 4 warps."""
    return triton_block_profile(call.backend, num_warps=4)


SPEC = register(KernelSpec(
    name="fused_softmax",
    softmax=fused_softmax.softmax,
    capabilities=CAPABILITIES,
    precision=precision,
    description="the source documents' fused-softmax kernel (persistent rows, one block per row)",
))
