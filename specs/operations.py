"""The operations a kernel may provide, declared once (OpInfo-style: a comment on every field).

The registry's consistency checks (``specs/registry.py``), a kernel's runner (:meth:`KernelSpec.run`), the
judge, the replay command and the one accuracy test over (operation, dtype) (``tests/kernel/test_accuracy.py``)
all read :data:`OPERATIONS`.  Adding an operation is one entry here (docs/extending.md shows the diff); a
kernel declares it with the entry's ``Capabilities`` flag and provides it with the entry's callable.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from oracles.call import Operation

TESTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
"""The dtypes of the training and inference kernels the suite is for: an operation's accuracy tests run in each."""
ACCURACY_DTYPES = (*TESTED_DTYPES, torch.float64)
"""The input dtypes an operation's accuracy tests run in, unless its entry names fewer: fp64 too, judged wherever a
kernel declares it (torch does: a user's kernel declaring nothing is held to its contract) and skipped, saying so,
for one that does not."""


@dataclass(frozen=True, kw_only=True)
class Declared(Operation):
    """An operation (what it computes: :class:`oracles.call.Operation`), how a kernel declares and runs it, and
    how the suite tests it."""

    # The Capabilities flags that declare it, all of them (a kernel without one skips its tests); none: every
    # kernel has it.
    flags: tuple[str, ...]
    # The KernelSpec callable that runs it, and the call's values it takes, in order (oracles.call.Call.arguments:
    # x, y, mask, grad, scale, bias, dim); out_dtype=, when the entry has one, is passed as a keyword.
    runs: str
    arguments: tuple[str, ...] = ("x", "dim")
    what: str  # how a skip names it: "<kernel> declares no <what>"
    dtypes: tuple[torch.dtype, ...] = ACCURACY_DTYPES  # the input dtypes its accuracy test runs in
    # Its accuracy tests run before the others (pytest mark "first"): they open with the regression
    # catalog, so that a broken kernel fails within a minute.
    first: bool = False


SOFTMAX = Declared(name="softmax", flags=(), runs="softmax", what="softmax", first=True)
MASKED_SOFTMAX = Declared(name="masked_softmax", masked=True, flags=("masked",), runs="masked_softmax",
                          arguments=("x", "mask", "dim"), what="masked softmax")
LOG_SOFTMAX = Declared(name="log_softmax", log=True, flags=("log_softmax",), runs="log_softmax", what="log_softmax")
SOFTMAX_FP32_OUT = Declared(name="softmax_fp32_out", out_dtype=torch.float32, flags=("out_dtype",), runs="softmax",
                            what="out_dtype", dtypes=(torch.float16, torch.bfloat16))
# torch's _softmax_backward_data(grad_output, output, dim, input_dtype): the gradient of the logits from the
# forward's output y and the gradient of the loss with respect to it (oracles/backward.py).
# Its tests run early too (first): a backward kernel's bugs live in its backward, which a kernel stopped at its
# first failure (the mutation score's sub-runs) would otherwise reach after every forward test.
SOFTMAX_BACKWARD = Declared(name="softmax_backward", backward=True, flags=("backward",), runs="softmax_backward",
                            arguments=("grad", "y", "dim"), what="softmax backward", first=True)

# torch's _log_softmax_backward_data: grad - exp(y) sum(grad), y the forward's log_softmax (under every cross-entropy).
LOG_SOFTMAX_BACKWARD = Declared(name="log_softmax_backward", log=True, backward=True, flags=("log_softmax_backward",),
                                runs="log_softmax_backward", arguments=("grad", "y", "dim"),
                                what="log_softmax backward", first=True)

# Attention's softmax: softmax(scale * x), its logits formed as the kernel declares (Arithmetic.scaled_logits,
# oracles/logits.py); with an additive bias (a float mask of -10000 or -inf, ALiBi); with a causal mask (Megatron's
# scaled_upper_triang_masked_softmax(x, scale), square or top-left aligned).
SCALED_SOFTMAX = Declared(name="scaled_softmax", scaled=True, flags=("scaled",), runs="scaled_softmax",
                          arguments=("x", "scale", "dim"), what="scaled softmax")
BIASED_SOFTMAX = Declared(name="biased_softmax", scaled=True, biased=True, flags=("biased",), runs="biased_softmax",
                          arguments=("x", "bias", "scale", "dim"), what="biased softmax")
CAUSAL_SOFTMAX = Declared(name="causal_softmax", scaled=True, causal=True, flags=("causal",), runs="causal_softmax",
                          arguments=("x", "scale"), what="causal softmax")

OPERATIONS = {op.name: op for op in (SOFTMAX, MASKED_SOFTMAX, LOG_SOFTMAX, SOFTMAX_FP32_OUT, SOFTMAX_BACKWARD,
                                     LOG_SOFTMAX_BACKWARD, SCALED_SOFTMAX, BIASED_SOFTMAX, CAUSAL_SOFTMAX)}
"""Every operation by its name, in the order their accuracy tests run."""
