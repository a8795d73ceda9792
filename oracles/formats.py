"""Binary floating-point formats and exact round-to-nearest-even into them.

A format is described by its precision ``p`` (significand bits, the implicit bit
included) and its exponent range.  Every value of fp32, fp16 and bf16 is exactly
representable in float64, so float64 arrays carry values of any of these formats;
the rounding helpers below produce such arrays.

Two roundings are provided:

* :func:`round_float64` rounds float64 values (vectorised, numpy);
* :func:`round_mpf` rounds an arbitrary-precision mpmath number exactly, with
  integer arithmetic on its mantissa.

Both round to nearest, ties to even, with gradual underflow (subnormals) and
overflow to infinity, as IEEE 754 does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .settings import MP, numpy_defaults


@dataclass(frozen=True)
class Format:
    """An IEEE-754 style binary format with subnormals."""

    name: str
    precision: int  # p: significand bits including the implicit leading bit
    emin: int  # exponent of the smallest normal number
    emax: int  # exponent of the largest finite number
    dtype: torch.dtype

    @property
    def unit_roundoff(self) -> float:
        """u = 2^-p, the relative error bound of one rounding to nearest."""
        return math.ldexp(1.0, -self.precision)

    @property
    def min_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        return math.ldexp(1.0, self.emin - self.precision + 1)

    @property
    def max_finite(self) -> float:
        return math.ldexp(2.0 - math.ldexp(1.0, 1 - self.precision), self.emax)

    @property
    def bits(self) -> int:
        return torch.finfo(self.dtype).bits

    def __str__(self) -> str:
        return self.name


FP64 = Format("float64", 53, -1022, 1023, torch.float64)
FP32 = Format("float32", 24, -126, 127, torch.float32)
FP16 = Format("float16", 11, -14, 15, torch.float16)
BF16 = Format("bfloat16", 8, -126, 127, torch.bfloat16)

FORMATS = (FP64, FP32, FP16, BF16)
_BY_DTYPE = {f.dtype: f for f in FORMATS}


def format_of(dtype: torch.dtype) -> Format:
    """The format of a floating dtype; TypeError for any other dtype."""
    try:
        return _BY_DTYPE[dtype]
    except (KeyError, TypeError):
        names = ", ".join(str(f.dtype) for f in FORMATS)
        raise TypeError(f"dtype must be one of {names}; got {dtype}") from None


@numpy_defaults
def ulp(values: np.ndarray, fmt: Format) -> np.ndarray:
    """Spacing of ``fmt`` at |values|: 2^(max(floor(log2|v|), emin) - p + 1).

    Zero and subnormal magnitudes get the subnormal spacing, 2^(emin - p + 1).
    The argument need not be representable in ``fmt`` (an exact value, say).
    """
    v = np.abs(np.asarray(values, dtype=np.float64))
    _, e = np.frexp(v)  # v = m * 2^e with m in [0.5, 1), so floor(log2 v) = e - 1
    # frexp(0) gives e = 0, which would pass for the binade of 1/2: zero gets emin explicitly.
    exponent = np.where(v == 0, fmt.emin, np.maximum(e - 1, fmt.emin))
    return np.ldexp(1.0, exponent - fmt.precision + 1)


# The smallest unit the judge counts an error and its bound in, by format: float64's ulp at 0 is 2^-1074, and an
# absolute error of 1e-14 there (a backward's, whose exact result is 0, times gradients of 420) counted in it passes
# float64's range, the error and its bound alike; counted in 2^-960 both stay finite (to errors of 1e19) and compare
# as their absolute values do.  The other formats' ulps at 0 keep every such count finite.
JUDGING_FLOOR = {"float64": 2.0**-960}


def judging_unit(values: np.ndarray, fmt: Format) -> np.ndarray:
    """The unit the judge counts an error and its bound in: the ulp of ``fmt`` at |values|, at least
    :data:`JUDGING_FLOOR`."""
    return np.maximum(ulp(values, fmt), JUDGING_FLOOR.get(fmt.name, 0.0))


@numpy_defaults
def round_float64(values: np.ndarray, fmt: Format) -> np.ndarray:
    """Round float64 values to ``fmt``, to nearest with ties to even.

    Scaling by a power of two is exact, so the value is scaled until the units
    digit is the last significand bit of ``fmt``, rounded by ``np.rint`` (ties to
    even) and scaled back.  NaN and infinities pass through; signs of zeros are
    kept.
    """
    x = np.asarray(values, dtype=np.float64)
    if fmt is FP64:
        return x.copy()
    magnitude = np.abs(x)
    _, e = np.frexp(magnitude)
    quantum = np.maximum(e - 1, fmt.emin) - (fmt.precision - 1)
    rounded = np.ldexp(np.rint(np.ldexp(magnitude, -quantum)), quantum)
    rounded = np.where(rounded > fmt.max_finite, np.inf, rounded)
    rounded = np.where(np.isfinite(magnitude), rounded, magnitude)
    return np.copysign(rounded, x)


def round_mpf(value: MP.mpf, fmt: Format) -> float:
    """Round an mpmath number to ``fmt`` exactly (nearest, ties to even)."""
    if not MP.isfinite(value):
        return float(value)
    negative, man, exp, _ = value._mpf_
    return round_dyadic(-man if negative else man, exp, fmt)


def round_dyadic(man: int, exp: int, fmt: Format) -> float:
    """Round ``man * 2**exp`` (integers, any size) to ``fmt`` exactly (nearest, ties to even); +0 for zero."""
    if man == 0:
        return 0.0
    sign = -1.0 if man < 0 else 1.0
    man = abs(man)
    floor_log2 = exp + man.bit_length() - 1
    if floor_log2 < fmt.emin - fmt.precision:  # below half the smallest subnormal
        return sign * 0.0
    quantum = max(floor_log2, fmt.emin) - (fmt.precision - 1)
    shift = quantum - exp
    if shift <= 0:  # already on the grid of fmt
        kept, quantum = man, exp
    else:
        kept, dropped = man >> shift, man & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if dropped > half or (dropped == half and kept & 1):
            kept += 1
    if quantum + kept.bit_length() - 1 > fmt.emax:  # rounded up past the largest binade
        return sign * math.inf
    return sign * math.ldexp(float(kept), quantum)


@numpy_defaults
def two_sum_error(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Exact error of s = fl(a + b) in float64 (Knuth's TwoSum): a + b = s + error exactly."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)
