r"""Correctly rounded softmax and log_softmax backward of the floats a kernel is given:

* softmax: grad_x_j = y_j (g_j - sum_i g_i y_i), y the forward's softmax;
* log_softmax: grad_x_j = g_j - exp(y_j) sum_i g_i, y the forward's log_softmax.

A softmax backward kernel (torch's ``_softmax_backward_data(grad_output, output, dim, input_dtype)``,
Liger-Kernel's and FlagGems' softmax backward) receives the forward's output y and the gradient of the
loss with respect to it, g, both in one format, and returns the gradient with respect to the logits.
The oracle's result is that of the given floats, exactly, rounded once to the output format: what the
forward computed to make y is not the backward's business.

Every value is a dyadic rational, so the result is too, and it can be had exactly:

* a product g_i y_i of two fp32 (bf16, fp16) values has at most 48 significant bits, and its exponent
  lies within float64's normal range (2^-298 to 2^256): the products are exact in float64;
* their sum S is enclosed as S_hi + r, with S_hi = fsum(p) and r = fsum(p, -S_hi), both correctly
  rounded (math.fsum), so |S - S_hi - r| <= u |r| (u = 2^-53);
* g_j - S_hi = a_j + t_j exactly (Knuth's TwoSum), then d_j = fl(a_j + fl(t_j - r)) errs from
  g_j - S by at most u |d_j| + u |t_j - r| + 2u |r|; z_j = fl(y_j d_j) by u |z_j| more, plus y_j times
  the error of d_j.

Each result is enclosed in [z - E, z + E], widened by a float64 step; where both ends round to the same
value of the output format that value is the correctly rounded result (tier 1).  Near-total
cancellation (g_j within a few float64 ulps of S, as for a constant gradient, whose exact result is
c y_j (1 - sum y), and is exactly 0 when the y sum to 1 exactly) leaves the enclosure across a rounding
boundary: those elements are decided with integers (tier 2): S as one integer times a power of two, the
difference and the product exact, rounded once (:func:`oracles.formats.round_dyadic`).  Exact zeros are
+0, as IEEE arithmetic gives y (g - S) for g = S.

The log_softmax backward's G = sum_i g_i is enclosed as the fsum pair G_hi + r likewise; exp(y_j) by
float64's exp, within EXP64_ULPS ulps (the assumption ``tests/suite/test_correctly_rounded.py``
measures); z_j = fl(g_j - fl(e_j G_hi)) errs by u |z_j| + (u + 2 eps_exp) |e_j G_hi| + e_j |r| (1 +
eps_exp) and, where exp underflows float64, (EXP64_ULPS + 1) 2^-1074 |G|.  The elements it leaves
undecided are enclosed with mpmath's interval arithmetic at doubling precision (exp(y_j) is
transcendental for y_j != 0, so some precision decides; y_j = 0 and G = 0 are exact with integers).
A y_j of -inf (an entry the forward's exp lost) has exp(y_j) = 0: the result is g_j exactly.

A NaN or an infinity among the inputs decides the results it makes non-finite, as IEEE arithmetic
evaluates the definition (:func:`oracles.semantics.decide_backward`); the row's other results are the
arithmetic's, computed with those inputs' entries taken as 0 (they reach no finite result).
float64 inputs (whose products float64 does not hold) take the integers' tier for every element: their products
summed exactly, each result exact, rounded once.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from mpmath.libmp import from_man_exp

from . import semantics
from .call import Call
from .correctly_rounded import EXP64_ULPS, OracleResult
from .formats import FP64, Format, format_of, round_dyadic, round_float64, round_mpf, two_sum_error
from .mp_softmax import OracleError, _ends, _interval_precision
from .settings import IV, MP, numpy_defaults

U = 2.0**-53
EPS_EXP = EXP64_ULPS * 2.0**-52  # float64's exp, relative to the exact value
MAX_BITS = 1 << 14  # the interval tier's last precision: reaching it raises, it never guesses
EXACT_PRODUCT_BITS = 26  # significand bits of a format whose products, and their sums' terms, float64 holds exactly


def _check(name: str, t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
    format_of(t.dtype)  # a floating format the oracle knows


def _dyadic(values: np.ndarray) -> tuple[list[int], list[int]]:
    """Each float64 as an integer significand and exponent: v = m * 2^e exactly."""
    fraction, exponent = np.frexp(values)
    return (np.ldexp(fraction, 53).astype(np.int64).tolist(), (exponent - 53).tolist())


def exact_sum(values: np.ndarray) -> tuple[int, int]:
    """The exact sum of float64 ``values`` as (m, e): m * 2^e."""
    mantissas, exponents = _dyadic(values)
    base = min(exponents, default=0)
    return sum(m << (e - base) for m, e in zip(mantissas, exponents)), base


def exact_products_sum(y: np.ndarray, g: np.ndarray) -> tuple[int, int]:
    """The exact sum of the products y_i g_i of float64 values, as (m, e): m * 2^e (each product an integer's)."""
    (ym, ye), (gm, ge) = _dyadic(y), _dyadic(g)
    exponents = [a + b for a, b in zip(ye, ge)]
    base = min(exponents, default=0)
    return sum(a * b << (e - base) for a, b, e in zip(ym, gm, exponents)), base


def exact_row(y: np.ndarray, g: np.ndarray, wanted: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """Tier 2 for one row: the results at ``wanted``, rounded to ``fmt`` and to float64, with integers only."""
    total, base = exact_products_sum(y, g)  # S = total * 2^base exactly
    columns = np.flatnonzero(wanted)
    (ym, ye), (gm, ge) = _dyadic(y[columns]), _dyadic(g[columns])
    rounded, exact = np.empty(columns.size), np.empty(columns.size)
    for k in range(columns.size):
        low = min(base, ge[k])
        difference = (gm[k] << (ge[k] - low)) - (total << (base - low))  # g_j - S = difference * 2^low
        rounded[k] = round_dyadic(ym[k] * difference, ye[k] + low, fmt)
        exact[k] = round_dyadic(ym[k] * difference, ye[k] + low, FP64)
    return rounded, exact


def fsum_pair(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's sum as hi + r, both correctly rounded (math.fsum): hi the sum, r the sum less hi, so that the exact
    sum lies within u |r| of hi + r (columns of one entry per row)."""
    hi = np.array([math.fsum(row.tolist()) for row in rows]).reshape(-1, 1)
    rest = np.array([math.fsum([*row.tolist(), -s]) for row, s in zip(rows, hi[:, 0].tolist())]).reshape(-1, 1)
    return hi, rest


def decided(z: np.ndarray, error: np.ndarray, fmt: Format, exact_in_row) -> OracleResult:
    """The results enclosed in [z - error, z + error] (widened by a float64 step), rounded to ``fmt`` where both ends
    round alike (+0 for a zero); ``exact_in_row(i, wanted)`` decides row i's other elements (rounded, exact)."""
    lo = np.nextafter(z - error, -np.inf)
    hi = np.nextafter(z + error, np.inf)
    rounded, upper = round_float64(lo, fmt), round_float64(hi, fmt)
    settled = rounded == upper  # -0 == +0: a result that rounds to zero either way is decided
    rounded = rounded + 0.0  # exact zeros, and results too small for the format, are +0
    escalated = 0
    for i in np.flatnonzero(~settled.all(axis=-1)):
        undecided = ~settled[i]
        escalated += int(undecided.sum())
        rounded[i, undecided], z[i, undecided] = exact_in_row(i, undecided)
    return OracleResult(rounded, z, escalated)


@numpy_defaults
def backward_rows(y: np.ndarray, g: np.ndarray, fmt: Format, exact_products: bool = True) -> OracleResult:
    """Correctly rounded y_j (g_j - sum_i g_i y_i) for each row (last axis) of float64 ``y`` and ``g``: values of
    a format of at most EXACT_PRODUCT_BITS bits (``exact_products``: float64 holds their products), else every
    element with integers."""
    if not exact_products:
        settled = [exact_row(y[i], g[i], np.ones(y.shape[-1], dtype=bool), fmt) for i in range(y.shape[0])]
        rounded = np.array([r for r, _ in settled]).reshape(y.shape)
        return OracleResult(rounded + 0.0, np.array([e for _, e in settled]).reshape(y.shape), y.size)
    s_hi, r = fsum_pair(y * g)
    a = g - s_hi
    t = two_sum_error(g, -s_hi, a)
    tr = t - r
    d = a + tr
    z = y * d
    error = (U * np.abs(z) + np.abs(y) * (U * np.abs(d) + U * np.abs(tr) + 2 * U * np.abs(r))) * (1 + 2.0**-20)
    return decided(z, error, fmt, lambda i, wanted: exact_row(y[i], g[i], wanted, fmt))


def exact_log_row(y: np.ndarray, g: np.ndarray, wanted: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """The log_softmax backward's results at ``wanted`` of one row, rounded to ``fmt`` and to float64: exactly with
    integers where exp(y_j) is 1 or G is 0, else enclosed in mpmath intervals at doubling precision."""
    man, exp = exact_sum(g)
    total = MP.make_mpf(from_man_exp(man, exp))  # G exactly, whatever MP.prec
    columns = np.flatnonzero(wanted)
    rounded, exact = np.empty(columns.size), np.empty(columns.size)
    for k, j in enumerate(columns.tolist()):
        if y[j] == 0 or man == 0:  # z = g_j - G or g_j: dyadic
            gm, ge = exact_sum(g[j:j + 1])
            low = min(ge, exp)
            difference = (gm << (ge - low)) - ((man << (exp - low)) if y[j] == 0 else 0)
            rounded[k], exact[k] = round_dyadic(difference, low, fmt), round_dyadic(difference, low, FP64)
            continue
        bits = 64
        while True:
            with _interval_precision(bits):
                lo, hi = _ends(IV.mpf(g[j]) - IV.exp(IV.mpf(y[j])) * IV.mpf(total))
            if round_mpf(lo, fmt) == round_mpf(hi, fmt):
                rounded[k], exact[k] = round_mpf(lo, fmt) + 0.0, float(MP.mpf((lo + hi) / 2))
                break
            bits *= 2
            if bits > MAX_BITS:
                raise OracleError(f"log_softmax backward: undecided at {MAX_BITS} bits (y {y[j]!r}, g {g[j]!r})")
    return rounded, exact


@numpy_defaults
def log_backward_rows(y: np.ndarray, g: np.ndarray, fmt: Format) -> OracleResult:
    """Correctly rounded g_j - exp(y_j) sum_i g_i for each row (last axis) of float64 ``y`` and ``g`` (y may hold
    -inf): no product of two inputs is formed, so float64 inputs are enclosed alike."""
    g_hi, r = fsum_pair(g)
    with np.errstate(under="ignore"):
        e = np.exp(y)
    p = e * g_hi
    z = g - p
    error = (U * np.abs(z) + (U + 2 * EPS_EXP) * np.abs(p) + 2 * e * np.abs(r)
             + (EXP64_ULPS + 1) * 2.0**-1074 * np.abs(g_hi + r)) * (1 + 2.0**-20)
    return decided(z, error, fmt, lambda i, wanted: exact_log_row(y[i], g[i], wanted, fmt))


def split_special(y: np.ndarray, g: np.ndarray, *, log: bool) -> tuple[np.ndarray, ...]:
    """Rows of float64 ``y`` and ``g`` parted: the results their special inputs decide
    (:func:`oracles.semantics.decide_backward`: mask, results), and the inputs of the arithmetic, each non-finite
    entry (a log_softmax's -inf in ``y`` aside) and every entry of a row decided whole taken as 0."""
    special, results = semantics.decide_backward(y, g, log=log)
    arithmetic = ~special.all(-1, keepdims=True) & np.isfinite(g)
    lost = y == -np.inf if log else False  # exp(-inf) = 0: a lost entry, arithmetic
    return special, results, np.where(arithmetic & (np.isfinite(y) | lost), y, 0.0), np.where(arithmetic, g, 0.0)


@numpy_defaults
def softmax_backward(call: Call) -> OracleResult:
    """The oracle for a softmax (or log_softmax) backward ``call``: ``call.x`` is the forward's output y,
    ``call.grad`` the gradient g of the same shape and dtype.  Results are laid out as rows (``movedim(dim, -1)``
    flattened to 2-D), rounded to the call's output dtype."""
    y, g, dim = call.x, call.grad, call.dim
    _check("y", y)
    _check("grad", g)
    if g.shape != y.shape or g.dtype != y.dtype:
        raise ValueError(f"grad must have y's shape {tuple(y.shape)} and dtype {y.dtype}; got {tuple(g.shape)} "
                         f"{g.dtype}")
    if y.dim() == 0:
        raise ValueError("y must have at least one dimension (softmax runs along one)")
    rows = [t.detach().to("cpu", torch.float64).movedim(dim, -1) for t in (y, g)]
    y_rows, g_rows = (t.reshape(math.prod(t.shape[:-1]), t.shape[-1]).numpy() for t in rows)
    special, results, y_rows, g_rows = split_special(y_rows, g_rows, log=call.log)
    fmt = format_of(call.result_dtype)
    oracle = log_backward_rows(y_rows, g_rows, fmt) if call.log else backward_rows(
        y_rows, g_rows, fmt, exact_products=format_of(y.dtype).precision <= EXACT_PRODUCT_BITS)
    return OracleResult(np.where(special, results, oracle.rounded), np.where(special, results, oracle.exact),
                        oracle.escalated)
