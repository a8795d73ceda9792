"""A judgement as the report's record: what was run, how accurate it was, and how to replay it.

The record's fields are :mod:`report.records`'; this module measures them from
the judge's :class:`~harness.judging.judge.Judgement`.  Records travel on test reports
from xdist workers to the controller (:mod:`harness.internals.payload`).
"""

from __future__ import annotations

import numpy as np
import torch

from oracles.formats import format_of
from report.records import ERROR_FIELDS, record
from report.summary import ulp_histogram

from ..inputs.strategies import Case
from .judge import Judgement, Measurement


# torch.testing.assert_close's default (rtol, atol) per dtype, the table of its documentation: its verdict without
# the message it builds on every mismatch (most of a record's cost where outputs are far from the oracle's).
DEFAULT_TOLERANCES = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5),
                      torch.float64: (1e-7, 1e-7)}


def allclose(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    """``torch.testing.assert_close(actual, expected, equal_nan=True)`` passes (``expected`` of ``actual``'s dtype)."""
    rtol, atol = DEFAULT_TOLERANCES[actual.dtype]
    return bool(torch.isclose(actual, expected, rtol, atol, equal_nan=True).all())


def error_statistics(errors: Measurement, exact: np.ndarray) -> dict:
    """Statistics of one implementation's output; ``allclose`` uses torch.testing's default tolerances."""
    stats = errors.summary()
    judged = ~errors.special
    y = errors.outputs.double().numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        absolute = np.abs(y - exact)[judged]
        relative = (absolute / np.abs(exact[judged]))[exact[judged] != 0]
    close = allclose(errors.outputs, torch.from_numpy(exact).to(errors.outputs.dtype))
    stats.update(max_abs_error=float(absolute.max(initial=0)), max_rel_error=float(relative.max(initial=0)),
                 allclose=close, ulp_histogram=ulp_histogram(errors.ulps[judged]))
    return {key: stats[key] for key in ERROR_FIELDS}


def worst_element(verdict: Judgement) -> dict | None:
    """The element a failure names (:meth:`Judgement.worst`), for the record."""
    if (worst := verdict.worst()) is None:
        return None
    errors, (row, col) = verdict.kernel, worst
    return {
        "row": row, "column": col,
        "got": float(errors.outputs[row, col]), "correctly_rounded": float(verdict.rounded[row, col]),
        "exact": float(verdict.exact[row, col]), "fractional_ulp": float(errors.fractional[row, col]),
        "bound": float(errors.bound[row, col]), "row_input_head": verdict.inputs[row, :8].double().tolist(),
    }


def make_record(kernel: str, backend, case: Case, verdict: Judgement, *, fixed: bool = False) -> dict:
    """The record of judging ``kernel`` on ``case`` (its call, the verdict's: operation and all); ``fixed``: the
    case is one of the inputs every run draws (the coverage sweep, the catalog), not one Hypothesis searched for."""
    return record(
        inputs="fixed" if fixed else "search",
        kernel=kernel,
        backend=backend.name,
        device=backend.device_name,
        op=verdict.call.operation.name,
        dtype=str(format_of(case.dtype)),
        shape=list(case.shape),
        dim=case.dim,
        row_length=case.row_length,
        layout=case.layout_kind,
        values=case.values.kind,
        specials=case.specials.kind,
        profile=verdict.kernel.profile.name,
        kernel_errors=error_statistics(verdict.kernel, verdict.exact),
        torch_errors=error_statistics(verdict.peer, verdict.exact),
        oracle_escalated=verdict.escalated,
        worst=worst_element(verdict),
        replay=verdict.replay,
    )
