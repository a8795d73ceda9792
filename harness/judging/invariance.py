"""Measuring a bitwise invariance: a promise must hold, anything else is only recorded.

Kernels promise invariances in their capabilities (``specs.registry.INVARIANCES``).
A test measures one with :class:`Invariance` (the ``invariance`` fixture of
:mod:`harness.plugins.plugin` makes them): a promised invariance fails the test at its
first counterexample, which Hypothesis then shrinks; one not promised keeps its
first counterexample and is measured no further.  Either way the verdict rides
on the test's report (:mod:`harness.internals.payload`) to the table of
:mod:`report.invariances`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from oracles.formats import format_of, ulp

from ..internals import payload

INVARIANCE = "invariance"  # the payload kind


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu().contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def bitwise_difference(a: torch.Tensor, b: torch.Tensor, what: str) -> str | None:
    """None when a and b are equal bit for bit, else what differs.  NaNs are all one: their sign and
    payload mean nothing (x + c already changes an input NaN's bits)."""
    differ = (bits(a) != bits(b)) & ~(torch.isnan(a).cpu() & torch.isnan(b).cpu())
    if not differ.any():
        return None
    first = tuple(int(i) for i in differ.nonzero()[0])
    return (f"{what}: {int(differ.sum())} of {differ.numel()} elements differ, first at {first}: "
            f"{float(a.cpu()[first])!r} vs {float(b.cpu()[first])!r}")


@dataclass
class Invariance:
    """One bitwise invariance of one kernel over a test's examples; a context manager around them."""

    item: pytest.Item
    kernel: str
    name: str
    promised: bool
    broken: str | None = None  # the first counterexample

    @property
    def settled(self) -> bool:
        """Nothing more to measure: broken and not promised (a promise is checked on every example, so
        that Hypothesis replays and shrinks its failure)."""
        return self.broken is not None and not self.promised

    def check(self, a: torch.Tensor, b: torch.Tensor, what: str) -> None:
        difference = bitwise_difference(a, b, what)
        if difference is None:
            return
        self.broken = self.broken or difference
        if self.promised:
            raise AssertionError(f"{self.kernel} promises {self.name} invariance: {difference}")

    def __enter__(self) -> Invariance:
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        # Held, or broken (a broken promise's error goes on); after any other error nothing is known.
        if kind is None or self.broken is not None:
            payload.add(self.item, INVARIANCE, {"kernel": self.kernel, "property": self.name,
                                                "promised": self.promised, "held": self.broken is None,
                                                "counterexample": self.broken,
                                                "test": getattr(self.item, "nodeid", "")})
        return False


def exact_shift(x: torch.Tensor) -> float | None:
    """A shift c with x + c exact for every finite entry (so max-subtraction sees identical gaps)."""
    finite = x[torch.isfinite(x)].cpu().double()  # float64 on the CPU: many NPUs have none
    if finite.numel() == 0:
        return 1.0
    c = float(ulp(np.array([finite.abs().max().item()]), format_of(x.dtype))[0])
    for shift in (c, -c, 2 * c, 64 * c):
        # float64 rounds too (0.5 + 4.95e27 is 4.95e27 there): TwoSum's error term says whether the sum is exact.
        total = finite + shift
        back = total - finite
        rounding = (finite - (total - back)) + (shift - back)
        moved = total.to(x.dtype).double()
        if torch.equal(moved, total) and not rounding.any() and torch.isfinite(moved).all():
            return shift
    return None
