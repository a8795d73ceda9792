r"""How far from zero a correct kernel's mean signed error may lie: a bound on bias, in ulps of the output.

An element's error may be anywhere within its derived bound, but roundings to
nearest err both ways: over many distinct outputs their signed errors average
out.  A kernel that truncates its outputs, or rounds any step toward zero, errs
low on nearly every element (every output biased low, which training
accumulates) and can still keep each element within one ulp.

The model.  Write the signed error of output j in ulps of the output format O
at the exact value, e_j = (y_j - f_j) / ulp_O(f_j) = s_j + r_j:

* s_j, the error of the value before its roundings to O (exp, division, the
  sum): |s_j| <= A_j, the element's bound (:mod:`oracles.bounds`) with those
  roundings taken out.  It may be systematic: it counts in full;
* r_j, the roundings to O (the final conversion, and the exponential's where
  it is stored in O): to nearest, each has mean zero over distinct values; a
  conversion toward zero biases by up to one ulp.  Toward zero is allowed only
  where an arithmetic of that kind is known: the profile's own, or for a
  kernel of unknown construction any arithmetic known on the backend (Triton's
  interpreter truncates fp32 to bf16; Ascend is unmeasured; on CUDA every
  known arithmetic rounds to nearest).

Treating the roundings of distinct outputs as independent, with |e_j| <= B_j
(the element's bound), Hoeffding's inequality gives the statistical part:
P(|mean e - E mean e| >= t) <= 2 exp(-2 n^2 t^2 / sum_j (2 B_j)^2) = p, so

    |mean_j e_j| <= mean_j A_j + T + sqrt(ln(2/p) sum_j (2 B_j)^2 / 2) / n

with T the toward-zero steps (0, 1, or 2 when the exponential is stored in O
too) and p = :data:`FALSE_ALARM`.  Equal outputs share their rounding, so each
distinct exact value counts once.  For fp32 outputs, whose bounds are tens of
ulps of approximate exp and division, the allowance is wide; the test bites on
half outputs computed in fp32, where the roundings are the error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from .bounds import Arithmetic, PrecisionProfile, softmax_bound
from .formats import Format, ulp
from .profiles import BACKEND_ARITHMETICS

FALSE_ALARM = 1e-9
HALF_DTYPES = (torch.float16, torch.bfloat16)
NEAREST = 0.5 + 2.0**-10  # a conversion erring by more than this (in ulps) rounds toward zero somewhere


def rounds_toward_zero(arithmetic: Arithmetic, backend: str, dtype: torch.dtype) -> bool:
    """Whether a correct kernel of this arithmetic may convert its results to ``dtype`` toward zero."""
    known = [arithmetic] if arithmetic.known_construction else BACKEND_ARITHMETICS[backend]
    return any(a.downcast_ulps.get(dtype, 1.0) > NEAREST for a in known)


def before_output_rounding(arithmetic: Arithmetic) -> Arithmetic:
    """The same arithmetic with its roundings to a half output format taken out (exact conversions)."""
    return replace(arithmetic, downcast_ulps={d: 0.0 for d in HALF_DTYPES}, exp_rounded_to_output=False,
                   subnormal_downcast_unreliable=frozenset())


@dataclass(frozen=True)
class Allowance:
    """The largest |mean signed error| of a correct kernel, in ulps, and what it is made of."""

    systematic: float  # mean of A_j
    toward_zero: float  # T
    statistical: float
    outputs: int  # distinct outputs averaged

    @property
    def total(self) -> float:
        return self.systematic + self.toward_zero + self.statistical

    def __str__(self) -> str:
        return (f"{self.total:.4g} ulp = {self.systematic:.4g} systematic + {self.toward_zero:g} toward zero + "
                f"{self.statistical:.4g} statistical (p = {FALSE_ALARM:g}, {self.outputs} distinct outputs)")


@dataclass(frozen=True)
class Bias:
    mean: float  # mean signed error, ulps of the output
    allowance: Allowance

    @property
    def ok(self) -> bool:
        return abs(self.mean) <= self.allowance.total


def measure_bias(x: np.ndarray, y: np.ndarray, exact: np.ndarray, out: Format, profile: PrecisionProfile,
                 backend: str) -> Bias:
    """Mean signed error of ``y`` (rows, float64 values of the output) against ``exact``, and its allowance.

    Only outputs that are normal in ``out`` and finite count; rows come as from
    :func:`oracles.bounds.softmax_bound` (float64, last axis = softmax axis).
    """
    with np.errstate(invalid="ignore"):
        bound = softmax_bound(x, exact, out, profile)
        systematic = softmax_bound(x, exact, out, PrecisionProfile(before_output_rounding(profile.arithmetic),
                                                                   profile.reduction))
        used = np.isfinite(y) & np.isfinite(bound) & (exact >= out.min_normal) & (np.abs(y) >= out.min_normal)
    _, first = np.unique(exact[used], return_index=True)
    signed = ((y[used] - exact[used]) / ulp(exact[used], out))[first]
    bound, systematic = bound[used][first], systematic[used][first]
    n = signed.size
    steps = rounds_toward_zero(profile.arithmetic, backend, out.dtype) * (1 + profile.arithmetic.exp_rounded_to_output)
    statistical = math.sqrt(math.log(2 / FALSE_ALARM) * float(np.sum((2 * bound) ** 2)) / 2) / n if n else math.inf
    allowance = Allowance(float(systematic.mean()) if n else 0.0, float(steps) if out != profile.arithmetic.compute
                          else 0.0, statistical, n)
    return Bias(float(signed.mean()) if n else 0.0, allowance)
