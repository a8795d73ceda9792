"""Correctly rounded softmax and log_softmax with mpmath interval arithmetic.

For each row, every result is enclosed in an interval computed with mpmath's
interval arithmetic (outward rounding at every operation), in contexts of the
oracles' own (:mod:`oracles.settings`: whatever precision the process leaves
``mpmath.mp`` and ``mpmath.iv`` at).  When both ends of an
interval round to the same value of the target format, zeros of one sign
included, that value is the correctly rounded result.  Otherwise the row is
recomputed at twice the precision (Ziv's strategy).

The gaps d_i = x_i - max are exact (mpf subtraction with exact=True: float64
inputs need at most about 2100 bits).  One maximal entry is set apart (its
exp(d) is exactly 1) and T = sum of exp(d_i) over the others is enclosed (by
MPFR's directed roundings, the row's one cost per element: :func:`_rest`), so that

* softmax_j = exp(d_j) / (1 + T);
* log_softmax_j = d_j - log1p(T), with log1p(T) enclosed on its own, to IV.prec
  bits relative however small T is, and both ends of the result computed by
  exact subtraction from d_j.

Log-softmax needs this care.  Where d_j is a rounding boundary of the format
(a midpoint, or where it overflows) and the other gaps are large, log S ~
e^-gap is tiny and the result lies that little beyond the boundary: an
enclosure of d_j - log S rounded at p bits straddles the boundary until p ~
gap / ln 2 (bf16 [64, -16384] was undecided at 10880 bits).  Subtracting
exactly, the enclosure's ends differ from d_j by the ends of log1p(T), which
are positive and within 2^-p relative of it: the first precision decides.
Where log1p(T) lies far below the last bit of d_j (gaps of 10^38 give
e^-10^38), a stand-in that rounds the same keeps the subtraction short
(:func:`_minus`).

The loop terminates: softmax_j is irrational unless the row's finite entries
are all equal, and then the interval is exact (exp(0) = 1 and the sum of ones
are exact).  Log-softmax is exactly 0 (+0) for a row's only finite entry;
otherwise log1p(T) is transcendental (Lindemann-Weierstrass), and so is
d_j - log1p(T).  Irrational values never sit on a rounding boundary, so some
precision separates them from it.  A cap guards the loop all the same;
reaching it raises, it never guesses.

This is the slow, obviously-correct tier: a few microseconds per entry of a
row for its sum, tens for each result decided.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import gmpy2
import numpy as np
from mpmath.libmp import from_man_exp

from .formats import Format, round_mpf, two_sum_error
from . import semantics
from .settings import IV, MP, numpy_defaults

MAX_PRECISION = 1 << 14
"""Bits the Ziv loop never goes past (no real row needs more than a few hundred)."""

GAP_BITS = 2100
"""Bits that hold x - peak exactly for any float64 x and peak (bits from 2^-1074 up to 2^1024)."""

FAR_GAP = -1e8
"""Gaps below this go to mpmath, whose exponents are unbounded: e^-7.5e8 is past the smallest mpfr, 2^-1073741824."""


class OracleError(RuntimeError):
    """The oracle could not decide a rounding; it never returns a guess."""


@contextmanager
def _interval_precision(bits: int):
    saved = IV.prec
    IV.prec = bits
    try:
        yield
    finally:
        IV.prec = saved


def _ends(box) -> tuple[MP.mpf, MP.mpf]:
    return tuple(MP.make_mpf(end) for end in box._mpi_)


def _log1p(rest) -> tuple[MP.mpf, MP.mpf]:
    """Enclosure of log(1 + rest) for an interval rest >= 0, to about IV.prec bits relative.

    log(1 + rest) rounded at IV.prec would lose rest altogether when it is below
    2^-IV.prec; the bounds below keep its relative accuracy however small it is.
    """
    lo, hi = _ends(rest)
    if hi < MP.ldexp(1, -IV.prec):  # r/(1 + r) <= log1p(r) <= r, a factor 1 + r apart
        return _ends(rest / (1 + rest))[0], hi
    with _interval_precision(2 * IV.prec):  # 1 + rest keeps rest >= 2^-prec to prec bits
        return _ends(IV.log(1 + rest))


def _minus(gap: MP.mpf, amount: MP.mpf, fmt: Format) -> MP.mpf:
    """gap - amount for gap <= 0 <= amount: exact, or a stand-in that rounds the same.

    The exact difference needs as many bits as the exponents of gap and amount
    are apart: 10^38 bits for a gap of -10^38 and amount = e^-10^38.  But |gap|,
    and every rounding boundary of ``fmt`` and of float64 above |gap|, are
    multiples of 2^grain, so no boundary lies strictly between gap and
    gap - 2^grain: any amount in (0, 2^grain) rounds like 2^(grain - 1) does.
    Such amounts are raised to 2^(grain - 1), which keeps the difference within
    about 2100 + prec bits (float64 gaps have their lowest bit at 2^-1074 or above).
    """
    if gap and amount:
        _, _, exp, bits = gap._mpf_  # |gap| = man 2^exp with man odd, of ``bits`` bits
        grain = min(exp, exp + bits - 1 - max(fmt.precision, 53))
        amount = max(amount, MP.ldexp(1, grain - 1))
    return MP.fsub(gap, amount, exact=True)


def _rest(others: np.ndarray, peak: float):
    """Enclosure of the sum of exp(v - peak) over ``others`` (float64), to IV.prec bits, as an IV interval.

    Through MPFR (gmpy2), about five times faster than mpmath's intervals: each
    exponential and the whole sum (mpfr_sum) are correctly rounded in one
    direction, down for the lower end and up for the upper, so the ends enclose
    the exact sum.  A gap goes in as the float64 fl(v - peak) where that is exact,
    else as an mpfr of GAP_BITS, which holds any difference of float64 values.
    Gaps below FAR_GAP, whose exponentials MPFR would round to zero or its
    smallest number, are summed by mpmath's intervals.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # a gap past -1.8e308 is -inf here: far
        gaps = others - peak
        inexact = two_sum_error(others, -peak, gaps) != 0
    far = gaps < FAR_GAP
    terms = gaps.tolist()
    wide = gmpy2.context(precision=GAP_BITS)  # gmpy2's contexts of our own: its global one is the process's
    for i in np.flatnonzero(inexact & ~far).tolist():
        terms[i] = wide.sub(gmpy2.mpfr(float(others[i]), 53, wide), gmpy2.mpfr(peak, 53, wide))
    near = [terms[i] for i in np.flatnonzero(~far).tolist()]
    ends = []
    for rounding in (gmpy2.RoundDown, gmpy2.RoundUp):
        directed = gmpy2.context(precision=IV.prec, round=rounding)
        man, exp = directed.fsum([directed.exp(g) for g in near]).as_mantissa_exp()
        ends.append(MP.make_mpf(from_man_exp(int(man), int(exp))))  # exact (MP.mpf() would round to MP.prec)
    return IV.mpf(ends) + IV.fsum(IV.exp(MP.fsub(v, peak, exact=True)) for v in others[far].tolist())


def _enclosures(finite: list[float], wanted: list[int], fmt: Format, log: bool) -> list[tuple[MP.mpf, MP.mpf]]:
    """Both ends of an enclosure of each wanted result (indices into ``finite``), at precision IV.prec.

    Every entry weighs in the row's sum; only the wanted ones are divided or subtracted and rounded.
    """
    peak = max(finite)
    top = finite.index(peak)  # exp(0) = 1 exactly: the sum leaves this entry out
    rest = _rest(np.delete(np.array(finite), top), peak)
    gaps = {i: MP.fsub(finite[i], peak, exact=True) for i in wanted}
    if log:
        low, high = _log1p(rest)
        return [(_minus(gaps[i], high, fmt), _minus(gaps[i], low, fmt)) for i in wanted]
    total = 1 + rest
    return [_ends(IV.exp(gaps[i]) / total) for i in wanted]


def _decide_row(finite: list[float], wanted: list[int], fmt: Format, log: bool) -> tuple[list[float], list[float]]:
    precision = max(fmt.precision, 53) + 32  # the exact values are returned to float64 accuracy
    while True:
        with _interval_precision(precision):
            enclosures = _enclosures(finite, wanted, fmt, log)
        rounded, exact = [], []
        for a, b in enclosures:
            lo, hi = round_mpf(a, fmt), round_mpf(b, fmt)
            if lo != hi or math.copysign(1, lo) != math.copysign(1, hi):
                break
            rounded.append(lo)
            exact.append(float((a + b) / 2))  # MP's numbers: added at its 53 bits, whatever mpmath.mp's are
        else:
            return rounded, exact
        if 2 * precision > MAX_PRECISION:
            raise OracleError(f"rounding to {fmt} undecided at {precision} bits for row {finite!r}")
        precision *= 2


@numpy_defaults
def correctly_rounded_rows(x: np.ndarray, fmt: Format, *, log: bool = False,
                           wanted: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Softmax (or log_softmax) over the last axis of ``x``, correctly rounded to ``fmt``.

    ``x`` holds float64 values (any binary format's values are exact in float64).
    Returns ``(rounded, exact)``: the correctly rounded results as float64 values
    of ``fmt``, and the exact results rounded to float64 (for fractional ULPs).
    ``wanted`` (bool, x's shape; default every entry): the results to compute;
    the others are NaN unless the special cases decide them.  A row's sum takes
    in all its entries whichever are wanted; only the wanted ones cost a
    division or subtraction and a rounding at each precision.
    """
    x = np.asarray(x, dtype=np.float64)
    wanted = np.ones(x.shape, dtype=bool) if wanted is None else np.broadcast_to(wanted, x.shape)
    rounded = np.empty(x.shape)
    exact = np.empty(x.shape)
    flat_x = x.reshape(-1, x.shape[-1]) if x.size else x.reshape(0, 0)
    flat_wanted = wanted.reshape(flat_x.shape)
    flat_rounded, flat_exact = rounded.reshape(flat_x.shape), exact.reshape(flat_x.shape)
    special, results = semantics.decide(flat_x, log=log)
    for row, decided, want, result, out_rounded, out_exact in zip(flat_x, special, flat_wanted, results,
                                                                  flat_rounded, flat_exact):
        out_rounded[:] = out_exact[:] = result
        keep = ~decided
        asked = keep & want
        if not asked.any():
            continue
        values, truths = _decide_row(row[keep].tolist(), np.flatnonzero(asked[keep]).tolist(), fmt, log)
        out_rounded[asked], out_exact[asked] = values, truths
    return rounded, exact
