"""The special-case table of :mod:`oracles.semantics` against torch on float64 rows, one test id per rule."""

import numpy as np
import pytest
import torch

from oracles import semantics


def cases_of(rule: semantics.Rule) -> np.ndarray:
    """The rule's example row and the same row reversed."""
    row = np.array(rule.example, dtype=np.float64)
    return np.stack([row, row[::-1]])


@pytest.mark.parametrize("rule", semantics.RULES, ids=lambda rule: rule.name)
def test_each_rule_agrees_with_torch_on_float64_rows(rule):
    rows = cases_of(rule)
    x = torch.from_numpy(rows)
    for expected, log, masked in ((torch.softmax(x, -1), False, False), (torch.log_softmax(x, -1), True, False),
                                  (torch._safe_softmax(x, -1), False, True)):  # masked: x is the masked row
        decided, results = semantics.decide(rows, log=log, masked=masked)
        assert decided.any()
        np.testing.assert_array_equal(results[decided], expected.numpy()[decided])


@pytest.mark.parametrize("rule", semantics.RULES, ids=lambda rule: rule.name)
def test_each_rule_s_example_is_a_case_of_it_and_of_no_earlier_rule(rule):
    for row in cases_of(rule):
        assert semantics.rule_of(row) is rule


def test_a_row_follows_the_first_rule_that_holds():
    rows = np.array([[np.nan, np.inf, -np.inf], [np.inf, -np.inf, 0.0], [-np.inf, -np.inf, 1.0], [0.0, 1.0, 2.0]])
    assert [getattr(semantics.rule_of(row), "name", None) for row in rows] == ["nan", "+inf", "-inf", None]
    decided, results = semantics.decide(rows, log=True)
    np.testing.assert_array_equal(decided, [[True] * 3, [True] * 3, [True, True, False], [False] * 3])
    np.testing.assert_array_equal(results[2, :2], [-np.inf, -np.inf])
    assert np.isnan(results[:2]).all()


def test_empty_rows_need_no_rule_and_no_arithmetic():
    rows = np.empty((3, 0))
    assert semantics.decided_rows(rows).all()
    assert all(not rule.holds(rows).any() for rule in semantics.RULES)


def test_masked_is_defined_for_softmax_only():
    with pytest.raises(ValueError, match="masked"):
        semantics.RULES[0].result(log=True, masked=True)
