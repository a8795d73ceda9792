"""A hostile kernel that leaves numpy raising on every floating-point error, and is right otherwise.

``softmax`` is torch's softmax computed in float64 and rounded to fp32, and calls ``numpy.seterr(all="raise")``
when its module is imported and again in each call (a library checking its own arithmetic may leave numpy so).
Named by its path it runs in a process of its own (harness/guard/host.py); a module imported in the suite's process (a
registered kernel's, a peer's library: tests/suite/test_oracle_state.py loads this one with ``-p``) leaves the
setting where the oracles compute.  Their bounds let exponentials underflow, and divide by zero, on purpose, under
numpy error handling of their own (oracles/settings.py), so the kernel must pass either way, never fail on a
FloatingPointError of the suite's own arithmetic.

It declares fp32 only and nothing else: it is judged as a kernel of unknown construction
(``--kernel tests.hostile.numpy_raises:softmax``).
"""

import numpy
import torch

from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}))

numpy.seterr(all="raise")


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    numpy.seterr(all="raise")
    return torch.softmax(x.double(), dim).float()


softmax.capabilities = CAPABILITIES
