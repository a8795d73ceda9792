"""The large-input tests' builder and judge (``tests/kernel/test_large.py``) at a small size, on any device.

On a device they run past 2^31 and 2^32 elements; here, the same code past
2^14, where ``specs.mutants:offset_wrap`` wraps its offsets: its last rows,
which read rows of the start, fail and its first rows pass, while its parent
and full_softmax (every operation and dtype it has, its masks and special values
included; rowwise the backward) pass; a kernel declaring 14-bit offsets must refuse the input.
"""

from dataclasses import replace

import pytest
import torch

from kernels.rowwise import WRAP
from oracles.formats import format_of
from specs.operations import SOFTMAX, TESTED_DTYPES
from specs.registry import resolve
from tests.kernel.test_large import JUDGED_ROWS, judged_large, large_cases, shape_past


@pytest.mark.parametrize("dtype", TESTED_DTYPES, ids=lambda dtype: str(format_of(dtype)))
def test_a_kernel_whose_offsets_wrap_fails_on_its_last_rows_only(backend, dtype):
    parent, wrapping = resolve("rowwise"), resolve("specs.mutants:offset_wrap")
    shape = shape_past(parent, backend, WRAP.value)
    judged_large(parent, backend, SOFTMAX, dtype, shape).check()
    verdict = judged_large(wrapping, backend, SOFTMAX, dtype, shape)
    failed_rows = verdict.kernel.violations.any(axis=1).tolist()
    assert failed_rows == [False] * JUDGED_ROWS + [True] * JUDGED_ROWS, failed_rows


@pytest.mark.parametrize("op,dtype", large_cases())
def test_a_correct_kernel_passes_the_large_inputs_of_each_operation(backend, op, dtype):
    kernel = resolve("full_softmax") if resolve("full_softmax").declares(op) else resolve("rowwise")
    judged_large(kernel, backend, op, dtype, shape_past(kernel, backend, WRAP.value)).check()


def test_an_input_past_the_declared_offsets_is_refused_or_fails(backend):
    """rowwise declaring offsets up to 2^14 - 1: refusing the input passes, computing it all the same fails."""
    rowwise = resolve("rowwise")
    bounded = replace(rowwise.capabilities, max_offset=WRAP.value - 1)

    def refusing(x, dim):
        bounded.check(x, dim)
        return rowwise.softmax(x, dim)

    shape = shape_past(rowwise, backend, WRAP.value)
    assert judged_large(replace(rowwise, softmax=refusing, capabilities=bounded), backend, SOFTMAX, torch.float32,
                        shape) is None
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        judged_large(replace(rowwise, capabilities=bounded), backend, SOFTMAX, torch.float32, shape)
