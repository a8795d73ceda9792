"""Adding a value class or an operation touches one place (docs/extending.md): a class registered in
``strategies.VALUE_CLASSES`` alone is drawn by the strategies, made by ``Values``, listed and swept by the coverage
matrix, and replayed; an operation registered in ``specs.operations.OPERATIONS`` alone is declared, run and judged."""

import pytest
import torch
from hypothesis import find, settings

from harness.inputs import coverage, strategies
from harness.inputs.strategies import POSITIVE, Case, ValueClass, Values
from harness.judging.judge import judge_softmax
from harness.replay import parse_case
from oracles.call import Call
from specs import operations
from specs.operations import Declared
from specs.registry import Capabilities, resolve


def ramp(scale, shape, dtype, dim, g):  # each row rises evenly from 0 to the scale
    steps = torch.linspace(0, scale, shape[dim], dtype=torch.float64)
    return steps.reshape([-1 if d == dim else 1 for d in range(len(shape))]).expand(shape)


RAMP = ValueClass("ramp", ramp, POSITIVE, scales=(1.0, 8.0), sweep=(8.0,))


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(strategies.VALUE_CLASSES, RAMP.name, RAMP)


def test_the_strategies_draw_a_registered_value_class(registered):
    drawn = find(strategies.value_classes(), lambda values: values.kind == "ramp",
                 settings=settings(database=None, max_examples=2000))
    assert drawn in (Values("ramp", 1.0), Values("ramp", 8.0))


def test_values_make_it_and_check_its_scale(registered):
    x, _ = Case((2, 5), 1, torch.float32, Values("ramp", 8.0)).make()
    assert x.tolist() == [[0.0, 2.0, 4.0, 6.0, 8.0]] * 2
    with pytest.raises(ValueError, match=r"Values.scale must be a positive finite number for value class 'ramp'"):
        Values("ramp", -1.0)


def test_the_coverage_matrix_lists_it_and_its_sweep_draws_it_at_every_row_length(registered):
    capabilities, dtypes = Capabilities(ranks=frozenset({2})), (torch.float32,)
    allowed = coverage.space(capabilities, "cpu", dtypes)
    assert "ramp" in allowed.classes["values"]
    drawn = set()
    for case in coverage.sweep(capabilities, "cpu", dtypes):
        drawn |= coverage.cells_of(case, case.make()[0], ())
    ramp_cells = {cell for cell in allowed.cells() if cell[2:] == ("values", "ramp")}
    assert ramp_cells and ramp_cells <= drawn


def test_a_case_of_it_replays(registered):
    case = Case((2, 5), 1, torch.float32, Values("ramp", 8.0), seed=3)
    assert parse_case(repr(case)) == case


def test_an_unregistered_value_class_is_refused_by_name():
    with pytest.raises(ValueError, match=r"Values.kind must be one of 'normal', .*; got 'ramp'"):
        Values("ramp", 8.0)


LOG_SOFTMAX_FP32_OUT = Declared(name="log_softmax_fp32_out", log=True, out_dtype=torch.float32,
                                flags=("log_softmax", "out_dtype"), runs="log_softmax",
                                what="log_softmax with out_dtype", dtypes=(torch.float16, torch.bfloat16))


def test_a_registered_operation_is_declared_run_and_judged(monkeypatch):
    monkeypatch.setitem(operations.OPERATIONS, LOG_SOFTMAX_FP32_OUT.name, LOG_SOFTMAX_FP32_OUT)
    torch_kernel, fused = resolve("torch"), resolve("fused_softmax")
    assert torch_kernel.declares(LOG_SOFTMAX_FP32_OUT) and not fused.declares(LOG_SOFTMAX_FP32_OUT)
    x, _ = Case((4, 97), 1, torch.float16, Values("normal", 4.0), seed=1).make()
    call = Call(x, 1, LOG_SOFTMAX_FP32_OUT, "cpu")
    y = torch_kernel.run(call)
    assert y.dtype == torch.float32 and torch.equal(y, torch.log_softmax(x, 1, dtype=torch.float32))
    verdict = judge_softmax(torch_kernel, call, y, replay="here")
    assert verdict.ok and verdict.fmt.dtype == torch.float32
    assert not judge_softmax(torch_kernel, call, torch.softmax(x, 1, dtype=torch.float32), replay="here").ok
