r"""Error bounds for softmax, derived from the algorithm, per output element.

The algorithm
-------------
Every kernel judged here computes, per row of n entries, in a compute format
C with unit roundoff u = 2^-p (fp32 for every kernel in this project, also for
fp16 and bf16 inputs):

    m   = max_i x_i                  exact (a maximum rounds nothing)
    d~_i = fl(x_i - m)               one rounding
    e~_i = exp~(d~_i)                the device's exp
    S~  = sum~_i e~_i                a reduction tree of depth h
    y~_j = e~_j / S~                 the device's division (or 1/S~ then a product)
    y_j = round_O(y~_j)              conversion to the output format O, if O != C

The error terms (Blanchard, Higham & Higham, IMA J. Numer. Anal. 41(4), 2021)
-----------------------------------------------------------------------------
Write d_i = x_i - m and f_j = softmax_j = e^{d_j} / S.

1. Gap rounding.  d~_i = d_i + t_i with t_i = fl(d_i) - d_i known exactly
   from the input, so exp(d~_i) = e^{d_i} e^{t_i}: a relative error
   tau_i = expm1(|t_i|) (zero when the subtraction is exact, as it is for the
   maximum itself and whenever m = 0 or Sterbenz applies, and zero for a
   kernel that recovers t_i with TwoSum and multiplies by 1 + t_i, whose
   rounding then counts in c0).  Past the gap
   D_C = 1 - ln(minsub_C) (104.3 for fp32) e^{d_i} is below every subnormal of
   C: whatever the rounding of d_i (which may even overflow, for logits near
   -max and +max), the device returns 0 or a few subnormal ulps, so the term
   counts as lost (relative error 1 on a negligible term) and |d| in the
   exp's absolute error is capped at D_C.
2. Exponential.  |exp~(d) - e^d| <= (c0 + c1 |d|) ulp_C(e^d): a constant and,
   for exp computed as exp2(d log2 e), a term growing with |d| from rounding the
   product.  As a relative error a_i = (c0 + c1|d_i|) ulp_C(e_i (1 + tau_i)) / e_i,
   with the ulp of the largest value exp(d~_i) may take (not the worst case 2u),
   which keeps the bound tight.  An implementation that stores e~_i in the output
   format O before dividing adds 0.5 ulp_O of it over e_i.
3. Sum.  Each e~_i = e_i (1 + theta_i), |theta_i| <= tau_i + a_i, so the exact
   sum of the e~_i is S (1 + w) with |w| <= sum_i f_i (tau_i + a_i), the
   softmax-weighted mean.  A reduction tree of depth h adds at most
   gamma_h = h u / (1 - h u) relative error whatever the order of the
   additions (h = n - 1 for any order; less for pairwise or blocked trees;
   at most k - 1 when only k entries are finite, since adding the exact zeros
   of -inf entries rounds nothing).  An online sum over c tiles computes
   e^{x_i - m} against the running maximum m and rescales the partial sum by
   exp(m_old - m_new) as the maximum grows: the |d| parts of those exps add up
   to at most c1 |d_i|, as before, and each of the c - 1 rescales adds
   (2 c0 + 1) u to w; the c - 1 additions of tiles add to h.
4. Division.  |y~ - e~/S~| <= q ulp_C(y~): q = 0.5 when correctly rounded,
   more for approximate division or a reciprocal and a product.

Combined (each factor a rigorous enclosure, not only first order):

    rho_j = (1 + tau_j + a_j)(1 + q ulp_C(f_j)/f_j) / ((1 - w)(1 - gamma_h)) - 1

bounds the relative error of y~_j.  Results that are subnormal in C lose
relative accuracy: each operation then errs by up to its ulp count times the
subnormal spacing, and a device that flushes subnormals may return 0 for any
result below the smallest normal.  This is an absolute term

    alpha_j = (c0 + c1|d_j| + q + 1) minsub_C  (+ minnormal_C if flushing)

so |y~_j - f_j| <= rho_j f_j + alpha_j.  Converting to O (round to nearest:
r = 0.5, toward zero: r = 1) adds r ulp_O of the converted value; a conversion
that mishandles O's subnormals adds minnormal_O where the result may lie below
it.  The bound,
in units of the output format's ulp at the exact value (the fractional ULP
error of glibc's and Zimmermann's tables):

    B_j = (rho_j f_j + alpha_j + [O != C] r ulp_O(f_j (1 + rho_j) + alpha_j)) / ulp_O(f_j)

Below O's smallest normal, ulp_O is the constant subnormal spacing, so there
the bound is an absolute error: subnormal outputs are judged by absolute error.
Entries decided by special values (NaN rows, zeros at -inf) are not bounded
here: they must match the oracle exactly.

What is measured rather than derived
------------------------------------
c0, c1, q, flushing and the conversion mode are properties of a device's
arithmetic (:class:`Arithmetic`), measured or documented; h comes from the
kernel's reduction (:class:`Reduction`).  See :mod:`oracles.profiles`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from .formats import FP32, FP64, Format, judging_unit, round_float64, ulp
from .settings import numpy_defaults


@dataclass(frozen=True)
class Arithmetic:
    """Accuracy of one device's operations, in ulps of the compute format."""

    name: str
    exp_ulps: float  # c0
    exp_ulps_per_gap: float  # c1, per unit of |d|
    div_ulps: float  # q: error of the quotient against the exact e~/S~
    flushes_subnormals: bool
    # The largest |mean signed error| of the exp, in ulps of C at the exact value, over the gaps
    # softmax takes (its bias: 0 for a correctly rounded exp; at most exp_ulps).  oracles/bias.py
    # bounds what it leaves in outputs in the compute format, after the normalisation cancels most.
    exp_bias_ulps: float
    # The same for the division e~/S~ (or a reciprocal and a product): 0 where each rounds to nearest.
    div_bias_ulps: float
    # A bias of the exp growing with the gap |d|, in ulps of C per unit of |d|: exp as 2^(d log2e) with
    # log2e rounded to the compute format errs by |d| (log2e - fl(log2e)) ln 2 relative, one sign for every d.
    exp_bias_per_gap: float = 0.0
    # exp~(0) is 1 exactly (C's Annex F for expf, PTX's ex2 of +-0, numpy's and Sleef's exp; tests/suite/
    # test_profiles.py checks it): rows whose outputs all sit at the row's max carry no exp bias (oracles/bias.py).
    exp_of_zero_exact: bool = True
    # Error of the final conversion to a narrower output dtype, in output ulps
    # (0.5 = round to nearest, 1 = toward zero); a dtype not listed is treated as 1.
    downcast_ulps: Mapping[torch.dtype, float] = field(default_factory=dict)
    # Output dtypes whose conversion may return any value below the smallest
    # normal for a result below it (a flush to zero is the common case).
    subnormal_downcast_unreliable: frozenset[torch.dtype] = frozenset()
    # Input dtypes whose conversion to C may return any value below the smallest normal for a subnormal input
    # (a backward's y and grad carry their values into the result; a logit's subnormal part moves no exp).
    subnormal_upcast_unreliable: frozenset[torch.dtype] = frozenset()
    # A softmax backward rounds its products grad * y to the input dtype, then computes tmp_j - y_j sum(tmp)
    # (torch's CUDA softmax_backward): the products of half inputs err by half an ulp of the half format each.
    backward_products_in_input: bool = False
    # How a scaled softmax forms scale * x + bias (oracles/logits.py): "input" (each step rounded to the input
    # dtype, as torch's eager ops), "compute" (in C) or "folded" (the scale folded into exp2's argument after the
    # max subtraction).
    scaled_logits: str = "compute"
    # A product and the sum after it may be contracted into one fused multiply-add (Triton does on GPUs).
    fused_multiply_add: bool = False
    # exp(x - max) is stored in the output dtype before the division (a double rounding).
    exp_rounded_to_output: bool = False
    # log, for log_softmax: |log~(S) - log S| <= log_ulps ulp(log S) + log_abs.
    log_ulps: float = 1.0
    log_abs: float = 0.0
    # log_softmax keeps the sum and its log in the output dtype (two more roundings in O).
    log_terms_in_output: bool = False
    # The kernel recovers the exact rounding error of x - max (TwoSum) and corrects for it.
    exact_gap: bool = False
    # Roundings of a log_softmax result, in ulps of C: 0.5 for one, 1.0 for two.
    log_result_ulps: float = 0.5
    # log_softmax as x - fl(m + log S): the shift m + log S is rounded in C first.
    log_shift_rounded: bool = False
    compute: Format = FP32
    # The steps are known to be the monotone ones below (False for a kernel of unknown construction).
    known_construction: bool = True

    def monotone(self, out_dtype: torch.dtype) -> bool:
        """Whether x_i <= x_j gives y_i <= y_j by construction.

        fl(x - max), a monotone exp, one divisor per row and a conversion that
        rounds preserve order.  Adding the gap's rounding error back after an fp32
        exp does not: two gaps one ulp apart may swap by up to the exp's error
        (found by the nightly H100 run); in float64 that error lies far below the
        output's rounding.  Nor does a conversion unreliable below the smallest normal.
        Of a kernel of unknown construction nothing is known, so it is judged within its bounds.
        """
        return self.known_construction and (not self.exact_gap or self.compute == FP64) and out_dtype not in self.subnormal_downcast_unreliable


@dataclass(frozen=True)
class Reduction:
    """The tree that sums a row: its depth h, and how many rescales an online sum applies.

    ``kind`` is one of:
      * ``"sequential"``: h = n - 1, a bound valid for any order of additions (and,
        with ``chunks``, of a sum that folds that many tiles in any order);
      * ``"numpy-pairwise-block"``: numpy's pairwise ``np.sum`` over each tile (the
        Triton interpreter's ``tl.sum``);
      * ``"triton-block"``: a compiled Triton ``tl.sum`` over a tile of ``rows``
        rows with ``num_warps`` warps: each thread adds its elements in sequence,
        then a tree over the threads.
    A tile is ``block`` wide, or the row padded to a power of two when ``block``
    is None.  An online sum folds ``chunks`` tiles one after another, rescaling
    the running sum each time the maximum grows: ``chunks - 1`` more additions
    and ``chunks - 1`` rescales (an exp and a product each).  A row split into
    ``spans`` parts sums each so, then rescales each part's sum once to the row's
    maximum and adds the ``spans`` of them as one more tile: one more rescale, and
    that tile's depth.
    """

    kind: str
    num_warps: int = 4
    rows: int = 1
    block: int | None = None
    chunks: int = 1
    spans: int = 1

    KINDS = ("sequential", "numpy-pairwise-block", "triton-block")

    def __post_init__(self) -> None:
        """ValueError naming the field, unless the tree is one there is: a declared reduction of negative rows or a
        million chunks would take the bounds anywhere (a precision model may declare any)."""
        if self.kind not in self.KINDS:
            raise ValueError(f"Reduction.kind must be one of {', '.join(self.KINDS)}; got {self.kind!r}")
        for name in ("num_warps", "rows", "chunks", "spans") + (("block",) if self.block is not None else ()):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Reduction.{name} must be an int >= 1; got {value!r}")

    def depth(self, n: int) -> int:
        if n <= 1:
            return 0
        if self.kind == "sequential":
            return n - 1
        folded = self._tile_depth(self.spans, rows=1) if self.spans > 1 else 0
        return self._tile_depth(self.block or 1 << (n - 1).bit_length(), self.rows) + self.chunks - 1 + folded

    def _tile_depth(self, width: int, rows: int) -> int:
        """Depth of one tl.sum over a tile of ``rows`` rows ``width`` wide."""
        if self.kind == "numpy-pairwise-block":
            return 1 + _numpy_pairwise_depth(width - 1)  # a reduce starts from a[0]
        if self.kind == "triton-block":
            threads = 32 * self.num_warps
            per_thread = -(-width * rows // threads)  # elements a thread adds in sequence, at most
            return min(width - 1, per_thread - 1 + math.ceil(math.log2(min(width, threads))))
        raise ValueError(f"unknown reduction kind {self.kind!r}")

    def rescales(self, n: int) -> int:
        return self.chunks - 1 + (self.spans > 1)


def _numpy_pairwise_depth(n: int) -> int:
    """Depth of numpy's pairwise summation (numpy/_core/src/umath/loops_utils.h.src)."""
    if n < 8:
        return max(n - 1, 0)  # res = 0.; res += a[i]: adding a[0] to 0 is exact
    if n <= 128:
        unrolled = n - n % 8
        return (unrolled // 8 - 1) + 3 + n % 8  # 8 accumulators, a 3-level tree, then the rest
    half = n // 2
    half -= half % 8
    return 1 + max(_numpy_pairwise_depth(half), _numpy_pairwise_depth(n - half))


def gamma_of(h, u: float) -> np.ndarray:
    """gamma_h = h u / (1 - h u), the relative error h roundings of unit u may add up to; inf where h u >= 1."""
    return np.where(h * u < 1, h * u / np.maximum(1 - h * u, u), np.inf)


def underflow_gap(c: Format) -> float:
    """-ln of C's smallest subnormal, plus one: e^-gap beyond it is negligible even as a subnormal."""
    return -math.log(c.min_subnormal) + 1


@dataclass(frozen=True)
class PrecisionProfile:
    """How one kernel computes on one backend: the device's arithmetic and the kernel's reduction."""

    arithmetic: Arithmetic
    reduction: Reduction

    @property
    def name(self) -> str:
        return f"{self.arithmetic.name}, {self.reduction.kind} sum"


@dataclass
class SumTerms:
    """What softmax and log_softmax bounds share: the row's gaps and the error of its sum."""

    regular: np.ndarray  # entries judged by a bound (finite input, finite exact result)
    gap_error: np.ndarray  # |fl_C(x_i - m) - (x_i - m)|, which log_softmax's result carries whatever the gap
    gap_rounding: np.ndarray  # the same where the term still counts in the sum, else 0
    tau: np.ndarray  # relative error of exp from the gap's rounding
    exp_error: np.ndarray  # c0 + c1 |d|, in ulps of C
    a: np.ndarray  # relative error of each exponential
    w: np.ndarray  # relative error of the sum from its terms (per row)
    gamma: np.ndarray  # relative error of the sum from its additions (per row)
    w_low: np.ndarray  # how far below S the terms may take the sum, relatively (per row): at most w, and below 1


@numpy_defaults
def sum_terms(x: np.ndarray, weights: np.ndarray, out: Format, profile: PrecisionProfile,
              formed: np.ndarray | None = None, slack: np.ndarray | float = 0.0) -> SumTerms:
    """Error terms of a row's sum of exponentials; ``weights`` are the exact softmax values.  A kernel that forms
    its logits itself (a scaled softmax: :mod:`oracles.logits`) subtracts the maximum of its ``formed`` logits, and
    its gaps err by a further ``slack``: gap i errs by |rnd_C(formed_i - max formed) - (x_i - max formed)| + slack_i
    (the shift cancels in the ratio)."""
    ar, c = profile.arithmetic, profile.arithmetic.compute
    u = c.unit_roundoff
    n = x.shape[-1]
    regular = np.isfinite(x) & np.isfinite(weights)
    formed = x if formed is None else formed
    peak = np.max(np.where(regular, formed, -np.inf), axis=-1, keepdims=True, initial=-np.inf)  # rows may be empty
    gap = np.where(regular, x - peak, 0.0)
    kernel_gap = np.where(regular, formed - peak, 0.0)
    # Past the underflow threshold the term is below C's smallest subnormal: it may be lost
    # entirely (relative error 1), and only its absolute error, a few subnormal ulps, counts.
    # For fp64 compute that threshold lies a little below where float64's own exp gives 0:
    # those terms are lost too (their relative error would be 0 * inf).
    with np.errstate(under="ignore"):
        lost = (gap < -underflow_gap(c)) | (np.exp(gap) == 0)
    recovered = ar.exact_gap | (c == FP64)  # the gap's rounding is undone, or fp64 leaves at most 2^-53 |d|
    with np.errstate(over="ignore", invalid="ignore"):
        gap_error = (np.where(recovered, np.abs(kernel_gap - gap), np.abs(round_float64(kernel_gap, c) - gap))
                     + np.abs(gap) * 2.0**-53 + slack)
        gap_error = np.where(np.isfinite(gap), gap_error, np.inf)  # x - m overflowed float64 itself
    gap_rounding = np.where(lost, 0.0, gap_error)  # a lost term's rounding no longer matters to the sum
    tau = np.expm1(gap_rounding)
    exp_error = ar.exp_ulps + ar.exp_ulps_per_gap * np.minimum(np.abs(gap), underflow_gap(c))
    e = np.where(lost, 1.0, np.exp(gap))  # positive wherever it is used
    # exp~ errs by its ulps at exp(fl(x - m)), which lies within e^d (1 +- tau): the larger end's ulp
    # bounds it, so a looser gap never gives a smaller a (the unknown profile must dominate).
    a = exp_error * ulp(e * (1 + tau), c) / e
    if ar.exp_rounded_to_output and out != c:
        a = a + 0.5 * ulp(e * (1 + tau + a), out) / e
    a = np.where(lost, 1.0, a)
    # An online sum rescales each term up to `rescales` times: an exp (c0 ulps) and a product each.
    rescale = profile.reduction.rescales(n) * (2 * ar.exp_ulps + 1) * u
    w = np.sum(np.where(regular, weights * (tau + a + rescale), 0.0), axis=-1, keepdims=True)
    # Below, each term is at least e_i exp(-|t_i|) (1 - a_i - rescale), above 0 however large the gap's error.
    w_low = 1 - np.sum(np.where(regular, weights * np.exp(-gap_rounding) * np.maximum(1 - a - rescale, 0.0), 0.0),
                       axis=-1, keepdims=True)
    # -inf entries add exact zeros, which never round: k terms need at most k - 1 roundings.
    terms = np.sum(regular, axis=-1, keepdims=True)
    h = np.minimum(profile.reduction.depth(n), np.maximum(terms - 1, 0))
    return SumTerms(regular, gap_error, gap_rounding, tau, exp_error, a, w, gamma_of(h, u), w_low)


def worst_terms(terms: list[SumTerms]) -> SumTerms:
    """Each error term the largest of ``terms`` (of the same rows): the terms of a kernel that may take any of
    several constructions."""
    first = terms[0]
    return SumTerms(first.regular, *(np.maximum.reduce([getattr(t, name) for t in terms])
                                     for name in ("gap_error", "gap_rounding", "tau", "exp_error", "a", "w", "gamma",
                                                  "w_low")))


@numpy_defaults
def softmax_bound(x: np.ndarray, exact: np.ndarray, out: Format, profile: PrecisionProfile,
                  formed: list[tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
    """Per-element bound B_j, in ulps of ``out`` at the exact value (see the module docstring).

    ``x`` holds input rows (float64, last axis = softmax axis); ``exact`` the exact
    softmax to float64 accuracy.  Entries of rows decided by special values get
    NaN: they are judged by exact equality, not by a bound.  ``formed``: the logits a kernel forming them itself
    may compute, each with its slack (:func:`oracles.logits.candidates`); the bound is the largest over them.
    """
    x = np.asarray(x, dtype=np.float64)
    f = np.asarray(exact, dtype=np.float64)
    ar, c = profile.arithmetic, profile.arithmetic.compute
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        t = worst_terms([sum_terms(x, f, out, profile, *candidate) for candidate in formed or [(None, 0.0)]])
        if formed is None:
            head = (1 + t.tau + t.a) / ((1 - t.w) * (1 - t.gamma))
            q = ar.div_ulps * ulp(f * head, c) / np.maximum(f, c.min_subnormal)
            rho = head * (1 + q) - 1
        else:  # logits formed by the kernel may err by far more than a rounding: both ends, each in full
            head = (1 + t.tau + t.a) / ((1 - t.w_low) * (1 - t.gamma))
            q = ar.div_ulps * ulp(f * head, c) / np.maximum(f, c.min_subnormal)
            low = np.minimum(1 - np.exp(-t.gap_rounding) * (1 - t.a) / ((1 + t.w) * (1 + t.gamma)) + q, 1.0)
            rho = np.maximum(head * (1 + q) - 1, low)
        alpha = (t.exp_error + ar.div_ulps + 1) * c.min_subnormal
        if ar.flushes_subnormals:
            alpha = alpha + c.min_normal
        error = rho * f + alpha
        error = error + conversion_error(f * (1 + rho) + alpha, f * (1 - rho) - alpha, out, ar)
        if formed is not None:
            # Whatever its logits, y~_j = e~_j / S~ >= 0 and <= 1 but for roundings: S~ holds e~_j (or its exp taken
            # again, within 2 c0 ulps each way, and rescaled), the division's, and the conversion to O's.
            u = c.unit_roundoff
            rescale = profile.reduction.rescales(x.shape[-1]) * (2 * ar.exp_ulps + 1) * u
            most = (1 + 2 * ar.div_ulps * u) * (1 + 4 * ar.exp_ulps * u + rescale) / (1 - t.gamma)
            error = np.fmin(error, np.maximum(f, most * (1 + 2 * out.unit_roundoff) - f) + alpha)
        bound = error / judging_unit(f, out)
    bounded = t.w < 1 if formed is None else True  # a formed softmax's is capped
    return np.where(t.regular & bounded & (t.gamma < 1), bound, np.where(t.regular, np.inf, np.nan))


@numpy_defaults
def log_softmax_bound(x: np.ndarray, exact: np.ndarray, out: Format, profile: PrecisionProfile) -> np.ndarray:
    """Per-element bound for log_softmax, y_j = fl(fl(x_j - m) - log~(S~)), in ulps of ``out``.

    An absolute error: the gap's rounding |t_j|; the sum's relative error
    (1 +- w)(1 +- gamma), which moves log S by at most -log((1 - w)(1 - gamma));
    the device's log (log_ulps ulp(log S) + log_abs), and the rounding of
    m + log S where the kernel forms it first (x_j - fl(m + log S)); the rounding of the
    result (log_result_ulps: half an ulp, or one for two roundings); the
    conversion to the output format.
    """
    x = np.asarray(x, dtype=np.float64)
    f = np.asarray(exact, dtype=np.float64)
    ar, c = profile.arithmetic, profile.arithmetic.compute
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        t = sum_terms(x, np.exp(f), out, profile)
        peak = np.max(np.where(t.regular, x, -np.inf), axis=-1, keepdims=True, initial=-np.inf)
        log_total = np.where(t.regular, (x - peak) - f, 0.0)  # f_j = x_j - m - log S
        shift = -np.log((1 - t.w) * (1 - t.gamma))
        log_error = ar.log_ulps * ulp(np.abs(log_total) * (1 + 2.0**-10), c) + ar.log_abs
        if ar.log_terms_in_output and out != c:  # S rounded to O moves log S by u_O; log S rounded to O
            log_error = log_error + 2 * out.unit_roundoff + 0.5 * ulp(np.abs(log_total) * (1 + 2.0**-10), out)
        if ar.log_shift_rounded:
            log_error = log_error + 0.5 * ulp(np.abs(np.where(t.regular, peak, 0.0) + log_total) * (1 + 2.0**-10), c)
        error = t.gap_error + shift + log_error + ar.log_result_ulps * ulp(np.abs(f) + shift + log_error, c)
        error = error + conversion_error(np.abs(f) + error, np.abs(f) - error, out, ar)
        bound = in_ulps(error, f, out)
    return np.where(t.regular & (t.w < 1) & (t.gamma < 1), bound, np.where(t.regular, np.inf, np.nan))


def in_ulps(error: np.ndarray, exact: np.ndarray, out: Format) -> np.ndarray:
    """An absolute ``error`` bound in ulps of ``exact`` in ``out``, counted in the judge's unit
    (:func:`oracles.formats.judging_unit`, which keeps a float64 backward's exact zero from passing float64's range).
    A finite error past even that range (above 1e19 at an exact zero) is the largest float, since an infinite bound
    fails every inexact result; an infinite error (a result past the output format's range) keeps its infinite
    bound."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(error), np.minimum(error / judging_unit(exact, out), np.finfo(np.float64).max),
                        np.inf)


@numpy_defaults
def conversion_error(high: np.ndarray, low: np.ndarray, out: Format, ar: Arithmetic) -> np.ndarray:
    """Error of converting a C result, known to lie in [low, high], to the output format."""
    if out == ar.compute:
        return np.zeros_like(high)
    error = ar.downcast_ulps.get(out.dtype, 1.0) * ulp(high, out)
    if out.dtype in ar.subnormal_downcast_unreliable:
        error = error + np.where(low < out.min_normal, out.min_normal, 0.0)
    return error


def unreliable_input_below(fmt: Format, ar: Arithmetic) -> float:
    """The magnitude below which an input of ``fmt`` may load into the compute format as any smaller value, 0
    included: ``fmt``'s smallest normal where its subnormals load unreliably, the compute format's where it flushes
    (denormals read as zero); 0 for none."""
    return max(fmt.min_normal if fmt.dtype in ar.subnormal_upcast_unreliable else 0.0,
               ar.compute.min_normal if ar.flushes_subnormals else 0.0)


@numpy_defaults
def softmax_backward_bound(y: np.ndarray, g: np.ndarray, exact: np.ndarray, out: Format,
                           profile: PrecisionProfile) -> np.ndarray:
    r"""Per-element bound for softmax backward, z_j = y_j (g_j - S), S = sum_i g_i y_i, in ulps of ``out``.

    The algorithm, in the compute format C (u = u_C): p~_i = fl(g_i y_i); S~ = sum~ p~_i by a tree of depth h;
    d~_j = fl(g_j - S~); z~_j = fl(y_j d~_j); converted to O.  The products and the h additions on any path
    give |S~ - S| <= gamma_{h+1} P, P = sum_i |g_i y_i| (Higham, Accuracy and Stability, 3.1 and 3.5), and
    with h at most k - 1 for k non-zero products (adding an exact zero rounds nothing).  Then
    d~_j = (d_j + (S - S~))(1 + e1) and z~_j = y_j d~_j (1 + e2), |e1|, |e2| <= u:

        |z~_j - z_j| <= |z_j| ((1 + u)^2 - 1) + |y_j| gamma_{h+1} P (1 + u)^2.

    Where d_j = g_j - S cancels (g near constant), the second term dominates: the absolute error of a
    backward is |y_j| times the sum's, however small z_j is, and the bound in ulps of z_j grows as it must.
    A kernel of unknown construction may compute fl(fl(y_j g_j) - fl(y_j S~)) instead, as torch on CUDA does
    (``backward_products_in_input``, in fp32 too), which adds u |y_j| (|g_j| + |S| + gamma_{h+1} P).  Subnormal products and results add an absolute
    (|y_j| k + 2) minsub_C (min_normal_C where C flushes); where the input format's subnormals may load as any
    value below its smallest normal m (``subnormal_upcast_unreliable``; C's smallest normal where C flushes, and
    so may read such inputs as zero: :func:`unreliable_input_below`), each such y_i or g_i moves by up to m,
    S by the sum of those moves times the other factor, and z_j by its own factors' moves; the conversion to O
    adds its ulps (:func:`conversion_error`).  A construction that rounds each product to the input format
    first and computes tmp_j - y_j sum(tmp) (``backward_products_in_input``, torch's on CUDA) adds
    u_O |g_j y_j| and |y_j| u_O P (each plus a subnormal step of O) and the rounding of y_j sum(tmp).  The
    input and output formats are one here.  Rows are float64 ``y``, ``g`` and the ``exact`` results, last axis the
    softmax's.
    """
    y, g, z = (np.asarray(a, dtype=np.float64) for a in (y, g, exact))
    ar, c = profile.arithmetic, profile.arithmetic.compute
    u = c.unit_roundoff
    products = np.abs(y * g)
    nonzero = np.sum(products != 0, axis=-1, keepdims=True)
    total = np.sum(products, axis=-1, keepdims=True) * (1 + y.shape[-1] * 2.0**-52)  # P, rounded up
    h = np.minimum(profile.reduction.depth(y.shape[-1]), np.maximum(nonzero - 1, 0)) + 1  # with the product
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        gamma = gamma_of(h, u)
        sum_error = gamma * total
        exact_sum = np.abs(np.sum(y * g, axis=-1, keepdims=True)) + y.shape[-1] * 2.0**-52 * total  # |S|, rounded up
        error = np.abs(z) * ((1 + u) ** 2 - 1) + np.abs(y) * sum_error * (1 + u) ** 2
        if not ar.known_construction or ar.backward_products_in_input:  # fl(fl(y_j g_j) - fl(y_j S~)), FMA or not
            error = error + u * np.abs(y) * (np.abs(g) + exact_sum + sum_error) * (1 + u)
        error = error + (np.abs(y) * nonzero + 2) * (c.min_normal if ar.flushes_subnormals else c.min_subnormal)
        if ar.backward_products_in_input and out != c:  # tmp_i = round_O(g_i y_i), then tmp_j - fl(y_j sum~ tmp)
            uo = out.unit_roundoff
            rounded = (uo * total + out.min_subnormal * nonzero) * (1 + gamma)  # what the products' rounding moves S by
            error = error + (uo * np.abs(y * g) + out.min_subnormal + np.abs(y) * rounded) * (1 + u) ** 2 \
                + u * np.abs(y) * (exact_sum + sum_error + rounded) * (1 + u)
        tiny = unreliable_input_below(out, ar)
        if tiny:  # y_i, g_i below it may load as any value below it (or as 0)
            moves = np.where(np.abs(y) < tiny, np.abs(g) + tiny, 0.0) + np.where(np.abs(g) < tiny, np.abs(y), 0.0)
            moved_sum = np.sum(moves, axis=-1, keepdims=True) * tiny * (1 + gamma)  # and the sum's rounding of the moves
            difference = np.abs(g) + tiny + exact_sum + sum_error + moved_sum
            error = error + (np.where(np.abs(y) < tiny, tiny * difference, 0.0) + np.abs(y) * (
                moved_sum + np.where(np.abs(g) < tiny, tiny, 0.0))) * (1 + u) ** 2
        error = error + conversion_error(np.abs(z) + error, np.abs(z) - error, out, ar)
        return in_ulps(error, z, out)


@numpy_defaults
def log_softmax_backward_bound(y: np.ndarray, g: np.ndarray, exact: np.ndarray, out: Format,
                               profile: PrecisionProfile) -> np.ndarray:
    r"""Per-element bound for log_softmax backward, z_j = g_j - exp(y_j) G, G = sum_i g_i, in ulps of ``out``.

    The algorithm, in C (u = u_C): G~ = sum~ g_i by a tree of depth h (at most k - 1 for k non-zero g_i), so
    |G~ - G| <= gamma_h sum_i |g_i|; e~_j = exp~(y_j) within the arithmetic's c0 + c1 |y_j| ulps (|y_j| capped at
    the underflow gap, as the forward's exp: :func:`sum_terms`), a relative a_j = (c0 + c1 |y_j|) ulp_C(e_j) / e_j
    and an absolute (c0 + c1 |y_j| + 1) minsub_C below C's normals (min_normal_C where C flushes); p~_j =
    fl(e~_j G~) and z~_j = fl(g_j - p~_j), u each:

        |z~_j - z_j| <= |z_j| u + (1 + u)^2 [(e_j a_j + alpha_j)(|G| + dG) + e_j dG + u e_j |G|],

    dG = gamma_h sum |g|.  Where the gradient is near exp(y_j) G the difference cancels and the bound is the
    absolute error of the product.  Input subnormals that load unreliably (``subnormal_upcast_unreliable``) move
    each g_i by up to the input's smallest normal m: G by m times their count, z_j by m (1 + e_j count); a
    subnormal y_j moves exp(y_j) by at most 2 e_j m.  The
    conversion to O adds its ulps (:func:`conversion_error`).
    """
    y, g, z = (np.asarray(a, dtype=np.float64) for a in (y, g, exact))
    ar, c = profile.arithmetic, profile.arithmetic.compute
    u = c.unit_roundoff
    nonzero = np.sum(g != 0, axis=-1, keepdims=True)
    h = np.minimum(profile.reduction.depth(y.shape[-1]), np.maximum(nonzero - 1, 0))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
        gamma = gamma_of(h, u)
        magnitude = np.sum(np.abs(g), axis=-1, keepdims=True) * (1 + y.shape[-1] * 2.0**-52)
        total = np.abs(np.sum(g, axis=-1, keepdims=True)) + y.shape[-1] * 2.0**-52 * magnitude  # |G|, rounded up
        d_total = gamma * magnitude
        e = np.exp(y)
        exp_error = ar.exp_ulps + ar.exp_ulps_per_gap * np.minimum(np.abs(y), underflow_gap(c))
        relative = np.where(e > 0, exp_error * ulp(e, c) / np.where(e > 0, e, 1.0), 0.0)
        absolute = (exp_error + 1) * (c.min_normal if ar.flushes_subnormals else c.min_subnormal)  # exp~ below normals
        product = (e * relative + absolute) * (total + d_total) + e * d_total + u * e * total
        step = c.min_normal if ar.flushes_subnormals else c.min_subnormal
        error = np.abs(z) * u + (1 + u) ** 2 * product + 2 * step
        tiny = unreliable_input_below(out, ar)
        if tiny:
            moved = np.sum(np.abs(g) < tiny, axis=-1, keepdims=True) * tiny
            loaded = (np.where(np.abs(g) < tiny, tiny, 0.0) + (e + relative * e + absolute) * moved
                      + np.where(np.abs(y) < tiny, 2 * e * tiny, 0.0) * (total + d_total + moved))  # exp(y +- m)
            error = error + loaded * (1 + u) ** 2
        error = error + conversion_error(np.abs(z) + error, np.abs(z) - error, out, ar)
        return in_ulps(error, z, out)
