"""The coverage matrix at the end of a run: an accuracy test per dtype, one matrix per kernel and operation."""

from harness.inputs.coverage import Space, merged, render

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
