r"""How far from zero a correct kernel's mean signed error may lie: a bound on bias, in ulps of the output.

An element's error may be anywhere within its derived bound, but roundings to
nearest err both ways: over many distinct outputs their signed errors average
out.  A kernel that truncates its outputs, or rounds any step toward zero or
toward +inf, errs one way on nearly every element (every output biased, which
training accumulates) and can still keep each element within one ulp.

Write the signed error of output j in ulps of the output format O at the
exact value f_j: e_j = (y_j - f_j) / ulp_O(f_j).  Only outputs normal in O
and finite count, each distinct exact value once (equal outputs share their
roundings).  What the statistical units are depends on where the output is
rounded.

Outputs narrower than the compute format: the outputs are the units
--------------------------------------------------------------------
Half outputs of fp32 compute, fp32 outputs of float64 compute.  Write
e_j = s_j + r_j:

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
too) and p = :data:`FALSE_ALARM`.  A_j is a fraction of an ulp of O there
(fp32 errors are 2^-13 ulp of fp16, 2^-16 of bf16): the roundings to O are
the error, and the test bites (bf16 truncation is caught on GPUs).

Outputs in the compute format: the rows are the units
-----------------------------------------------------
fp32 outputs computed in fp32 (``out == profile.arithmetic.compute``).  No
final rounding hides the computation's errors, and those are not independent
across a row: the sum S~ and a reciprocal 1/S~ err by one relative amount per
row, shared by every output of the row (for an order-free sum, h = n - 1, up
to hundreds of ulps).  Hoeffding over elements with their worst-case ranges
would allow hundreds of ulps of bias.  Rows, though, err independently: each
has its own sum.  So the statistic is over rows.

Which errors can be systematic.  Rounding to nearest errs both ways, with
mean zero over distinct values, wherever the bits it drops vary from value to
value: the gap's rounding fl(x - m), a quotient, a reciprocal, a product, an
addition whose smaller operand reaches the result's ulp.  What can remain:

1. The exp's bias.  With beta_exp the largest |mean signed error| of exp~ in
   ulps of C (``Arithmetic.exp_bias_ulps``, plus ``exp_bias_per_gap`` times
   the row's mean gap |d_j|, for an exp computed as 2^(d fl(log2e)), whose
   rounded constant errs one way for every d), e~_j = e_j (1 + eps_j), and a
   relative bias common to every exponential cancels in e_j / sum(e): to
   first order y_j errs by eps_j - sum_i f_i eps_i relative.  A mean error of
   beta_exp ulps of e_j is beta_exp ulp(e_j)/e_j relative, beta_exp times
   (ulp(e_j)/e_j)(f_j/ulp(f_j)) in ulps of y_j: a factor within (1/2, 2), as is
   the weighted mean's.  The two terms share the bias's sign, so their
   difference lies within 2 beta_exp (assuming the exp's error does not follow
   the position of its results within their binades).  Each rescale of an
   online sum multiplies the sum by one more exp: 2 beta_exp more each.
2. The division's bias, beta_div ulps (``Arithmetic.div_bias_ulps``), over
   the quotients softmax takes (those 1/k of tied rows below included).
3. The sum's small terms.  fl(a + b) rounds the bits of b below ulp(a + b);
   when b itself is below that ulp those bits are b: fl(a + b) = a, error -b,
   for b under half an ulp (a lost term), +(ulp - b) above.  Systematic, and
   real: an fp32 sequential sum of 1000 terms exp(4 z - max), z normal, errs
   low by 12.7 u on average over 2000 rows (in 8 lanes, as torch's CPU sum:
   1.3 u; numpy's pairwise sum: 0.2 u).  Every partial sum
   is at most S' = S (1 + w) / (1 - gamma_h) (:mod:`oracles.bounds`), whose
   ulp is at most 2 u S' = theta S: an operand below the result's ulp holds
   terms of weight f_i < theta only, and errs by at most itself.  Such an
   operand b has a sum s > b 2^(p-1) (b < ulp(s) <= 2^(1-p) s), and the next
   operand that holds the same terms holds s: a term of weight f_i sits in at
   most k_i = 1 + floor(log2(theta / f_i) / (p - 1)) of them (one, unless
   f_i < theta 2^(1-p)).  So the sum's systematic relative error is
   at most L = sum_{f_i < theta} k_i f_i, whatever the order of additions, and
   L f_j / ulp(f_j) ulps of y_j: on average over the row L mean_j (f_j /
   ulp(f_j)).  It takes the worst order (every large term first): 147 u on
   average for the rows above.  Rows whose gaps stay within ~16 (scale-1
   logits) have L = 0; wider rows get a wider allowance.

So a row's mean signed error m_r (over its distinct used outputs) has
|E m_r| <= beta_r = 2 (1 + rescales) beta_exp + beta_div + L_r mean_j (f_j /
ulp(f_j)), beta_exp taken at the row's mean gap.

Rows tied at their max.  Where every used output of a row sits at the row's
max (``tied-max`` values: k equal maxima, the rest so far below that their
outputs lie below the smallest normal), every exponential that counts is
exp~(0), which every known arithmetic returns as 1 exactly
(``Arithmetic.exp_of_zero_exact``); a rescale of an online sum by exp~(0) is
exact, and one by the exp of a gap below -87 multiplies only terms whose
weights lie below 2^-126.  The sum of k ones is exact, and what remains is the
quotient 1/k: beta_r = beta_div, with beta_exp = 0.  These rows are what
judges a directed rounding of fp32 outputs on a backend whose exp is biased:
Triton's on NVIDIA allows 2 (0.5 + 0.23 |d|) ulp on rows of ordinary logits,
more than the half ulp a rounding toward +inf adds.  Second-order terms (E sigma^2 for a relative error sigma of the
sum, t^2 / 2 for the gap's) are below 10^-5 ulp.  A kernel of unknown
construction takes the largest beta_exp and beta_div of every arithmetic
known on the backend (as for the conversions toward zero), not the merged
figures over all backends.

The statistic.  The m_r are independent (rows with the same exact outputs,
a permutation of one another or tied rows of the same k, count once) and,
as means of many bounded errors plus a sum's error (itself a sum of many
roundings), near normal.  With R rows, mean M and standard deviation s of the
m_r, Student's t test at two-sided false-alarm probability p:

    |M| <= mean_r beta_r + t_{p, R-1} s / sqrt(R)

t_{p, R-1} is the quantile (:func:`t_quantile`, from mpmath's regularized
incomplete beta).  The allowance adapts to the kernel's own noise: a kernel
with large per-row errors (torch's fp32 rows: s ~ 0.5 to 1.7 ulp) is judged
to t s / sqrt(R) ~ 0.7 to 2.6 ulp at R = 32, a float64 kernel rounded once
(s ~ 0.02) to a few hundredths.  Fewer than :data:`MIN_ROWS` rows: the
quantile's tail is too heavy to judge by, and the allowance is infinite.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from .bounds import Arithmetic, PrecisionProfile, softmax_bound, sum_terms
from .formats import Format, ulp
from .settings import MP, numpy_defaults

FALSE_ALARM = 1e-9
MIN_ROWS = 32  # rows judged in the compute format: t_{1e-9, 31} = 8.6 (the normal quantile is 6.1)
HALF_DTYPES = (torch.float16, torch.bfloat16)
NEAREST = 0.5 + 2.0**-10  # a conversion erring by more than this (in ulps) rounds toward zero somewhere


def known_arithmetics(arithmetic: Arithmetic, backend_arithmetics: Sequence[Arithmetic]) -> Sequence[Arithmetic]:
    """What a kernel may compute with: its own arithmetic, or if of unknown construction any known on the backend."""
    return [arithmetic] if arithmetic.known_construction else backend_arithmetics


def rounds_toward_zero(arithmetic: Arithmetic, backend_arithmetics: Sequence[Arithmetic], dtype: torch.dtype) -> bool:
    """Whether a correct kernel of this arithmetic may convert its results to ``dtype`` toward zero."""
    return any(a.downcast_ulps.get(dtype, 1.0) > NEAREST for a in known_arithmetics(arithmetic, backend_arithmetics))


def before_output_rounding(arithmetic: Arithmetic) -> Arithmetic:
    """The same arithmetic with its roundings to a narrower output format taken out (exact conversions: to fp16
    and bf16, and to fp32 from float64 compute)."""
    return replace(arithmetic, downcast_ulps={d: 0.0 for d in (*HALF_DTYPES, torch.float32)}, exp_rounded_to_output=False,
                   subnormal_downcast_unreliable=frozenset())


@functools.cache
def t_quantile(dof: int, p: float = FALSE_ALARM) -> float:
    """t with P(|T| > t) = p for Student's T with ``dof`` degrees of freedom.

    The two-sided tail is the regularized incomplete beta I_{dof/(dof + t^2)}(dof/2, 1/2),
    solved for t between the normal quantile (t's tails are heavier) and a doubling upper end.
    In the oracles' own mpmath context, at its 53 bits: mpmath.mp's precision is the process's (at 8
    bits, 1 - p rounded to 1 and the search never ended), and a value cached here is kept for the run.
    """

    def tail(t):
        return MP.betainc(MP.mpf(dof) / 2, 0.5, 0, dof / (dof + t * t), regularized=True)

    low = MP.sqrt(2) * MP.erfinv(1 - MP.mpf(p))
    high = 2 * low
    while tail(high) > p:
        high *= 2
    return float(MP.findroot(lambda t: MP.log(tail(t) / p), (low, high), solver="anderson"))


@numpy_defaults
def sampling_margin(samples: np.ndarray, p: float = FALSE_ALARM) -> float:
    """How far the mean of independent, near-normal ``samples`` may lie from their expectation:
    t_{p, N-1} s / sqrt(N), with s their standard deviation (infinite for fewer than two)."""
    n = samples.size
    return t_quantile(n - 1, p) * float(np.std(samples, ddof=1)) / math.sqrt(n) if n > 1 else math.inf


@dataclass(frozen=True)
class Allowance:
    """The largest |mean signed error| of a correct kernel, in ulps, and what it is made of.

    Outputs in the compute format are judged by row means (``rows`` given): ``systematic`` is then
    ``operations`` (the exp's and the division's bias) plus ``small_terms`` (the sum's), and
    ``statistical`` Student's t margin over ``rows`` row means of standard deviation ``spread``.
    Otherwise the outputs are the units: ``systematic`` is the mean bound before the roundings to
    the output, ``statistical`` Hoeffding's margin.
    """

    systematic: float
    toward_zero: float
    statistical: float
    outputs: int  # distinct outputs averaged
    rows: int | None = None  # the row means averaged; None: the outputs are the units
    operations: float = 0.0
    small_terms: float = 0.0
    spread: float = 0.0

    @property
    def total(self) -> float:
        return self.systematic + self.toward_zero + self.statistical

    def __str__(self) -> str:
        if self.rows is None:
            return (f"{self.total:.4g} ulp = {self.systematic:.4g} systematic (the bound before the roundings to the "
                    f"output) + {self.toward_zero:g} toward zero + {self.statistical:.4g} statistical (Hoeffding, "
                    f"p = {FALSE_ALARM:g}, {self.outputs} distinct outputs)")
        if self.rows < MIN_ROWS:
            return (f"not judged: {self.rows} rows in the compute format, fewer than the {MIN_ROWS} whose means "
                    f"are the statistical units ({self.outputs} distinct outputs)")
        return (f"{self.total:.4g} ulp = {self.systematic:.4g} systematic ({self.operations:.4g} the exp's and "
                f"division's bias + {self.small_terms:.4g} the sum's terms below its ulp) + {self.statistical:.4g} "
                f"statistical (t = {t_quantile(self.rows - 1):.3f} at p = {FALSE_ALARM:g} x sd {self.spread:.4g} "
                f"ulp of {self.rows} row means / sqrt({self.rows}); {self.outputs} distinct outputs)")


@dataclass(frozen=True)
class Bias:
    mean: float  # mean signed error, ulps of the output (of the row means, where rows are the units)
    allowance: Allowance

    @property
    def ok(self) -> bool:
        return abs(self.mean) <= self.allowance.total


@numpy_defaults
def measure_bias(x: np.ndarray, y: np.ndarray, exact: np.ndarray, out: Format, profile: PrecisionProfile,
                 backend_arithmetics: Sequence[Arithmetic]) -> Bias:
    """Mean signed error of ``y`` (rows, float64 values of the output) against ``exact``, and its allowance.

    ``backend_arithmetics``: every arithmetic known on the backend, any of which a kernel of
    unknown construction may compute with (``specs.registry.known_arithmetics``).

    Only outputs that are normal in ``out`` and finite count; rows come as from
    :func:`oracles.bounds.softmax_bound` (float64, last axis = softmax axis).
    Outputs in the compute format are judged by their rows' means, others one by one.
    """
    x, y, exact = (np.asarray(a, dtype=np.float64) for a in (x, y, exact))
    if out == profile.arithmetic.compute:
        return row_bias(x, y, exact, out, profile, backend_arithmetics)
    with np.errstate(invalid="ignore"):
        bound = softmax_bound(x, exact, out, profile)
        systematic = softmax_bound(x, exact, out, PrecisionProfile(before_output_rounding(profile.arithmetic),
                                                                   profile.reduction))
        used = np.isfinite(y) & np.isfinite(bound) & (exact >= out.min_normal) & (np.abs(y) >= out.min_normal)
    _, first = np.unique(exact[used], return_index=True)
    signed = ((y[used] - exact[used]) / ulp(exact[used], out))[first]
    bound, systematic = bound[used][first], systematic[used][first]
    n = signed.size
    steps = rounds_toward_zero(profile.arithmetic, backend_arithmetics, out.dtype) * (1 + profile.arithmetic.exp_rounded_to_output)
    statistical = math.sqrt(math.log(2 / FALSE_ALARM) * float(np.sum((2 * bound) ** 2)) / 2) / n if n else math.inf
    allowance = Allowance(float(systematic.mean()) if n else 0.0, float(steps), statistical, n)
    return Bias(float(signed.mean()) if n else 0.0, allowance)


@numpy_defaults
def row_bias(x: np.ndarray, y: np.ndarray, exact: np.ndarray, out: Format, profile: PrecisionProfile,
             backend_arithmetics: Sequence[Arithmetic]) -> Bias:
    """The mean of the rows' mean signed errors, for outputs in the compute format, and its allowance."""
    _, first = np.unique(np.sort(exact, axis=-1), axis=0, return_index=True)  # rows of the same outputs: one unit
    x, y, exact = (a[np.sort(first)] for a in (x, y, exact))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        terms = sum_terms(x, exact, out, profile)
        used = terms.regular & np.isfinite(y) & (exact >= out.min_normal) & (np.abs(y) >= out.min_normal)
        used &= first_of_equal(np.where(used, exact, np.nan))
        spacing = ulp(np.where(used, exact, 1.0), out)
        signed = np.where(used, (y - exact) / spacing, 0.0)
        position = np.where(used, exact / spacing, 0.0)  # f_j / ulp(f_j): a relative error's worth in ulps
        counts = used.sum(axis=-1)
        judged = counts > 0
        means = signed.sum(axis=-1)[judged] / counts[judged]
        small_terms = (small_terms_error(exact, terms, out)[:, 0] * position.sum(axis=-1))[judged] / counts[judged]
    rows = means.size
    known = known_arithmetics(profile.arithmetic, backend_arithmetics)
    peak = np.max(np.where(terms.regular, x, -np.inf), axis=-1, keepdims=True)
    gaps = np.where(used, np.abs(x - peak), 0.0).sum(axis=-1)[judged] / counts[judged]  # mean |d| per row
    exp_bias = max(a.exp_bias_ulps for a in known) + max(a.exp_bias_per_gap for a in known) * gaps
    if all(a.exp_of_zero_exact for a in known):
        exp_bias = np.where(gaps == 0, 0.0, exp_bias)  # every used output at the max: see "Rows tied at their max"
    operations = float(np.mean(2 * (1 + profile.reduction.rescales(x.shape[-1])) * exp_bias
                               + max(a.div_bias_ulps for a in known))) if rows else 0.0
    statistical = sampling_margin(means) if rows >= MIN_ROWS else math.inf
    lost = float(small_terms.mean()) if rows else 0.0
    allowance = Allowance(operations + lost, 0.0, statistical, int(counts.sum()), rows=rows,
                          operations=operations, small_terms=lost,
                          spread=float(np.std(means, ddof=1)) if rows > 1 else math.nan)
    return Bias(float(means.mean()) if rows else 0.0, allowance)


@numpy_defaults
def small_terms_error(exact: np.ndarray, terms, c: Format) -> np.ndarray:
    """L per row (keepdims): the largest systematic relative error of the row's sum, from operands below
    the ulp of their sum (see the module docstring)."""
    u = c.unit_roundoff
    growth = np.where((terms.w < 1) & (terms.gamma < 1), (1 + terms.w) / (1 - terms.gamma), np.inf)
    theta = 2 * u * growth  # no partial sum's ulp exceeds theta S
    f = np.where(terms.regular, exact, 0.0)
    small = (f > 0) & (f < theta)
    times = 1 + np.floor(np.log2(np.where(small, theta / np.where(small, f, 1.0), 1.0)) / (c.precision - 1))
    return np.sum(np.where(small, times * f, 0.0), axis=-1, keepdims=True)


def first_of_equal(values: np.ndarray) -> np.ndarray:
    """True at the first of each run of equal values within a row (rows on the last axis; NaNs are all first)."""
    order = np.argsort(values, axis=-1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=-1)
    first = np.ones(values.shape, dtype=bool)
    first[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    result = np.empty(values.shape, dtype=bool)
    np.put_along_axis(result, order, first, axis=-1)
    return result
