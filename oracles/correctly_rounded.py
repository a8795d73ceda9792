r"""Correctly rounded softmax and log_softmax, fast: a certified float64 pass, then mpmath.

Tier 1, vectorised float64 with a rigorous error bound per element (u = 2^-53):

* d^_i = fl(x_i - m) with its exact rounding error t_i (Knuth's TwoSum), so
  e^{d_i} = e^{d^_i} e^{t_i}; the pass uses e^_i = fl(exp(d^_i) fl(1 + t_i)).
  The ratio (1 + t)/e^t is 1 - t^2/2 + ..., so the gap's rounding costs t^2,
  not |d| u: huge logit gaps stay cheap.
* exp errs by at most EXP64_ULPS ulps (2u each), fl(1 + t) and the product by u
  each: e^_i = e_i (1 + eps_i), |eps_i| <= eps_e.
* S^ = math.fsum(e^): correctly rounded, so S^ = S (1 + s), |s| <= eps_e + u + eps_e u.
* y^_j = fl(e^_j / S^): relative error at most (1+eps_e)(1+u)/((1-eps_e)(1-u)) - 1.
* log_softmax: log S = log1p(R) with R the sum of e^{d_i} over all entries but
  one maximal entry, whose e^ is exactly 1: R^ = fsum(e^ and -1), rounded once,
  so R^ = R (1 + s) as above.  log(S^) would keep R only to u relative to 1,
  not to R: tiny results (-log S when the others are far below) came out
  0.06 fp32 ulp off.  With R/(1+R) <= log1p(R), the relative error s moves
  log1p by at most -log1p(-s min(1, log1p(R))); R <= (1 + 2s) R^ and log1p is
  concave, so log1p(R) <= (1 + 2s) log1p(R^) <= (1 + 4s) L^, L^ = fl(log1p(R^)),
  which errs by at most LOG64_ULPS ulps.  Exponentials in float64's subnormal
  range (d < -708) err by steps of 2^-1074 instead, EXP64_ULPS + 1 of them each,
  and fsum and log1p add 1 + LOG64_ULPS such steps: an absolute term.
  y^_j = fl(fl(d^_j - L^) + t_j), absolute error -log1p(-s min(1, L^ (1 + 4s)))
  + LOG64_ULPS 2u L^ + u |d^_j - L^| + u |y^_j| + t_j^2 + the subnormal term:
  about 2^-49 |y_j|, however small y_j is.

Each result is enclosed in [y^ - err, y^ + err], widened outward by one float64
step.  Where both ends round to the same value of the target format, zeros of
one sign included, that value is the correctly rounded result.  Zeros: softmax
is positive (the lower end is clipped at +0); log_softmax of a row with two
finite entries or more is negative (the upper end is clipped at -0), and a tiny
one rounds to -0; a row's only finite entry gives 0 - log 1 = +0 exactly, with
a zero error bound.  The rest (about 1 in 10^5 fp32 elements) go to tier 2,
:mod:`oracles.mp_softmax`, which encloses their rows' sums at increasing
precision and decides those elements alone (a row of 2^20 entries with one
undecided costs 2^20 exponentials a precision, not 2^20 roundings as well).

Results whose exponential underflows float64 (d < -708) are below 1e-307, far
under half the smallest subnormal of fp32, bf16 and fp16: they round to +0.
For float64 targets tier 1 decides next to nothing (its enclosures are a few
float64 steps wide): their results, and their exact values, come from tier 2.
A float64 holds those exact values to half an fp64 ulp, all it can; for the
other targets they are right to 2^-20 ulp or better.

The float64 library's own accuracy is an assumption (EXP64_ULPS, LOG64_ULPS);
``tests/suite/test_correctly_rounded.py`` measures it on every run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import mp_softmax
from .call import Call
from .formats import FP64, Format, format_of, round_float64, two_sum_error
from . import semantics
from .settings import numpy_defaults

U = 2.0**-53
EXP64_ULPS = 2.0
LOG64_ULPS = 2.0
UNDERFLOW_GAP = -708.0  # exp below this is subnormal in float64


@dataclass(frozen=True)
class OracleResult:
    """Correctly rounded results and exact values, shaped like the rows given."""

    rounded: np.ndarray  # float64 values of the target format
    exact: np.ndarray  # the exact results to about 2^-49 relative (tier 1) or rounded to float64 (tier 2)
    escalated: int  # elements tier 1 could not decide (decided by mpmath)

    @property
    def escalation_rate(self) -> float:
        return self.escalated / max(self.rounded.size, 1)


def _widen(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)


def _fsum_less_one(row: np.ndarray) -> float:
    """fsum(row) - 1, rounded once: the sum over all entries but one maximal entry, whose e is exactly 1."""
    terms = row.tolist()
    terms.append(-1.0)
    return math.fsum(terms)


@numpy_defaults
def float64_pass(x: np.ndarray, fmt: Format, *, log: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tier 1 on rows with a finite maximum and no NaN or +inf.

    Returns (rounded, exact, decided): where ``decided`` is False the first two
    are not to be trusted.
    """
    finite = np.isfinite(x)
    peak = np.max(np.where(finite, x, -np.inf), axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        gap = x - peak
        t = np.where(finite, two_sum_error(x, -peak, gap), 0.0)
        e = np.where(finite, np.exp(gap) * (1 + t), 0.0)
        eps_e = (1 + EXP64_ULPS * 2 * U) * (1 + U) ** 2 * (1 + np.max(t * t, axis=-1, keepdims=True)) - 1
        s = eps_e + U + eps_e * U
        if log:
            rest = np.array([_fsum_less_one(row) for row in e]).reshape(peak.shape)
            log_total = np.log1p(rest)
            others = np.sum(finite, axis=-1, keepdims=True) - 1
            value = (gap - log_total) + t
            subnormal = np.where(others > 0, (EXP64_ULPS + 1) * others + LOG64_ULPS + 1, 0) * 2.0**-1074
            error = (-np.log1p(-s * np.minimum(1.0, log_total * (1 + 4 * s))) + LOG64_ULPS * 2 * U * log_total
                     + subnormal + U * np.abs(gap - log_total) + U * np.abs(value) + t * t) * (1 + 2.0**-20)
            lo, hi = _widen(value - error, value + error)
            # With another finite entry log1p(R) > 0, so the result is negative: the upper end is clipped at
            # -0.  The maximal entry of a row whose others lie below the underflow has R^ = 0 and an
            # enclosure of +-(subnormal term): clipped, it rounds to -0 here instead of costing tier 2 a row.
            hi = np.where((others > 0) & (hi >= 0), -0.0, hi)
            if (others == 0).any():
                # The bound is zero at a row's only finite entry, 0 - log1p(0) = +0 exactly: widening
                # would turn it into [-tiny, +tiny], whose ends round to zeros of both signs.
                lo, hi = np.where(error == 0, value, lo), np.where(error == 0, value, hi)
        else:
            total = np.array([math.fsum(row.tolist()) for row in e]).reshape(peak.shape)
            value = e / total
            rel = ((1 + eps_e) * (1 + U) / ((1 - eps_e) * (1 - U)) - 1) * (1 + 2.0**-20)
            lo, hi = _widen(value * (1 - rel), value * (1 + rel))
            lo = np.maximum(lo, 0.0)  # softmax is positive: a zero end is +0
        rounded = round_float64(lo, fmt)
        upper = round_float64(hi, fmt)
        decided = (rounded == upper) & (np.signbit(rounded) == np.signbit(upper))
        if fmt != FP64 and not log:
            underflow = gap < UNDERFLOW_GAP
            rounded = np.where(underflow, 0.0, rounded)
            decided |= underflow
    special, results = semantics.decide(x, log=log)  # the -inf entries
    rounded = np.where(special, results, rounded)
    value = np.where(special, results, value)
    return rounded, value, decided | special


@numpy_defaults
def softmax_rows(x: np.ndarray, fmt: Format, *, log: bool = False) -> OracleResult:
    """Correctly rounded softmax (or log_softmax) of each row (last axis) of float64 ``x``."""
    x = np.asarray(x, dtype=np.float64)
    rows = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
    special, rounded = semantics.decide(rows, log=log)
    exact = rounded.copy()
    regular = ~special.all(-1)  # rows with arithmetic to do
    escalated = 0
    if regular.any():
        sub = rows[regular]
        r, v, decided = float64_pass(sub, fmt, log=log)
        for i in np.flatnonzero(~decided.all(axis=-1)):
            undecided = ~decided[i]
            escalated += int(undecided.sum())
            slow, slow_exact = mp_softmax.correctly_rounded_rows(sub[i : i + 1], fmt, log=log, wanted=undecided)
            r[i, undecided], v[i, undecided] = slow[0, undecided], slow_exact[0, undecided]
        rounded[regular], exact[regular] = r, v
    return OracleResult(rounded.reshape(x.shape), exact.reshape(x.shape), escalated)


@numpy_defaults
def softmax(call: Call) -> OracleResult:
    """The oracle for ``call``: its softmax, log_softmax or masked softmax (``torch.softmax(x, dim)`` and kin).

    Results are laid out as rows: ``x.movedim(dim, -1)`` flattened to 2-D.  They
    are rounded to the call's output dtype (default: x's dtype).  A mask (bool,
    x's shape, True = keep) makes masked entries -inf and fully masked rows zero.
    A scaled softmax's are those of its logits, scale * x + bias (:attr:`Call.logits`).
    """
    x, dim, mask = call.x, call.dim, call.mask
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor; got {type(x).__name__}")
    fmt = format_of(call.result_dtype)
    format_of(x.dtype)
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension (softmax runs along one)")
    if not -x.dim() <= dim < x.dim():
        raise ValueError(f"dim must lie in [{-x.dim()}, {x.dim() - 1}] for shape {tuple(x.shape)}; got {dim}")
    moved = (call.logits if call.operation.scaled else x).detach().to("cpu", torch.float64).movedim(dim, -1)
    rows = moved.reshape(math.prod(moved.shape[:-1]), moved.shape[-1]).numpy()
    if mask is None:
        return softmax_rows(rows, fmt, log=call.log)
    if mask.dtype != torch.bool or mask.shape != x.shape:
        raise ValueError(f"mask must be a bool tensor of x's shape {tuple(x.shape)}; got {mask.dtype} {tuple(mask.shape)}")
    keep = mask.detach().to("cpu").movedim(dim, -1).reshape(rows.shape).numpy()
    masked = np.where(keep, rows, -np.inf)
    result = softmax_rows(masked, fmt)
    special, results = semantics.decide(masked, masked=True)
    result.rounded[special], result.exact[special] = results[special], results[special]
    return result
