"""The private internals of Triton's interpreter the suite changes, behind :func:`speed_up_the_interpreter` and
:func:`watch_the_sums`, and no other place.

tests/suite/test_triton_internals.py fails when an internal disappears or
stops doing what is described below (a new Triton version); the fix then
belongs here.  Each change leaves every bit a kernel computes as it was, and
applies under the interpreter only (``TRITON_INTERPRET=1`` set before triton
was imported); where a Triton version lacks its internal the runs go on as
before (the suite's test of this module fails instead).

* **A device function's call patches the language again**: under
  ``TRITON_INTERPRET=1`` a kernel's launch patches ``triton.language`` (each
  builtin made to compute with numpy) with ``interpreter._patch_lang``, and
  restores it when the launch ends; every call of a ``@triton.jit`` helper
  inside the kernel (``InterpretedFunction.__call__``) calls ``_patch_lang``
  again, which walks the language's modules with ``inspect.getmembers`` (about
  a millisecond and a half) to patch nothing new: each builtin is patched
  already.  A kernel that calls helpers in its loops spends a third of its time
  there (docs/timings.md).  :func:`patch_the_language_once` makes a call whose
  language modules are patched already skip it; a launch's own patching, and
  its restore, are unchanged.  Triton 3.9 restores after each launch; the
  triton-ascend interpreter (3.2) patches once and never restores, and its
  launches after the first then skip too.
* **Every operation builds a table of numpy dtypes**: the interpreter's
  ``_get_np_dtype``, called for most operations of every program, builds a
  dict of the nineteen Triton dtypes each time it is called (about 20
  microseconds; a fifth of an interpreted softmax's time: docs/timings.md).
  :func:`look_up_numpy_dtypes_once` remembers its answer for each dtype, by the
  name the table's keys compare by; pointers, and blocks of them, still take
  the original.
* **triton-ascend's ``tl.max`` is reduced one element at a time**: its
  ``tl.max`` folds ``_elementwise_max_default`` (``triton_patch``), which the
  interpreter's ``ReduceOps.apply_impl`` does not know, so it takes
  ``generic_reduce``: for every element, the combine function through Triton's
  semantics, whose maximum is ``np.maximum`` (NaN propagated).  A row max of
  1024 elements costs about 65 ms, most of an interpreted softmax's time there
  (docs/timings.md).  :func:`fold_ascend_max_by_slices` folds the same
  ``np.maximum`` in the same order along the axis, a slice of every row at a
  time: the same bits, signed zeros and NaNs included.  Upstream Triton reduces
  its ``tl.max`` with numpy already and has no ``triton_patch``: nothing to do.
* **A launch's frames cross a chunk of CPython's frame stack**: CPython 3.11
  and later keep frames on a stack of 16 KiB chunks, map a chunk (``mmap``)
  when a call does not fit the last one and unmap it as soon as that call
  returns.  Where an interpreted kernel's calls, made a million times, start
  near a chunk's end, each maps and unmaps one: a fifth of such a test's
  time in the kernel's system calls (docs/timings.md), depending on how deep
  the test calls the kernel.  :func:`launch_in_a_chunk_of_its_own` calls
  ``GridExecutor.__call__`` through a frame too large for any chunk's rest
  (``LAUNCH_FRAME_SLOTS`` local variables), which CPython places at the start
  of a chunk of its own, 128 KiB, where the launch's calls find room for
  about 7,800 more slots: one map and unmap a launch.  The launch itself is
  unchanged.
* **How wide each ``tl.sum`` is**: the interpreter computes ``tl.sum`` (a
  reduction by ``_sum_combine``) in ``ReduceOps.sum``, one numpy sum over the
  axis.  :func:`watch_the_sums` tells a callback that axis's length (every
  element's count for a sum over all axes) before each: whether one ``tl.sum``
  spanned a row, or the row was summed in tiles (:mod:`harness.device.tiling`).  The
  sum is unchanged.
"""

from __future__ import annotations

_PATCHED: set[int] = set()  # ids of the language modules patched now


class _Unpatched:
    """What a skipped patching returns: nothing to restore."""

    def restore(self) -> None:
        pass


def language_modules(fn) -> set[int]:
    """The language modules ``_patch_lang`` patches for ``fn``: ``triton.language`` and ``triton.language.core``
    where ``fn``'s globals name them."""
    import triton.language as tl

    return {id(value) for value in fn.__globals__.values() if value is tl or value is tl.core}


def speed_up_the_interpreter() -> None:
    """The changes, in this process."""
    patch_the_language_once()
    look_up_numpy_dtypes_once()
    fold_ascend_max_by_slices()
    launch_in_a_chunk_of_its_own()


def patch_the_language_once() -> None:
    """In this process, a ``_patch_lang`` whose modules are patched already does nothing."""
    from triton.runtime import interpreter

    patch = getattr(interpreter, "_patch_lang", None)
    if patch is None or getattr(patch, "patches_once", False):
        return

    def patch_once(fn):
        modules = language_modules(fn)
        if modules and modules <= _PATCHED:
            return _Unpatched()
        scope = patch_once.original(fn)
        _PATCHED.update(modules)
        if scope is None:  # triton-ascend: patched for good
            return None
        restore = scope.restore

        def restore_and_forget() -> None:
            restore()
            _PATCHED.difference_update(modules)

        scope.restore = restore_and_forget
        return scope

    patch_once.patches_once = True
    patch_once.original = patch
    interpreter._patch_lang = patch_once


def look_up_numpy_dtypes_once() -> None:
    """In this process, ``_get_np_dtype`` answers each dtype it was asked before from what it answered then."""
    import triton.language as tl
    from triton.runtime import interpreter

    original = getattr(interpreter, "_get_np_dtype", None)
    if original is None or getattr(original, "remembers", False):
        return
    answers = {}

    def remembered(tt_dtype):
        element = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        if isinstance(element, tl.pointer_type):
            return original(tt_dtype)
        answer = answers.get(element.name)
        if answer is None:
            answer = answers[element.name] = original(element)
        return answer

    remembered.remembers = True
    remembered.original = original
    interpreter._get_np_dtype = remembered


def fold_ascend_max_by_slices() -> None:
    """In this process, a reduction by triton-ascend's ``_elementwise_max_default`` of one tensor folds
    ``np.maximum`` over whole slices along the axis, in the order ``generic_reduce`` takes the elements."""
    import numpy as np
    from triton.runtime import interpreter

    try:
        from triton.triton_patch.language.standard import _elementwise_max_default
    except ImportError:  # upstream Triton
        return
    reduce_ops = getattr(interpreter, "ReduceOps", None)
    original = getattr(reduce_ops, "apply_impl", None)
    if original is None or getattr(original, "folds_by_slices", False):
        return
    maximum = getattr(_elementwise_max_default, "fn", _elementwise_max_default)

    def apply_impl(self, input):
        if len(input) != 1 or getattr(self.combine_fn, "fn", self.combine_fn) is not maximum:
            return original(self, input)
        data, axis = input[0].handle.data, self.axis
        if axis is None:
            data, axis = data.reshape(-1), 0
        folded = np.take(data, 0, axis=axis)
        for i in range(1, data.shape[axis]):
            folded = np.maximum(folded, np.take(data, i, axis=axis))
        folded = np.asarray(folded, dtype=data.dtype)
        if self.keep_dims:
            folded = np.expand_dims(folded, axis) if self.axis is not None else folded.reshape((1,) * data.ndim)
        elif self.axis is None:
            folded = folded.item()
        return self.to_tensor(folded, input[0].dtype)

    apply_impl.folds_by_slices = True
    apply_impl.original = original
    reduce_ops.apply_impl = apply_impl


# A frame of this many slots (8 bytes each, 68 KB) fits no chunk of 64 KiB, so CPython gives it one of 128 KiB: a
# fresh chunk whatever is left of the current one, with about 7,800 slots above the frame for the launch's calls.
LAUNCH_FRAME_SLOTS = 8500


def frame_of_its_own(slots: int = LAUNCH_FRAME_SLOTS):
    """``call(function, *args, **kwargs)``, whose frame holds ``slots`` local variables (never assigned)."""
    names = " = ".join(f"_{i}" for i in range(slots))
    source = (f"def call(function, *args, **kwargs):\n"
              f"    if False:\n        {names} = None\n"
              f"    return function(*args, **kwargs)\n")
    scope: dict = {}
    exec(compile(source, "<harness.internals.triton_internals: a frame of its own>", "exec"), scope)
    return scope["call"]


def launch_in_a_chunk_of_its_own() -> None:
    """In this process, each interpreted launch runs from a frame that starts a chunk of the frame stack."""
    from triton.runtime import interpreter

    executor = getattr(interpreter, "GridExecutor", None)
    original = getattr(executor, "__call__", None)
    if original is None or getattr(original, "chunk_of_its_own", False):
        return
    call = frame_of_its_own()

    def launch(self, *args, **kwargs):
        return call(original, self, *args, **kwargs)

    launch.chunk_of_its_own = True
    launch.original = original
    executor.__call__ = launch


def watch_the_sums(seen) -> None:
    """In this process, each ``tl.sum`` of an interpreted kernel calls ``seen(width)`` first, ``width`` the length of
    the axis it sums (the element count of a sum over every axis)."""
    from triton.runtime import interpreter

    reduce_ops = getattr(interpreter, "ReduceOps", None)
    original = getattr(reduce_ops, "sum", None)
    if original is None or getattr(original, "watched", False):
        return

    def watched(self, input):
        data = input.handle.data
        seen(int(data.size if self.axis is None else data.shape[self.axis]))
        return original(self, input)

    watched.watched = True
    watched.original = original
    reduce_ops.sum = watched
