"""The oracles' own numerical settings, which nothing else in the process can change.

mpmath computes at the precision of a context (``mpmath.mp``, ``mpmath.iv``), and numpy reports
floating-point errors as ``numpy.seterr`` says: both are the process's, and any code in it, a kernel under
test or a library it loads, may change them.  A kernel that set ``mpmath.mp.prec = 8`` had the oracle's
exact values rounded to 8 bits (3.2e4 fp32 ulps off) and Student's quantile looping for ever; one that set
``numpy.seterr(all="raise")`` failed on the FloatingPointError of an exponential the bounds let underflow
on purpose (tests/hostile/sets_mp_precision.py, tests/hostile/numpy_raises.py).  So the oracles compute
with mpmath in contexts of their own, :data:`MP` and :data:`IV` (and with MPFR in gmpy2 contexts of their own,
never gmpy2's global one: :func:`oracles.mp_softmax._rest`), and their public functions run their numpy
arithmetic under numpy's default error handling (:func:`numpy_defaults`), whatever the process holds.
"""

from __future__ import annotations

import functools

import mpmath
import numpy as np

MP = mpmath.MPContext()
"""mpmath's real numbers and functions in a context of the oracles' own."""
MP.prec = 53  # mpmath's default, float64's: the values computed here are returned as float64

IV = mpmath.MPIntervalContext()
"""mpmath's interval arithmetic in a context of the oracles' own (:mod:`oracles.mp_softmax` sets its precision)."""

NUMPY_ERRORS = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}
"""numpy's default handling of floating-point errors, which the oracles are written for: an operation that
errs on purpose says so in an ``np.errstate`` of its own, which the functions it calls inherit."""


def numpy_defaults(function):
    """``function`` run under :data:`NUMPY_ERRORS`, whatever ``numpy.seterr`` the process holds (raise, call,
    log), except that what its caller ignores stays ignored: an oracle's function called inside another's
    ``np.errstate(invalid="ignore")`` computes as it did there.

    A fresh ``np.errstate`` for each call: numpy 1's keeps the state it restores on the instance, so one
    shared instance entered again (a bound calling ``ulp``) would restore the wrong state on leaving.
    """

    @functools.wraps(function)
    def run(*args, **kwargs):
        now = np.geterr()
        with np.errstate(**{kind: "ignore" if now[kind] == "ignore" else default
                            for kind, default in NUMPY_ERRORS.items()}):
            return function(*args, **kwargs)

    return run
