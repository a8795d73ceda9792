"""What a kernel's host code accepts, and the clear error it raises for anything else.

A kernel that cannot handle an input must say so with a ``TypeError`` or
``ValueError`` naming the argument and the limit, never compute garbage.  Each
kernel here states its limits as an :class:`InputLimits` and checks every call
against them; the suite's description of a kernel (``specs.registry.Capabilities``)
extends these limits with what the kernel computes and promises, so the errors
the suite expects are the very ones the kernel raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

HALF_AND_SINGLE = frozenset({torch.float32, torch.float16, torch.bfloat16})
FLOATING = HALF_AND_SINGLE | {torch.float64}


@dataclass(frozen=True)
class InputLimits:
    """The inputs a kernel handles; everything else must raise (:meth:`refusal` says what)."""

    dtypes: frozenset[torch.dtype] = FLOATING  # the dtypes of x it takes
    ranks: frozenset[int] | None = None  # the ranks of x it takes; None: any rank >= 1
    last_dim_only: bool = False  # True: dim must be the last dimension
    unit_row_stride: bool = False  # True: the softmax dim must have stride 1
    # Device type ("cpu", "cuda", "npu") -> the longest row it handles there; a missing device type means no limit.
    max_row_length: Mapping[str, int] = field(default_factory=dict)
    max_offset: int | None = None  # the largest element offset its index arithmetic addresses (2**31 - 1: 32-bit)
    empty_rows: bool = True  # whether it handles rows of length zero (torch returns an empty result)
    # True: it writes its result into x (and returns it), so it cannot take a view that repeats
    # elements (stride 0); the suite hands it a copy of each input.
    in_place: bool = False

    def row_limit(self, device_type: str) -> int | None:
        return self.max_row_length.get(device_type)

    def said(self, device_type: str) -> str:
        """The limits narrower than torch.softmax's own, in a line ("rows of at most 8 on cpu, fp32 and fp16, rank
        2, the last dim only"); "" where there are none: what a reader of a passing run needs to know it covered."""
        names = {torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
        limit = self.row_limit(device_type)
        return ", ".join(part for part in (
            f"rows of at most {limit} on {device_type}" if limit is not None else "",
            "/".join(names.get(d, str(d)) for d in sorted(self.dtypes, key=lambda d: list(names).index(d)
                                                                 if d in names else len(names)))
            if self.dtypes != FLOATING else "",
            f"rank {' or '.join(map(str, sorted(self.ranks)))}" if self.ranks is not None else "",
            "the last dim only" if self.last_dim_only else "",
            "rows of unit stride" if self.unit_row_stride else "",
            f"offsets up to {self.max_offset}" if self.max_offset is not None else "",
            "no empty rows" if not self.empty_rows else "",
            "in place" if self.in_place else "") if part)

    def refusal(self, x: torch.Tensor, dim: int) -> TypeError | ValueError | None:
        """The error that (x, dim) outside these limits must raise, or None."""
        if not isinstance(x, torch.Tensor):
            return TypeError(f"x must be a torch.Tensor; got {type(x).__name__}")
        if not dense(x):
            kind = "a nested tensor" if x.is_nested else f"a tensor of layout {x.layout}"
            return TypeError(f"x must be a dense tensor (layout torch.strided); got {kind}")
        if x.dtype not in self.dtypes:
            allowed = ", ".join(sorted(str(d) for d in self.dtypes))
            return TypeError(f"x.dtype must be one of {allowed}; got {x.dtype}")
        if self.ranks is not None and x.dim() not in self.ranks:
            allowed = " or ".join(str(r) for r in sorted(self.ranks))
            return ValueError(f"x must have rank {allowed}; got rank {x.dim()} (shape {tuple(x.shape)})")
        if not -x.dim() <= dim < max(x.dim(), 1):
            return ValueError(f"dim must lie in [{-x.dim()}, {x.dim() - 1}] for shape {tuple(x.shape)}; got {dim}")
        dim %= max(x.dim(), 1)
        if self.last_dim_only and dim != x.dim() - 1:
            return ValueError(f"dim must be the last dimension (-1 or {x.dim() - 1}); got {dim}")
        if self.unit_row_stride and x.size(dim) > 1 and x.stride(dim) != 1:
            return ValueError(
                f"x.stride({dim}) must be 1 (each row contiguous); got {x.stride(dim)}: pass x.contiguous()"
            )
        if not self.empty_rows and x.dim() and x.size(dim) == 0:
            return ValueError(f"x.size({dim}) = 0: this kernel handles no rows of length zero")
        limit = self.row_limit(x.device.type)
        if limit is not None and x.size(dim) > limit:
            return ValueError(
                f"x.size({dim}) = {x.size(dim)} exceeds the row limit of {limit} on {x.device.type} (one block per row)"
            )
        if self.in_place and any(stride == 0 and n > 1 for n, stride in zip(x.shape, x.stride())):
            return ValueError(f"x has stride 0 along a dimension (an expanded view, strides {tuple(x.stride())}): "
                              "a kernel working in place cannot write its result there")
        if self.max_offset is not None and x.numel() and max_offset(x) > self.max_offset:
            return ValueError(
                f"x reaches element offset {max_offset(x)}; this kernel's offsets stop at {self.max_offset}"
            )
        return None

    def check(self, x: torch.Tensor, dim: int) -> None:
        """Raise the clear error for (x, dim) outside these limits."""
        error = self.refusal(x, dim)
        if error is not None:
            raise error

    def check_backward(self, grad: torch.Tensor, y: torch.Tensor, dim: int) -> None:
        """Raise the clear error for a softmax backward's (grad, y, dim): y and grad each within these limits, grad
        of y's shape, dtype and device."""
        self.check(y, dim)
        self.check(grad, dim)
        if grad.shape != y.shape or grad.dtype != y.dtype or grad.device != y.device:
            raise ValueError(f"grad must have y's shape {tuple(y.shape)}, dtype {y.dtype} and device {y.device}; got "
                             f"{tuple(grad.shape)} {grad.dtype} on {grad.device}")

    def check_scaled(self, x: torch.Tensor, dim: int, scale: float, bias: torch.Tensor | None = None) -> None:
        """Raise the clear error for a scaled softmax's (x, dim, scale, bias): x within these limits, a finite scale
        above 0 that fp32 holds (it is passed to the kernel as fp32), a bias of x's dtype and device that
        broadcasts to x's shape."""
        self.check(x, dim)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < float("inf"):
            raise ValueError(f"scale must be a finite number above 0; got {scale!r}")
        if not 2.0**-126 <= scale <= torch.finfo(torch.float32).max:
            raise ValueError(f"scale must lie among fp32's normal numbers (it is passed as fp32); got {scale!r}")
        if bias is None:
            return
        if not isinstance(bias, torch.Tensor) or bias.dtype != x.dtype or bias.device != x.device:
            raise TypeError(f"bias must be a torch.Tensor of x's dtype {x.dtype} on {x.device}; got "
                            f"{getattr(bias, 'dtype', type(bias).__name__)}")
        if any(b not in (1, n) for b, n in zip(reversed(bias.shape), reversed(x.shape))) or bias.dim() > x.dim():
            raise ValueError(f"bias of shape {tuple(bias.shape)} does not broadcast to x's shape {tuple(x.shape)}")


def dense(x: torch.Tensor) -> bool:
    """Whether x has strides to read it by (not sparse, not nested)."""
    return not x.is_nested and x.layout == torch.strided


def max_offset(x: torch.Tensor) -> int:
    """Offset of x's last element from its data pointer, in elements."""
    return x.storage_offset() + sum((n - 1) * s for n, s in zip(x.shape, x.stride()))
