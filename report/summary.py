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


def _side(records: list[dict], side: str) -> dict:
    errors = [r[side] for r in records]
    elements = [e["elements"] for e in errors]
    total = sum(elements)

    def weighted(key: str) -> float | None:  # None: no element to average over
        return math.fsum(e[key] * n for e, n in zip(errors, elements)) / total if total else None

    return {
        "max_ulp": max((e["max_ulp"] for e in errors), default=0.0),
        "mean_ulp": weighted("mean_ulp"),
        "correctly_rounded": weighted("correctly_rounded"),
        "max_fractional_ulp": max((e["max_fractional_ulp"] for e in errors), default=0.0),
        "worst_ratio": max((e["worst_ratio"] for e in errors), default=0.0),
        "violations": sum(e["violations"] for e in errors),
        "non_finite": sum(e["non_finite"] for e in errors),
        "special_misses": count_of(errors, "special_misses"),
        "allclose": sum(bool(e["allclose"]) for e in errors) / len(errors) if errors else 1.0,
        "ulp_histogram": [sum(e["ulp_histogram"][i] for e in errors) for i in range(len(ULP_BUCKETS))],
    }


def count_of(errors: list[dict], key: str) -> int | None:
    """The sum of a count over records; None where a record predates it (last night's, read by the nightly's
    comparison), so that a table says "-" rather than a 0 nobody counted."""
    counts = [e.get(key) for e in errors]
    return None if None in counts else sum(counts)


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


def interpreter_truncates_bf16(backend: str, categories: dict) -> bool:
    """Whether the run's bf16 figures of a Triton kernel went through the interpreter's truncating store."""
    return backend == "cpu" and any(Category.read(key).dtype == "bfloat16" for kernel, groups in categories.items()
                                    if kernel != "torch" for key in groups)
