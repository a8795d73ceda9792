"""A hostile kernel that leaves mpmath's global precision at 8 bits, and is right otherwise.

``softmax`` is torch's softmax computed in float64 and rounded to fp32, and sets ``mpmath.mp.prec = 8`` when its
module is imported and again in each call (a library using mpmath for its own ends may leave its global context
so).  Named by its path it runs in a process of its own (harness/guard/host.py); a module imported in the suite's
process (a registered kernel's, a peer's library: tests/suite/test_oracle_state.py loads this one with ``-p``)
leaves the setting where the oracles compute.  They compute in mpmath contexts of their own (oracles/settings.py),
so the kernel must pass either way: at 8 bits the oracle's exact values were 3.2e4 fp32 ulps off and Student's
quantile, which the bias test takes, never returned.

It declares fp32 only and nothing else: it is judged as a kernel of unknown construction
(``--kernel tests.hostile.sets_mp_precision:softmax``).
"""

import mpmath
import torch

from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}))

mpmath.mp.prec = 8


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    mpmath.mp.prec = 8
    return torch.softmax(x.double(), dim).float()


softmax.capabilities = CAPABILITIES
