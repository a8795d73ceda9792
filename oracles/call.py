"""One call of a softmax: its input, dim, operation, mask (or gradient, scale and bias) and backend, as the runner, the
oracle, the precision models, the judge and the records all take it (OpInfo's ``SampleInput``: one object for the whole
call).

The operations themselves are declared once, in ``specs/operations.py``; an :class:`Operation` here is what
the mathematics needs of one: whether it is log_softmax, whether it takes a mask, whether it is a backward,
whether it scales its logits, adds a bias or masks causally, and its output dtype.
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
    # The softmax of scale * x (the call's scale: an fp32 number in (0, 1], as attention's 1/sqrt(d)), the product
    # formed as the kernel declares (oracles/logits.py).
    scaled: bool = False
    biased: bool = False  # ... + bias (the call's bias: x's dtype, broadcast to x's shape as torch broadcasts)
    # Entry j of row i (x's second-to-last index) masked where j > i: a causal mask aligned top-left, as torch's
    # scaled_dot_product_attention(is_causal=True) and Megatron's scaled_upper_triang_masked_softmax (square) mask.
    causal: bool = False

    def __post_init__(self) -> None:
        if self.log and self.masked:
            raise ValueError(f"operation {self.name!r}: a mask is defined for softmax only, not log_softmax")
        if self.backward and self.masked:
            raise ValueError(f"operation {self.name!r}: a backward is defined unmasked only")
        if (self.biased or self.causal) and not self.scaled:
            raise ValueError(f"operation {self.name!r}: a bias and a causal mask are defined on scaled softmax only")
        if self.scaled and (self.log or self.masked or self.backward or self.out_dtype is not None):
            raise ValueError(f"operation {self.name!r}: a scaled softmax is a forward softmax of the input's dtype")


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
    scale: float | None = None  # a scaled softmax's scale: an fp32 number in (0, 1]
    bias: torch.Tensor | None = None  # a biased softmax's additive bias: x's dtype, broadcast to x's shape

    def __post_init__(self) -> None:
        op = self.operation
        for name, wanted in (("mask", op.masked), ("grad", op.backward), ("scale", op.scaled), ("bias", op.biased)):
            if (getattr(self, name) is not None) != wanted:
                raise ValueError(f"{name}: {op.name} takes {'a' if wanted else 'no'} {name}")
        if op.scaled:
            check_scale(self.scale)
        if op.biased:
            check_bias(self.bias, self.x)
        if op.causal and (self.x.dim() < 2 or self.dim % self.x.dim() != self.x.dim() - 1):
            raise ValueError(f"x: {op.name} masks causally over x's last two dims and normalises over the last; got "
                             f"shape {tuple(self.x.shape)} and dim {self.dim}")

    @property
    def arguments(self) -> dict[str, torch.Tensor | int | float]:
        """The call's values by the names an operation's callable takes them in (``specs.operations``)."""
        named = {"x": self.x, "dim": self.dim, "mask": self.mask, "grad": self.grad, "scale": self.scale,
                 "bias": self.bias}
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
        """The input as the softmax sees it: masked entries -inf; for a scaled softmax, scale * x + bias in float64
        (exact without a bias: an fp32 scale times a float of 24 bits or fewer; rounded once with one), entries
        above the causal diagonal -inf.  Computed once: the judge reads it thrice."""
        if self.operation.scaled:
            z = self.x.double() * self.scale
            if self.bias is not None:
                z = z + self.bias.double()
            if self.operation.causal:
                rows, cols = z.shape[-2:]
                z = z.masked_fill(torch.ones(rows, cols, dtype=torch.bool, device=z.device).triu(1), -torch.inf)
            return z
        return self.x if self.mask is None else self.x.masked_fill(~self.mask, -torch.inf)


def check_scale(scale) -> None:
    """ValueError naming the scale unless the oracle's logits hold it exactly: an fp32 number in (0, 1] (a kernel
    receives an fp32 scale, so that its own rounding is no difference between kernels; above 1 the product could
    overflow the input dtype, which no construction is wrong to do)."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= 1 \
            or float(torch.tensor(scale, dtype=torch.float32)) != scale:
        raise ValueError(f"scale must be an fp32 number in (0, 1]; got {scale!r}")


def check_bias(bias, x: torch.Tensor) -> None:
    """ValueError naming the bias unless it is a tensor of x's dtype that broadcasts to x's shape."""
    if not isinstance(bias, torch.Tensor) or bias.dtype != x.dtype:
        raise ValueError(f"bias must be a tensor of x's dtype {x.dtype}; got {getattr(bias, 'dtype', type(bias))}")
    try:
        torch.broadcast_to(bias, x.shape)
    except RuntimeError:
        raise ValueError(f"bias must broadcast to x's shape {tuple(x.shape)}; got {tuple(bias.shape)}") from None
