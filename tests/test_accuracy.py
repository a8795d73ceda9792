"""Every output element of every kernel against the correctly rounded oracle, over the input space.

For each kernel the inputs come from its declared capabilities; a catalog
input outside them must be refused with the error the capabilities name.
Hypothesis's target phase climbs toward the largest error-to-bound ratio and
the largest ULP error; the worst input seen is reported at the end of the run
with its replay line.
"""

from dataclasses import dataclass

import pytest
from hypothesis import example, given, target

from harness.catalog import CATALOG
from harness.judge import describe_input, judge_softmax, run_kernel
from harness.strategies import Case, cases


@dataclass
class Worst:
    """The input with the largest error-to-bound ratio seen so far."""

    ratio: float = -1.0
    line: str = "no input judged"

    def update(self, ratio: float, line: str) -> None:
        if ratio > self.ratio:
            self.ratio, self.line = ratio, line


def check(kernel, backend, case: Case, worst: Worst) -> None:
    x, mask = case.make(backend.device)
    replay = f"{case!r} -> {describe_input(x, case.dim)}"
    refusal = kernel.capabilities.refusal(x, case.dim)
    if refusal is not None:
        with pytest.raises(type(refusal)):
            run_kernel(kernel, x, case.dim, mask)
        return
    y = run_kernel(kernel, x, case.dim, mask)
    verdict = judge_softmax(kernel, backend.name, x, case.dim, y, mask=mask, replay=replay)
    summary = verdict.kernel.summary()
    target(summary["worst_ratio"], label="error-to-bound ratio")
    target(summary["max_ulp"], label="max ULP")
    worst.update(summary["worst_ratio"], f"ratio {summary['worst_ratio']:.3f}, max {summary['max_ulp']:.0f} ULP "
                                         f"(torch {verdict.peer.summary()['max_ulp']:.0f}): {replay}")
    assert verdict.ok, verdict.explain()


def with_catalog(test, *, masked: bool):
    for case in CATALOG.values():
        if (case.mask is not None) == masked:
            test = example(case=case)(test)
    return test


def test_softmax_within_derived_bound(kernel, backend, note):
    worst = Worst()

    @given(case=cases(kernel.capabilities, backend.name))
    def softmax_case(case):
        check(kernel, backend, case, worst)

    with_catalog(softmax_case, masked=False)()
    note(f"worst input: {worst.line}")


def test_masked_softmax_within_derived_bound(kernel, backend, note):
    if not kernel.capabilities.masked:
        pytest.skip(f"{kernel.name} declares no masked softmax")
    worst = Worst()

    @given(case=cases(kernel.capabilities, backend.name, masked=True))
    def masked_case(case):
        check(kernel, backend, case, worst)

    with_catalog(masked_case, masked=True)()
    note(f"worst masked input: {worst.line}")
