"""Correctly rounded softmax and log_softmax with mpmath interval arithmetic.

For each row, every result is enclosed in an interval computed with mpmath's
``iv`` context (outward rounding at every operation).  When both ends of an
interval round to the same value of the target format, that value is the
correctly rounded result.  Otherwise the row is recomputed at twice the
precision (Ziv's strategy).

The loop terminates: softmax_j = exp(d_j) / sum_i exp(d_i) with d_i = x_i - max
is irrational unless the row's finite entries are all equal, and then the
interval is exact (exp(0) = 1 and the sum of ones are exact).  Log-softmax is
d_j - log(S): exact (0 or d_j) when S = 1, otherwise irrational.  Irrational
values never sit on a rounding boundary, so some precision separates them from
it.  A cap guards the loop all the same; reaching it raises, it never guesses.

This is the slow, obviously-correct tier (several microseconds per element).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from mpmath import iv, mp

from .formats import Format, round_mpf
from .semantics import minus_inf_result, special_row

MAX_PRECISION = 1 << 14
"""Bits at which the Ziv loop gives up (never reached by a real row)."""


class OracleError(RuntimeError):
    """The oracle could not decide a rounding; it never returns a guess."""


@contextmanager
def _interval_precision(bits: int):
    saved = iv.prec
    iv.prec = bits
    try:
        yield
    finally:
        iv.prec = saved


def _enclosures(finite: list[float], log: bool) -> list:
    peak = max(finite)
    gaps = [iv.mpf(v) - peak for v in finite]
    exps = [iv.exp(g) for g in gaps]
    total = iv.fsum(exps)
    if log:
        log_total = iv.log(total)
        return [g - log_total for g in gaps]
    return [e / total for e in exps]


def _decide_row(finite: list[float], fmt: Format, log: bool) -> tuple[list[float], list[float]]:
    precision = max(fmt.precision, 53) + 32  # the exact values are returned to float64 accuracy
    while precision <= MAX_PRECISION:
        with _interval_precision(precision):
            enclosures = _enclosures(finite, log)
        rounded, exact = [], []
        for box in enclosures:
            a, b = (mp.make_mpf(end) for end in box._mpi_)
            lo, hi = round_mpf(a, fmt), round_mpf(b, fmt)
            if lo != hi:
                break
            rounded.append(lo)
            exact.append(float((a + b) / 2))
        else:
            return rounded, exact
        precision *= 2
    raise OracleError(f"rounding to {fmt} undecided at {MAX_PRECISION} bits for row {finite!r}")


def correctly_rounded_rows(x: np.ndarray, fmt: Format, *, log: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Softmax (or log_softmax) over the last axis of ``x``, correctly rounded to ``fmt``.

    ``x`` holds float64 values (any binary format's values are exact in float64).
    Returns ``(rounded, exact)``: the correctly rounded results as float64 values
    of ``fmt``, and the exact results rounded to float64 (for fractional ULPs).
    """
    x = np.asarray(x, dtype=np.float64)
    rounded = np.empty(x.shape)
    exact = np.empty(x.shape)
    flat_x = x.reshape(-1, x.shape[-1]) if x.size else x.reshape(0, 0)
    flat_rounded, flat_exact = rounded.reshape(flat_x.shape), exact.reshape(flat_x.shape)
    for row, out_rounded, out_exact in zip(flat_x, flat_rounded, flat_exact):
        special = special_row(row)
        if special is not None:
            out_rounded[:] = out_exact[:] = special
            continue
        keep = ~np.isneginf(row)
        out_rounded[:] = out_exact[:] = minus_inf_result(log=log)
        values, truths = _decide_row(row[keep].tolist(), fmt, log)
        out_rounded[keep], out_exact[keep] = values, truths
    return rounded, exact
