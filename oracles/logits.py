r"""How a kernel forms a scaled softmax's logits z = s x + b, and the logits its bound is judged by.

The oracle is the softmax of the exact z (:attr:`oracles.call.Call.logits`).  A kernel forms its own z~, and the
softmax of z~ differs from that of z by more than an ulp wherever |z| is large against the gaps: rounding s x to
fp16 moves a logit near 1000 by up to 0.25, every output by up to 28%.  So the construction is declared
(:attr:`oracles.bounds.Arithmetic.scaled_logits`), and the bound carries what it costs, per entry:

* ``"input"``: each step rounded to the input format I, as torch's eager ``softmax(x * scale + bias)``:
  z~ = rnd_I(rnd_C(s x)), then rnd_I(rnd_C(z~ + b)).  torch forms a half product in fp32 and rounds it to the half
  format, a double rounding that a kernel rounding once does not make: both are candidates.
* ``"compute"``: in the compute format C, z~ = rnd_C(s x), then rnd_C(z~ + b).  Where the arithmetic fuses a
  product with the next sum (:attr:`~oracles.bounds.Arithmetic.fused_multiply_add`: Triton contracts them on GPUs),
  the product may enter the bias's sum or the max subtraction unrounded: |rnd(p + b) - rnd(rnd(p) + b)| <=
  ulp(z~) + ulp(p) / 2 and |rnd(p - m) - rnd(rnd(p) - m)| <= ulp(p) / 2 + ulp(p - m), a slack of
  1.5 ulp_C(z~) + ulp_C(z~ - m) covers either.
* ``"folded"``: the scale folded into exp2's argument after the max subtraction, as the Triton tutorials and
  flash attention do: exp2(rnd(rnd(x - m_x) rnd(s log2 e))), without a bias (a bias is added before the max).
  There are no formed logits; against the exact gap s (x - m_x) the argument errs by s |t_i| + (2u + u^2) s |d~_i|
  (t_i = rnd(x_i - m_x) - (x_i - m_x), d~_i = rnd(x_i - m_x); the constant's and the product's roundings), the slack.

Each candidate is the kernel's logits (float64 rows of C values, -inf where z is) and a slack (an absolute error
of its gaps beyond their rounding, float64 rows).  :func:`oracles.bounds.softmax_bound` derives the gap's error
of each candidate, rnd_C(z~_i - max z~) - (z_i - max z~) (the shift cancels in the ratio), and takes the largest.
A kernel of unknown construction may form its logits in any of these ways.
"""

from __future__ import annotations

import numpy as np

from .formats import Format, round_float64, ulp

CONSTRUCTIONS = ("input", "compute", "folded")


def candidates(x: np.ndarray, bias: np.ndarray | None, scale: float, exact: np.ndarray, fmt: Format,
               construction: str | None, compute: Format, fused: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """The logits a kernel forming them by ``construction`` (None: unknown, any) may take, each with its slack.

    Rows, last axis the softmax's: ``x`` and ``bias`` (broadcast to x's shape) as float64, ``exact`` the exact
    logits (-inf where masked), ``fmt`` the input format, ``compute`` C, ``fused``: products may fuse with sums.
    """
    if construction not in (None, *CONSTRUCTIONS):
        raise ValueError(f"scaled_logits must be one of {', '.join(CONSTRUCTIONS)}; got {construction!r}")
    product = x * scale  # exact: an fp32 scale times a float of 24 bits or fewer
    found = []
    with np.errstate(invalid="ignore", over="ignore"):
        if construction in (None, "input"):
            for once in (True, False) if fmt != compute else (True,):
                def step(v, once=once):
                    return round_float64(v if once else round_float64(v, compute), fmt)
                formed = step(product)
                if bias is not None:
                    formed = step(formed + bias)  # the sum of two floats of I is exact in float64 or beyond reach
                found.append((_masked(formed, exact), np.zeros_like(exact)))
        if construction in (None, "compute"):
            formed = round_float64(product, compute)
            if bias is not None:
                formed = round_float64(formed + bias, compute)
            slack = np.zeros_like(exact)
            if fused or construction is None:
                peak = np.max(np.where(np.isfinite(formed), formed, -np.inf), axis=-1, keepdims=True, initial=-np.inf)
                slack = np.where(np.isfinite(formed), 1.5 * ulp(formed, compute) + ulp(formed - peak, compute), 0.0)
            found.append((_masked(formed, exact), slack))
        if construction in (None, "folded") and bias is None:
            regular = np.isfinite(exact)
            peak = np.max(np.where(regular, x, -np.inf), axis=-1, keepdims=True, initial=-np.inf)
            gap = np.where(regular, x - peak, 0.0)
            rounded = round_float64(gap, compute)
            u = compute.unit_roundoff
            # and 2^-52 |gap|: the float64 gap may itself be rounded (x of fp32, 29 binades apart and more)
            slack = scale * (np.abs(rounded - gap) + (2 * u + u * u) * np.abs(rounded) + 2.0**-52 * np.abs(gap))
            found.append((exact, np.where(np.isfinite(exact), slack, 0.0)))
    return found


def _masked(formed: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """``formed`` with the entries the exact logits mask (-inf: causally, by the bias or in x) masked too."""
    return np.where(np.isneginf(exact), -np.inf, formed)
