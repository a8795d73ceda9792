"""The coverage matrix at the end of a run: an accuracy test per dtype, one matrix per kernel and operation."""

import pytest
import torch

from harness.inputs.coverage import LAYOUT_SPANS, Space, merged, render
from harness.inputs.strategies import BIAS_LAYOUTS, Bias, bias_layout, realized_layout

CLASSES = {"values": ["normal", "equal"], "layouts": ["contiguous"], "specials": ["finite"]}


def entry(op: str, dtype: str, counts: list) -> dict:
    return {"kernel": "k", "backend": "cpu", "op": op, "lengths": {dtype: ["1", "2-16"]}, "classes": CLASSES,
            "counts": counts}


def test_the_tests_of_each_dtype_join_into_one_matrix_per_operation():
    joined = merged([entry("softmax", "float32", [["float32", "1", "values", "normal", 2]]),
                     entry("log_softmax", "float32", [["float32", "1", "values", "normal", 5]]),
                     entry("softmax", "bfloat16", [["bfloat16", "2-16", "values", "equal", 3]]),
                     entry("softmax", "float32", [["float32", "1", "values", "normal", 1]])])
    assert [e["op"] for e in joined] == ["log_softmax", "softmax"]
    softmax = joined[1]
    assert list(softmax["lengths"]) == ["bfloat16", "float32"]
    assert softmax["counts"] == {("float32", "1", "values", "normal"): 3, ("bfloat16", "2-16", "values", "equal"): 3}
    title, head, *rows = render("softmax", Space(softmax["lengths"], softmax["classes"]), softmax["counts"])
    assert head.split() == ["dtype", "row", "length", "normal", "equal", "contiguous", "finite"]
    assert [row.split() for row in rows] == [["bfloat16", "1", ".", ".", ".", "."],
                                             ["bfloat16", "2-16", ".", "3", ".", "."],
                                             ["float32", "1", "3", ".", ".", "."],
                                             ["float32", "2-16", ".", ".", ".", "."]]


@pytest.mark.parametrize("layout", BIAS_LAYOUTS)
def test_a_bias_drawn_in_each_layout_has_that_layout_by_its_strides_wherever_its_shape_can_take_it(layout):
    """The "bias layouts" axis counts what the kernel was handed (read from strides), not what the recipe asked:
    a recipe that silently handed over dense biases would leave its cells empty, not filled."""
    for spans in LAYOUT_SPANS[layout]:
        bias = Bias("normal", spans, layout)
        for shape in ((3, 4, 5), (4, 6)):
            tensor = bias.sample(shape, -1, torch.float32, torch.Generator().manual_seed(0))
            assert bias_layout(tensor) == realized_layout(bias, shape, -1) == layout, (spans, shape, tensor.stride())
            dense = Bias("normal", spans).sample(shape, -1, torch.float32, torch.Generator().manual_seed(0))
            assert torch.equal(tensor, dense.expand(tensor.shape)), (spans, shape)  # the same values, laid otherwise
