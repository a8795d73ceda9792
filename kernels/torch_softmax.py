"""torch.softmax as a kernel under test: the suite's false-alarm check.

It takes what torch takes (any float dtype, rank, dim and layout), so the
whole suite runs on it; a failure here is a bug in the suite, not in torch.
Masked softmax is torch's safe softmax (``torch._safe_softmax``, the op
behind scaled_dot_product_attention's masking) applied after masked_fill.
The wrappers only turn torch's refusals (RuntimeError for integer dtypes,
IndexError for a bad dim) into the TypeError / ValueError the suite asks of
every kernel; the numbers are torch's.  The scaled softmaxes are the eager expressions people write
(``softmax(x * scale + bias)``), each op rounding to the input dtype.
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


def scaled_expression(x: torch.Tensor, scale: float, dim: int) -> torch.Tensor:
    """softmax(x * scale), eager (Inductor compiles the same expression: kernels/peers.py)."""
    return torch.softmax(x * scale, dim)


def biased_expression(x: torch.Tensor, bias: torch.Tensor, scale: float, dim: int) -> torch.Tensor:
    """softmax(x * scale + bias), eager: the bias broadcast to x's shape (an attention mask of -10000 or -inf, ALiBi)."""
    return torch.softmax(x * scale + bias, dim)


def causal_expression(x: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(x * scale) over the last dim with entry j of row i (the second-to-last index) masked where j > i, as
    torch's scaled_dot_product_attention(is_causal=True) masks."""
    above = torch.ones(x.shape[-2:], dtype=torch.bool, device=x.device).triu(1)
    return torch.softmax((x * scale).masked_fill(above, -torch.inf), -1)


def scaled_softmax(x: torch.Tensor, scale: float, dim: int) -> torch.Tensor:
    LIMITS.check_scaled(x, dim, scale)
    return scaled_expression(x, scale, dim)


def biased_softmax(x: torch.Tensor, bias: torch.Tensor, scale: float, dim: int) -> torch.Tensor:
    LIMITS.check_scaled(x, dim, scale, bias)
    return biased_expression(x, bias, scale, dim)


def causal_softmax(x: torch.Tensor, scale: float) -> torch.Tensor:
    LIMITS.check_scaled(x, -1, scale)
    if x.dim() < 2:
        raise ValueError(f"x must have at least 2 dims (rows and columns of the causal mask); got {x.dim()}")
    return causal_expression(x, scale)


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
