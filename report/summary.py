"""Aggregate records into categories: kernel x operation x dtype x value class.

A category's statistics are the same whatever order the records arrive in
(xdist delivers them in any order): maxima, and element-weighted means summed
with ``math.fsum``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import NamedTuple

import numpy as np

from .baseline import source_id

ULP_BUCKETS = ["0", "1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", "65-128", "129-256", "257-1024", ">1024"]
_UPPER_EDGES = np.array([0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024])


def shown(value, spec: str, scale: float = 1.0) -> str:
    """A statistic for a table; "-" where it is undefined (no element in the category)."""
    return "-" if value is None else format(value * scale, spec)


def shown_ratio(value: float) -> str:
    """An error-to-bound ratio for a table: below 1e-4 (elements exact to double precision) it reads 0."""
    return shown(value if value >= 1e-4 else 0.0, ".4g")


def ulp_histogram(ulps: np.ndarray) -> list[int]:
    """Counts of integer ULP distances in the buckets of ULP_BUCKETS."""
    buckets = np.searchsorted(_UPPER_EDGES, np.asarray(ulps).ravel(), side="left")
    return np.bincount(buckets, minlength=len(ULP_BUCKETS)).tolist()


class Category(NamedTuple):
    """What a category's records measured: one operation, dtype and value class, keyed "op/dtype/values" in
    reports and baselines (:attr:`key`; :meth:`read` reads it back)."""
    op: str
    dtype: str
    values: str

    @classmethod
    def of(cls, record: dict) -> Category:
        return cls(record["op"], record["dtype"], record["values"])

    @classmethod
    def read(cls, key: str) -> Category:
        op, dtype, values = key.split("/")
        return cls(op, dtype, values)

    @property
    def key(self) -> str:
        return "/".join(self)


# How each statistic of a record's errors combines over several, weighted by their elements: over a category's
# records (:func:`categorize`) and over a league row's categories (report/league.py).  A new statistic is one entry.
COMBINED = {"max_ulp": "max", "max_fractional_ulp": "max", "worst_ratio": "max", "mean_ulp": "mean",
            "correctly_rounded": "mean", "violations": "sum", "non_finite": "sum", "special_misses": "sum"}


def combined(parts: list[dict], elements: list[int]) -> dict:
    """The statistics of :data:`COMBINED` over ``parts``, each of ``elements`` elements: maxima (0 of none), sums,
    means weighted by elements (None where there is no element to average over).  A statistic a part predates (last
    night's report, read by the nightly's comparison) is None, so that a table says "-" rather than a figure of the
    others."""

    def combine(key: str, kind: str) -> float | None:
        if kind == "mean":
            pairs = [(part[key], n) for part, n in zip(parts, elements) if part.get(key) is not None]
            weight = sum(n for _, n in pairs)
            return math.fsum(v * n for v, n in pairs) / weight if weight else None
        values = [part.get(key) for part in parts]
        if None in values:
            return None
        return max(values, default=0.0) if kind == "max" else sum(values)

    return {key: combine(key, kind) for key, kind in COMBINED.items()}


def _side(records: list[dict], side: str) -> dict:
    errors = [r[side] for r in records]
    return {
        **combined(errors, [e["elements"] for e in errors]),
        "allclose": sum(bool(e["allclose"]) for e in errors) / len(errors) if errors else 1.0,
        "ulp_histogram": [sum(e["ulp_histogram"][i] for e in errors) for i in range(len(ULP_BUCKETS))],
    }


def categorize(records: list[dict]) -> dict[str, dict[str, dict]]:
    """kernel -> category -> {records, tests (that measured it), elements, kernel: stats, torch: stats}."""
    grouped: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        grouped[record["kernel"]][Category.of(record).key].append(record)
    return {
        kernel: {
            key: {
                "records": len(group),
                "tests": sorted({source_id(r["test"]) for r in group if r.get("test")}),
                "elements": sum(r["kernel_errors"]["elements"] for r in group),
                "kernel": _side(group, "kernel_errors"),
                "torch": _side(group, "torch_errors"),
            }
            for key, group in sorted(categories.items())
        }
        for kernel, categories in sorted(grouped.items())
    }


INTERPRETER_BF16 = ("bfloat16 under Triton's interpreter: it converts fp32 to bf16 toward zero where compiled Triton "
                    "rounds to nearest, so a Triton kernel's bf16 ULPs here (up to 1 ULP more, fewer correctly "
                    "rounded) reflect the interpreter, not the kernel; torch's own bf16 rounds to nearest")


BACKWARD_CANCELS = ("backward categories: where g_j - sum(g y) cancels (a near-constant gradient), a result near 0 "
                    "carries |y_j| times the sum's absolute error, so its bound, and a right kernel's ULPs, run to "
                    "thousands there (torch's too on other rows): judged by that bound (docs/judging.md), not by "
                    "a count of ULPs")


def has_backward(categories: dict) -> bool:
    """Whether the run judged a softmax or log_softmax backward."""
    return any("backward" in Category.read(key).op for groups in categories.values() for key in groups)


def interpreter_truncates_bf16(backend: str, categories: dict) -> bool:
    """Whether the run's bf16 figures of a Triton kernel went through the interpreter's truncating store."""
    return backend == "cpu" and any(Category.read(key).dtype == "bfloat16" for kernel, groups in categories.items()
                                    if kernel != "torch" for key in groups)
