"""torch.softmax as a kernel under test: the suite's false-alarm check.

It takes what torch takes (any float dtype, rank, dim and layout), so the
whole suite runs on it; a failure here is a bug in the suite, not in torch.
Masked softmax is torch's safe softmax (``torch._safe_softmax``, the op
behind scaled_dot_product_attention's masking) applied after masked_fill.
The wrappers only turn torch's refusals (RuntimeError for integer dtypes,
IndexError for a bad dim) into the TypeError / ValueError the suite asks of
every kernel; the numbers are torch's.
"""

import torch

from .limits import InputLimits

LIMITS = InputLimits()  # any float dtype, rank, dim and layout


def softmax(x: torch.Tensor, dim: int, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    LIMITS.check(x, dim)
    return torch.softmax(x, dim, dtype=out_dtype)


def log_softmax(x: torch.Tensor, dim: int, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    LIMITS.check(x, dim)
    return torch.log_softmax(x, dim, dtype=out_dtype)


def masked_softmax(x: torch.Tensor, mask: torch.Tensor, dim: int, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """torch's own safe softmax (rows left all -inf give 0) on x with masked entries at -inf."""
    LIMITS.check(x, dim)
    if mask.dtype != torch.bool or mask.shape != x.shape:
        raise ValueError(f"mask must be a bool tensor of x's shape {tuple(x.shape)}; got {mask.dtype} {tuple(mask.shape)}")
    return torch._safe_softmax(x.masked_fill(~mask, -torch.inf), dim, dtype=out_dtype)



def softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    """torch's softmax backward (``torch._softmax_backward_data``, what autograd runs): the logits' gradient from
    the forward's output ``y`` and the gradient ``grad`` with respect to it."""
    LIMITS.check_backward(grad, y, dim)
    return torch._softmax_backward_data(grad, y, dim, y.dtype)


def log_softmax_backward(grad: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    """torch's log_softmax backward (``torch._log_softmax_backward_data``): the logits' gradient from the forward's
    output ``y`` and the gradient ``grad`` with respect to it."""
    LIMITS.check_backward(grad, y, dim)
    return torch._log_softmax_backward_data(grad, y, dim, y.dtype)
