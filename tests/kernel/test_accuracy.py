"""Every output element of every kernel against the correctly rounded oracle, over the input space.

For each kernel the inputs come from its declared capabilities; a catalog
input outside them must be refused with the error the capabilities name.
A test judges one kernel, operation (``specs/operations.py``) and dtype (so
that no test runs for minutes on a device, where each shape costs a Triton
compile); a kernel that does not declare the operation or the dtype skips it.  It first draws
every cell of its coverage matrix that the kernel's capabilities allow
(:mod:`harness.inputs.coverage`), and fails if one stayed empty;
then Hypothesis's target phase climbs toward the largest error-to-bound ratio
and the largest ULP error; the worst input seen is reported at the end of the
run with its replay line.  The softmax tests run before the others (marked
``first``): they open with the regression catalog's inputs, so that a broken
kernel fails within a minute.
"""

from dataclasses import dataclass, field

import pytest
import torch
from hypothesis import example, given, target

from harness.inputs import coverage
from harness.inputs.catalog import CATALOG
from harness.inputs.fixed_inputs import fixed_dtype, longest_fixed_row, row_inputs
from harness.inputs.strategies import Case, for_operation, operation_cases
from harness.judging import pipeline
from harness.judging.judge import describe_input
from harness.judging.recording import make_record
from harness.plugins import timebox
from oracles.call import Call
from oracles.formats import format_of
from specs.operations import MASKED_SOFTMAX, OPERATIONS, Declared


@dataclass
class Worst:
    """Per dtype, the input with the largest error-to-bound ratio seen so far."""

    lines: dict = field(default_factory=dict)  # dtype -> (ratio, line)

    def update(self, dtype, ratio: float, line: str) -> None:
        if ratio > self.lines.get(dtype, (-1.0, ""))[0]:
            self.lines[dtype] = (ratio, line)

    def report(self, note, what: str) -> None:
        for dtype, (_, line) in sorted(self.lines.items(), key=lambda item: str(item[0])):
            note(f"worst {what} input, {dtype}: {line}")


def judge_case(kernel, backend, op: Declared, case: Case, worst: Worst, record, drawn: coverage.Drawn,
               fixed: set) -> None:
    """Run and judge one case of ``op`` (or expect its refusal), record it, and aim the search at its worst error."""
    ran, replay = pipeline.judge_case(kernel, backend, op, case)
    if ran.refusal is None:  # drawn inside the capabilities, whatever the kernel did with it
        drawn.add(case, case.make()[0] if op.backward else ran.call.x)  # a backward's cells: the forward's logits
    if ran.refusal is not None or ran.verdict is None:
        ran.check()
        return
    verdict = ran.verdict
    record(make_record(kernel.name, backend, case, verdict, fixed=case in fixed))
    summary = verdict.kernel.summary()
    target(min(summary["worst_ratio"], 1e300), label="error-to-bound ratio")  # inf: a violation, reported below
    target(min(summary["max_ulp"], 1e300), label="max ULP")
    worst.update(ran.call.x.dtype, summary["worst_ratio"],
                 f"ratio {summary['worst_ratio']:.3f}, max {summary['max_ulp']:.0f} ULP "
                 f"(torch {verdict.peer.summary()['max_ulp']:.0f}): {replay}")
    verdict.check()


def examples(kernel, backend, op: Declared, dtype) -> list[Case]:
    """The catalog's entries for this operation in ``dtype``, and the sweep of the coverage matrix in ``dtype``."""
    catalog = [c for c in CATALOG.values() if (c.mask is not None) == op.masked and c.dtype == dtype
               and not (op.backward or op.scaled)]
    # The sweep of all the op's dtypes, filtered: its variants rotate with the dtype.
    sweep = coverage.sweep(for_operation(kernel.capabilities, op), backend.name, op.dtypes, masked=op.masked,
                           backward=op.backward, scaled=op.scaled, biased=op.biased)
    return catalog + [c for c in sweep if c.dtype == dtype]


def accuracy_tests() -> list:
    """One test per operation (``specs/operations.py``) and dtype it is tested in, marked ``first`` where its entry
    says so, in the table's order."""
    return [pytest.param(op, dtype, id=f"{op.name}-{format_of(dtype)}", marks=[pytest.mark.first] if op.first else [])
            for op in OPERATIONS.values() for dtype in op.dtypes]


def run_op(kernel, backend, op: Declared, dtype, note, accuracy_record, request) -> None:
    if dtype not in kernel.capabilities.dtypes:
        pytest.skip(f"{kernel.name} declares no {format_of(dtype)}")
    worst = Worst()
    capabilities = for_operation(kernel.capabilities, op)
    drawn = coverage.Drawn(kernel, backend.name, op.name, coverage.space(capabilities, backend.name, (dtype,),
                                                                         backward=op.backward, biased=op.biased))
    fixed_inputs = examples(kernel, backend, op, dtype)
    fixed = set(fixed_inputs)

    @given(case=operation_cases(kernel.capabilities, backend.name, op, dtypes=(dtype,)))
    @timebox.timeboxed
    def one_case(case):
        judge_case(kernel, backend, op, case, worst, accuracy_record, drawn, fixed)

    for case in fixed_inputs:
        one_case = example(case=case)(one_case)
    try:
        one_case()
    finally:
        drawn.report(request.node)
    worst.report(note, op.name)
    if not timebox.in_time_box():
        missing = drawn.missing()
        assert not missing, (f"{kernel.name} {op.name}: {len(missing)} allowed cells of the coverage matrix not drawn, "
                             f"e.g. {missing[:5]}")


@pytest.mark.parametrize("op,dtype", accuracy_tests())
def test_output_within_derived_bound(kernel, backend, op, dtype, note, accuracy_record, request):
    if not kernel.declares(op):
        pytest.skip(f"{kernel.name} declares no {op.what}")
    run_op(kernel, backend, op, dtype, note, accuracy_record, request)


@pytest.mark.first
def test_masked_rows_keeping_only_nan_are_nan_on_every_path(kernel, backend):
    """A row whose kept entries are a NaN and -inf has a -inf maximum, as an empty row has (tl.max skips
    NaN), but its masked softmax is NaN: at every row length where the kernel changes code path, in a dtype
    and rank the kernel declares."""
    if not kernel.declares(MASKED_SOFTMAX):
        pytest.skip(f"{kernel.name} declares no {MASKED_SOFTMAX.what}")
    capabilities = kernel.capabilities
    limit = longest_fixed_row(capabilities, backend.name, rows=3) or 1 << 20  # three rows: no size cap needed
    lengths = sorted({n for b in capabilities.path_boundaries.get(backend.name, ()) for n in (b, b + 1)} | {2})
    lengths = [n for n in lengths if n <= limit]
    if not lengths:
        pytest.skip(f"{kernel.name} takes no rows of 2 on {backend.name}: its limits allow rows of at most {limit}")
    for n in lengths:
        x = torch.full((3, n), -1.0, dtype=fixed_dtype(capabilities), device=backend.device)
        x[:, n // 2] = torch.nan
        x[2, 0] = -torch.inf
        keep = torch.zeros(3, n, dtype=torch.bool, device=backend.device)
        keep[0, n // 2] = True  # only the NaN
        keep[1] = True  # everything, NaN included
        keep[2, [0, n // 2]] = True  # a -inf and the NaN
        for rows, kept in row_inputs(capabilities, x, keep):
            call = Call(rows, -1, MASKED_SOFTMAX, backend.name, kept)
            pipeline.run_and_judge(kernel, call, replay=f"rows of {n}: {describe_input(rows, -1)}").check()
