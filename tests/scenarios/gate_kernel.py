"""Scenario for tests/suite/test_gate.py, test_report.py, test_sharding.py: a kernel made less precise on demand.

``softmax`` is torch's fp32 softmax.  With ``SOFTMAX_SUITE_PLANT_LOSS=1`` it
divides by an approximate reciprocal of the sum, two ulps too large: still
inside the loose bound a kernel without a measured profile gets, but worse
than the baseline made without it.  The gate must catch the difference.
With ``SOFTMAX_SUITE_PLANT_LOSS=raise`` it raises on every input: its tests
fail and record nothing, and the gate must not call that "no regression".
"""

import os

import torch

from specs.registry import Capabilities

GATE_KERNEL = "tests.scenarios.gate_kernel:softmax"  # as --kernel names it
# The tests a gate of it runs, on the CPU whatever the run's device (the gate's machinery is the same everywhere).
GATE_TESTS = ("tests/kernel/test_accuracy.py", "-k", "test_output_within_derived_bound and -softmax-", "--device", "cpu")


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    softmax.capabilities.check(x, dim)
    if os.environ.get("SOFTMAX_SUITE_PLANT_LOSS") == "raise":
        raise RuntimeError("planted: the kernel fails on every input")
    if os.environ.get("SOFTMAX_SUITE_PLANT_LOSS") != "1":
        return torch.softmax(x, dim)
    e = torch.exp(x - x.amax(dim, keepdim=True))
    reciprocal = 1 / e.sum(dim, keepdim=True)
    for _ in range(2):
        reciprocal = torch.nextafter(reciprocal, torch.full_like(reciprocal, torch.inf))
    return e * reciprocal


softmax.capabilities = Capabilities(dtypes=frozenset({torch.float32}), ranks=frozenset({2}), last_dim_only=True)
