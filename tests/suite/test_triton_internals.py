"""The private internals of Triton's interpreter the suite changes still do what harness/internals/triton_internals.py says,
and the changes cost no bit: a kernel whose helpers patch the language once, whose dtypes are looked up once and
whose sums are watched computes what it did before."""

import inspect

import pytest
import torch
import triton
import triton.language as tl

from harness.internals import triton_internals


@pytest.fixture
def interpreter(backend):
    if not backend.interpreted:
        pytest.skip(f"Triton's interpreter runs on the cpu backend; this run's is {backend.name}")
    from triton.runtime import interpreter

    return interpreter


def test_a_device_function_call_still_patches_the_language(interpreter):
    """When it no longer does, harness/internals/triton_internals.py has nothing left to do: remove it."""
    assert "_patch_lang(self.fn)" in inspect.getsource(interpreter.InterpretedFunction.__call__)


def test_the_run_patches_the_language_once_a_launch_and_restores_it_after(interpreter, monkeypatch):
    from kernels.full_softmax import host

    if getattr(interpreter.ReduceOps.apply_impl, "folds_by_slices", False):
        pytest.skip("triton-ascend's interpreter patches the language for good, and restores nothing")

    patch_once = interpreter._patch_lang
    assert getattr(patch_once, "patches_once", False), "the cpu backend did not apply the change"
    asked, patched = [], []
    original = patch_once.original
    monkeypatch.setattr(patch_once, "original", lambda fn: patched.append(fn) or original(fn))
    monkeypatch.setattr(interpreter, "_patch_lang", lambda fn: asked.append(fn) or patch_once(fn))
    host.softmax(torch.randn(3, 3000), -1)  # split rows: two launches, helpers called in every chunk
    # Patched: each launch, and a helper whose module names the language otherwise (tl.core), once.
    assert len(patched) == len(set(patched)) and len(asked) > 10 * len(patched), (len(asked), patched)
    assert tl.core.is_builtin(tl.load), "the launch left the language patched"


def test_a_dtype_is_still_looked_up_by_the_interpreters_operations(interpreter):
    """When none calls it, harness/internals/triton_internals.py has nothing left to do there: remove that change."""
    assert inspect.getsource(interpreter).count("_get_np_dtype(") > 1  # its definition, and calls


def test_each_dtype_is_looked_up_as_the_original_does(interpreter):
    import triton.language as tl

    remembered = interpreter._get_np_dtype
    assert getattr(remembered, "remembers", False), "the cpu backend did not apply the change"
    scalars = [value for value in vars(tl).values() if isinstance(value, tl.dtype) and not isinstance(value, tl.block_type)
               and value.name != "void"]
    assert len(scalars) > 15, scalars
    kinds = scalars + [tl.pointer_type(tl.float32)]
    asked = kinds + [tl.block_type(kind, [4, 8]) for kind in kinds]
    for tt_dtype in asked * 2:  # the second time from what it remembered
        assert remembered(tt_dtype) == remembered.original(tt_dtype), tt_dtype


def test_the_same_bits_with_the_interpreters_internals_as_they_were(interpreter, monkeypatch):
    from kernels.full_softmax import host

    x = (torch.randn(5, 3000, generator=torch.Generator().manual_seed(0)) * 8).to(torch.float16)
    keep = torch.rand(5, 3000, generator=torch.Generator().manual_seed(1)) > 0.3
    changed = [host.softmax(x, -1), host.log_softmax(x, -1), host.masked_softmax(x, keep, -1)]
    monkeypatch.setattr(interpreter, "_patch_lang", interpreter._patch_lang.original)
    monkeypatch.setattr(interpreter, "_get_np_dtype", interpreter._get_np_dtype.original)
    if getattr(interpreter.ReduceOps.apply_impl, "folds_by_slices", False):
        monkeypatch.setattr(interpreter.ReduceOps, "apply_impl", interpreter.ReduceOps.apply_impl.original)
    monkeypatch.setattr(interpreter.GridExecutor, "__call__", interpreter.GridExecutor.__call__.original)
    if getattr(getattr(interpreter.ReduceOps, "sum", None), "watched", False):
        monkeypatch.setattr(interpreter.ReduceOps, "sum", interpreter.ReduceOps.sum.original)
    original = [host.softmax(x, -1), host.log_softmax(x, -1), host.masked_softmax(x, keep, -1)]
    for a, b in zip(changed, original):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))


def test_each_tl_sum_still_tells_how_wide_it_is(interpreter):
    """When the interpreter sums elsewhere than ``ReduceOps.sum``, harness/device/tiling.py sees no sum: watch what does."""
    from harness.device import tiling
    from kernels import rowwise

    if getattr(interpreter.ReduceOps.apply_impl, "folds_by_slices", False):
        pytest.skip("triton-ascend's interpreter: its sums are not watched (not measured there)")
    assert getattr(interpreter.ReduceOps.sum, "watched", False), "the cpu backend did not apply the change"
    x = torch.randn(2, 300)
    tiling.starting()
    rowwise.softmax(x, -1)  # one tl.sum a row, over its block padded to 512
    tiling.ended("rowwise, unguarded", tiling.rows_of("softmax", x, -1))
    assert tiling.last("rowwise, unguarded") == (["softmax", [2, 300], 1], 512)


def test_a_launch_still_runs_its_programs_from_the_grid_executors_call(interpreter):
    """When it no longer does, the launch's frame of its own holds none of them: move it to what does."""
    assert "self.fn(**args)" in inspect.getsource(interpreter.GridExecutor.__call__.original)


def test_every_program_of_a_launch_runs_above_the_frame_that_takes_a_chunk_of_its_own(interpreter, monkeypatch):
    from kernels.full_softmax import host

    launch = interpreter.GridExecutor.__call__
    assert getattr(launch, "chunk_of_its_own", False), "the cpu backend did not apply the change"
    call = triton_internals.frame_of_its_own()
    # Larger than a 64 KiB chunk of CPython's frame stack (8-byte slots): CPython gives it one of its own.
    assert call.__code__.co_nlocals * 8 > 64 * 1024
    above = []
    set_grid_idx = interpreter.interpreter_builder.set_grid_idx

    def program_starts(*index):
        stack = inspect.stack(0)
        above.append(any(frame.function == "call" and "a frame of its own" in frame.filename for frame in stack))
        return set_grid_idx(*index)

    monkeypatch.setattr(interpreter.interpreter_builder, "set_grid_idx", program_starts)
    host.softmax(torch.randn(3, 3000), -1)  # split rows: two launches
    assert len(above) > 3 and all(above), above


@triton.jit
def _maxima(x_ptr, rows_ptr, columns_ptr, whole_ptr, ROWS: tl.constexpr, COLUMNS: tl.constexpr):
    """tl.max of a tile along each axis (the rows' kept as a column) and over all of it."""
    rows, columns = tl.arange(0, ROWS), tl.arange(0, COLUMNS)
    x = tl.load(x_ptr + rows[:, None] * COLUMNS + columns[None, :])
    tl.store(rows_ptr + rows[:, None], tl.max(x, axis=1, keep_dims=True))
    tl.store(columns_ptr + columns, tl.max(x, axis=0))
    tl.store(whole_ptr, tl.max(x))


def test_triton_ascends_max_folds_by_slices_to_the_bits_of_its_element_by_element_reduction(interpreter,
                                                                                            monkeypatch):
    folded = interpreter.ReduceOps.apply_impl
    if not getattr(folded, "folds_by_slices", False):
        pytest.skip("triton-ascend's interpreter only: upstream Triton reduces tl.max with numpy already")
    generator = torch.Generator().manual_seed(0)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, 1.0, -1e-45])
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(8, 16, generator=generator)
        x.view(-1)[torch.randperm(128, generator=generator)[:40]] = specials.repeat(5)
        x[0] = -0.0
        x[1, ::2], x[1, 1::2] = 0.0, -0.0  # signed zeros tied along a row
        x[2] = -float("inf")
        x = x.to(dtype)
        outputs = {}
        for name, apply_impl in (("folded", folded), ("element by element", folded.original)):
            monkeypatch.setattr(interpreter.ReduceOps, "apply_impl", apply_impl)
            rows, columns, whole = torch.empty(8), torch.empty(16), torch.empty(1)
            _maxima[(1,)](x, rows, columns, whole, ROWS=8, COLUMNS=16)
            outputs[name] = [t.view(torch.int32) for t in (rows, columns, whole)]
        for a, b in zip(outputs["folded"], outputs["element by element"]):
            assert torch.equal(a, b), (dtype, a, b)
