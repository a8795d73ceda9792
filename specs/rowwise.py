"""The record of rowwise (``kernels/rowwise.py``), the mutation catalog's parent."""

from dataclasses import replace

from kernels import rowwise
from oracles.bounds import PrecisionProfile
from oracles.call import Call
from oracles.profiles import INTERPRETER, TO_NEAREST, triton_block_profile

from .registry import ALL_INVARIANCES, Capabilities, KernelSpec, register

# It rounds bf16 outputs to nearest in integer arithmetic, subnormals included; elsewhere it
# computes as plain Triton does.
ARITHMETIC = {"cpu": replace(INTERPRETER, name="Triton interpreter (numpy), bf16 rounded to nearest by the kernel",
                             downcast_ulps=TO_NEAREST, subnormal_downcast_unreliable=frozenset())}

CAPABILITIES = Capabilities.extending(rowwise.LIMITS, backward=True, log_softmax_backward=True, scaled=True,
                                     biased=True, causal=True, promises=ALL_INVARIANCES)


def precision(call: Call) -> PrecisionProfile:
    """One tl.sum per row over the padded block (of the exponentials, or of a backward's products or gradient),
    Triton's default 4 warps; bf16 outputs rounded to nearest; a scaled softmax's logits formed in fp32 (the
    arithmetics' default construction), its kernel compiled without fused multiply-adds."""
    profile = triton_block_profile(call.backend, num_warps=4, arithmetic=ARITHMETIC.get(call.backend))
    if call.operation.scaled:
        return replace(profile, arithmetic=replace(profile.arithmetic, fused_multiply_add=False))
    return profile


SPEC = register(KernelSpec(
    name="rowwise",
    softmax=rowwise.softmax,
    softmax_backward=rowwise.softmax_backward,
    log_softmax_backward=rowwise.log_softmax_backward,
    scaled_softmax=rowwise.scaled_softmax,
    biased_softmax=rowwise.biased_softmax,
    causal_softmax=rowwise.causal_softmax,
    capabilities=CAPABILITIES,
    precision=precision,
    arithmetics={backend: (arithmetic,) for backend, arithmetic in ARITHMETIC.items()},
    description="row-wise softmax, its backward and its scaled, biased and causal forms over strided 2-D input with "
                "64-bit offsets; the mutation catalog's parent",
))
