"""The private internal of Triton's interpreter the suite changes, behind one function here and no other place.

tests/suite/test_triton_internals.py fails when the internal disappears or
stops doing what is described below (a new Triton version); the fix then
belongs here.

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


def patch_the_language_once() -> None:
    """In this process, a ``_patch_lang`` whose modules are patched already does nothing.  Only under the
    interpreter (``TRITON_INTERPRET=1`` set before triton was imported); where a Triton version has no
    ``_patch_lang`` the runs go on as before (the suite's test of this module fails instead)."""
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

