"""One call of a softmax: its input, dim, operation, mask (or gradient) and backend, as the runner, the oracle, the precision
models, the judge and the records all take it (OpInfo's ``SampleInput``: one object for the whole call).

The operations themselves are declared once, in ``specs/operations.py``; an :class:`Operation` here is what
the mathematics needs of one: whether it is log_softmax, whether it takes a mask, whether it is a backward,
and its output dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch


@dataclass(frozen=True, kw_only=True)
class Operation:
    """What an operation computes."""

    name: str  # how records, baselines and replay commands name it
    log: bool = False  # log_softmax rather than softmax
    masked: bool = False  # the call takes a mask (bool, x's shape, True = keep); masked entries count as -inf
    out_dtype: torch.dtype | None = None  # the output's dtype; None: the input's
    # The gradient with respect to the logits, given the forward's output y (the call's x) and the gradient with
    # respect to it (the call's grad): grad_x = y (grad - sum(grad y)) for softmax, grad - exp(y) sum(grad) for
    # log_softmax.
    backward: bool = False

    def __post_init__(self) -> None:
        if self.log and self.masked:
            raise ValueError(f"operation {self.name!r}: a mask is defined for softmax only, not log_softmax")
        if self.backward and self.masked:
            raise ValueError(f"operation {self.name!r}: a backward is defined unmasked only")


@dataclass(frozen=True, eq=False)
class Call:
    """One call: ``operation`` of ``x`` along ``dim`` (with ``mask`` when the operation is masked, ``grad`` when it
    is a backward) on ``backend``."""

    x: torch.Tensor  # the logits; for a backward, the forward's output y
    dim: int
    operation: Operation
    backend: str  # "cpu" (the Triton interpreter), "cuda" or "npu": which arithmetic a kernel computes with
    mask: torch.Tensor | None = None
    grad: torch.Tensor | None = None  # a backward's gradient with respect to the forward's output (x's shape)

    def __post_init__(self) -> None:
        if (self.mask is not None) != self.operation.masked:
            raise ValueError(f"mask: {self.operation.name} takes {'a' if self.operation.masked else 'no'} mask")
        if (self.grad is not None) != self.operation.backward:
            raise ValueError(f"grad: {self.operation.name} takes {'a' if self.operation.backward else 'no'} grad")

    @property
    def arguments(self) -> dict[str, torch.Tensor | int]:
        """The call's values by the names an operation's callable takes them in (``specs.operations``)."""
        named = {"x": self.x, "dim": self.dim, "mask": self.mask, "grad": self.grad}
        return named | ({"y": self.x} if self.operation.backward else {})

    @property
    def log(self) -> bool:
        return self.operation.log

    @property
    def row_length(self) -> int:
        """How many entries the softmax normalises over (a 0-d input's one)."""
        return self.x.shape[self.dim] if self.x.dim() else 1

    @property
    def out_dtype(self) -> torch.dtype | None:
        """The output dtype the call asks for; None: the input's."""
        return self.operation.out_dtype

    @property
    def result_dtype(self) -> torch.dtype:
        """The dtype the output must have."""
        return self.operation.out_dtype or self.x.dtype

    @cached_property
    def logits(self) -> torch.Tensor:
        """The input as the softmax sees it: masked entries -inf (computed once: the judge reads it thrice)."""
        return self.x if self.mask is None else self.x.masked_fill(~self.mask, -torch.inf)
