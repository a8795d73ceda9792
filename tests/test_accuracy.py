"""Every output element of every kernel against the correctly rounded oracle, over the input space.

For each kernel the inputs come from its declared capabilities; a catalog
input outside them must be refused with the error the capabilities name.
Hypothesis's target phase climbs toward the largest error-to-bound ratio and
the largest ULP error; the worst input seen is reported at the end of the run
with its replay line.
"""

from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, target

from harness.catalog import CATALOG, MASKED_SWEEP, SWEEP
from harness.judge import describe_input, judge_softmax, run_kernel
from harness.strategies import Case, cases
from report.records import make_record


@dataclass
class Worst:
    """Per dtype, the input with the largest error-to-bound ratio seen so far."""

    lines: dict = field(default_factory=dict)  # dtype -> (ratio, line)

    def update(self, dtype, ratio: float, line: str) -> None:
        if ratio > self.lines.get(dtype, (-1.0, ""))[0]:
            self.lines[dtype] = (ratio, line)

    def report(self, note, what: str) -> None:
        for dtype, (_, line) in sorted(self.lines.items(), key=lambda item: str(item[0])):
            note(f"worst {what} {dtype}: {line}")


def check(kernel, backend, case: Case, worst: Worst, record) -> None:
    x, mask = case.make(backend.device)
    replay = f"{case!r} -> {describe_input(x, case.dim)}"
    refusal = kernel.capabilities.refusal(x, case.dim)
    if refusal is not None:
        with pytest.raises(type(refusal)):
            run_kernel(kernel, x, case.dim, mask)
        return
    y = run_kernel(kernel, x, case.dim, mask)
    verdict = judge_softmax(kernel, backend.name, x, case.dim, y, mask=mask, replay=replay)
    record(make_record(kernel.name, backend, case, "softmax" if mask is None else "masked_softmax", verdict))
    summary = verdict.kernel.summary()
    target(summary["worst_ratio"], label="error-to-bound ratio")
    target(summary["max_ulp"], label="max ULP")
    worst.update(x.dtype, summary["worst_ratio"], f"ratio {summary['worst_ratio']:.3f}, max {summary['max_ulp']:.0f} ULP "
                                         f"(torch {verdict.peer.summary()['max_ulp']:.0f}): {replay}")
    assert verdict.ok, verdict.explain()


def with_catalog(test, *, masked: bool):
    """The catalog's entries for this operation, and the category sweep."""
    for case in [c for c in CATALOG.values() if (c.mask is not None) == masked] + (MASKED_SWEEP if masked else SWEEP):
        test = example(case=case)(test)
    return test


def test_softmax_within_derived_bound(kernel, backend, note, accuracy_record):
    worst = Worst()

    @given(case=cases(kernel.capabilities, backend.name))
    def softmax_case(case):
        check(kernel, backend, case, worst, accuracy_record)

    with_catalog(softmax_case, masked=False)()
    worst.report(note, "input")


def test_masked_softmax_within_derived_bound(kernel, backend, note, accuracy_record):
    if not kernel.capabilities.masked:
        pytest.skip(f"{kernel.name} declares no masked softmax")
    worst = Worst()

    @given(case=cases(kernel.capabilities, backend.name, masked=True))
    def masked_case(case):
        check(kernel, backend, case, worst, accuracy_record)

    with_catalog(masked_case, masked=True)()
    worst.report(note, "masked input")
