"""The record of one accuracy check: what was run, how accurate it was, and how to replay it.

A record is a plain JSON-safe dict: records travel on test reports from xdist
workers to the controller and land in ``accuracy.json`` unchanged, where
:mod:`report.summary` sorts them into categories.  The harness measures a
check and hands the measurements here as fields (:mod:`harness.judging.recording`);
this module names the fields, in the order ``accuracy.json`` keeps them, and
refuses a record that lacks one or brings another.
"""

from __future__ import annotations

FIELDS = {
    "inputs": '"fixed": one of the inputs every run draws (coverage sweep, catalog); "search": one Hypothesis drew',
    "kernel": "the kernel's name",
    "backend": "cpu, cuda or npu",
    "device": "the device's name",
    "op": "the operation judged: softmax, log_softmax, masked_softmax, ...",
    "dtype": "the input's format (an fp32-out operation outputs fp32)",
    "shape": "the input's shape, a list",
    "dim": "the dimension reduced",
    "row_length": "the length of that dimension",
    "layout": "how the input lies in memory (contiguous, transposed, strided, ...)",
    "values": "the value class the input was drawn from",
    "specials": "the special values planted in it",
    "profile": "the kernel's precision profile, which its bounds were derived for",
    "kernel_errors": "the kernel's output against the oracle (ERROR_FIELDS)",
    "torch_errors": "torch's output on the same input, measured the same way (ERROR_FIELDS)",
    "oracle_escalated": "rows the oracle recomputed at a higher precision",
    "worst": "the element a failure names (row, column, got, correctly_rounded, exact, ...), or None",
    "replay": "how to rebuild the input and replay the call",
}

ERROR_FIELDS = {
    "max_ulp": "largest integer ULP distance to the correctly rounded result",
    "mean_ulp": "mean of those distances",
    "p99_ulp": "their 99th percentile",
    "correctly_rounded": "fraction of elements equal to the correctly rounded result",
    "max_fractional_ulp": "largest error to the exact result, in fractional ULPs",
    "max_abs_error": "largest absolute error to the exact result",
    "max_rel_error": "largest relative error to the exact result",
    "max_bound": "largest derived bound, in fractional ULPs",
    "worst_ratio": "largest error-to-bound ratio",
    "violations": "elements beyond their bound (or not the oracle's special value)",
    "non_finite": "elements a NaN or infinity where the exact result is finite, or the reverse",
    "special_misses": "elements whose result special values decide (NaN rows, zeros at -inf) that are not it",
    "elements": "elements measured",
    "allclose": "whether torch.testing.assert_close's default tolerances accept the output",
    "ulp_histogram": "counts of ULP distances in report.summary.ULP_BUCKETS",
}


def unlike(given, expected: dict, what: str) -> list[str]:
    missing, unknown = sorted(set(expected) - set(given)), sorted(set(given) - set(expected))
    return ([f"{what} lacks {', '.join(missing)}"] if missing else []) + \
           ([f"{what} has no field {', '.join(unknown)}"] if unknown else [])


def record(**fields) -> dict:
    """The record of one check from its fields (:data:`FIELDS`, the error statistics :data:`ERROR_FIELDS`);
    ValueError naming what is missing or unknown."""
    problems = unlike(fields, FIELDS, "a record")
    for side in ("kernel_errors", "torch_errors"):
        if isinstance(fields.get(side), dict):
            problems += unlike(fields[side], ERROR_FIELDS, side)
    if problems:
        raise ValueError("; ".join(problems))
    return {name: fields[name] for name in FIELDS}
