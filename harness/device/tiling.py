"""A kernel that sums its rows in tiles while its precision model declares one tile: warned.

A tiled kernel (a row in tiles, their sums folded, as an online softmax or
flash attention does) declares its tile and its reduction, as specs/online.py
does (README, "Declare what your kernel handles"): ``path_boundaries`` at its
tile in its capabilities, and ``Reduction(..., block=TILE, chunks=tiles)`` in
its precision model.  Declared with one tile's reduction, it is judged by a
bound tighter than its arithmetic allows on long rows; without its tile, its
seams are drawn at the powers of four the suite tries for every kernel.
Neither fails a test by itself, so the suite says so.

Under Triton's interpreter each ``tl.sum`` tells how wide it is
(:func:`harness.internals.triton_internals.watch_the_sums`).  The guard of each call
(:mod:`harness.guard.calls`, in the process the kernel runs in) notes the call's
widest sum beside the rows it normalised, and a kernel process sends that
note with its result (:mod:`harness.guard.host`).  A call whose widest sum is
narrower than its rows summed them in pieces: no one ``tl.sum`` spanned a
row.  The judge of that call (:func:`harness.judging.judge.judge_softmax`) then warns,
once per kernel and process, where the kernel's precision model declares one
``tl.sum`` over the whole row for it (:func:`one_tile`).

It speaks only where it is sure: a kernel summing a row with one ``tl.sum``
has one as wide as the row (its padded block), which a one-tile reduction
declares.  It is silent where it cannot see: compiled kernels (GPUs), kernels
with no ``tl.sum`` (torch, a CUDA extension, a custom ``tl.reduce``), and a
model of any order of additions (``sequential``), which bounds a sum in tiles
too.
"""

from __future__ import annotations

import warnings

import torch

from oracles.bounds import Reduction
from oracles.call import Call

GUIDE = "specs/online.py and the README's \"Declare what your kernel handles\""


class OneTileDeclared(UserWarning):
    """A kernel sums its rows in tiles, and its precision model declares one tile for them."""


_widest = 0  # the widest tl.sum of the kernel call running in this process
_last: dict[str, tuple[list, int]] = {}  # kernel -> (rows_of its last call seen here, that call's widest tl.sum)
_warned: set[str] = set()  # kernels warned in this process


def rows_of(operation: str, x: torch.Tensor, dim: int) -> list | None:
    """Which rows a call normalises, as its guard and its judge both name them: its operation, its input's shape
    (a backward's gradient's is its y's) and the dim; None for a dim the input does not have."""
    rank = max(x.dim(), 1)
    return [operation, list(x.shape), dim % rank] if -rank <= dim < rank else None


def saw_sum(width: int) -> None:
    """A ``tl.sum`` over ``width`` elements ran (:func:`harness.internals.triton_internals.watch_the_sums` calls this)."""
    global _widest
    _widest = max(_widest, width)


def starting() -> None:
    """A kernel call starts: its sums are counted afresh."""
    global _widest
    _widest = 0


def ended(kernel: str, rows: list | None) -> None:
    """``kernel``'s call on ``rows`` (:func:`rows_of`) returned: its widest sum is noted for its judge."""
    note(kernel, (rows, _widest))


def note(kernel: str, sums) -> None:
    """``sums``, the rows of ``kernel``'s last call and its widest tl.sum, as a kernel process may send it: a pair of
    :func:`rows_of` and an int; anything else (what a kernel's process sent in its place) tells nothing."""
    if (isinstance(sums, (tuple, list)) and len(sums) == 2 and type(sums[1]) is int
            and isinstance(sums[0], list) and len(sums[0]) == 3 and isinstance(sums[0][0], str)
            and isinstance(sums[0][1], list) and all(type(n) is int for n in sums[0][1]) and type(sums[0][2]) is int):
        _last[kernel] = (sums[0], sums[1])
    else:
        _last.pop(kernel, None)


def last(kernel: str) -> tuple[list, int] | None:
    """The rows of ``kernel``'s last call seen in this process and its widest tl.sum, if any."""
    return _last.get(kernel)


def one_tile(reduction: Reduction, n: int) -> bool:
    """Whether ``reduction`` sums a row of ``n`` with one ``tl.sum`` over one tile: a block reduction of one chunk
    and one span, its tile the whole row (the row padded, or a block at least as long)."""
    return (reduction.kind != "sequential" and reduction.chunks == 1 and reduction.spans == 1
            and (reduction.block is None or reduction.block >= n))


def check(kernel: str, call: Call, reduction: Reduction, boundaries: tuple[int, ...]) -> None:
    """Warn (:class:`OneTileDeclared`, once per kernel) where ``kernel``'s last call, ``call``, summed its rows in
    pieces while ``reduction``, its declared reduction for that call, is one tile; ``boundaries``: the code-path
    boundaries its capabilities declare on the call's backend."""
    seen = last(kernel)
    if kernel in _warned or seen is None or seen[0] != rows_of(call.operation.name, call.x, call.dim):
        return
    n, widest = call.row_length, seen[1]
    if 0 < widest < n and one_tile(reduction, n):
        _warned.add(kernel)
        warnings.warn(OneTileDeclared(message(kernel, call, reduction, widest, boundaries)), stacklevel=3)


def message(kernel: str, call: Call, reduction: Reduction, widest: int, boundaries: tuple[int, ...]) -> str:
    """What the warning says: what was seen, what was declared, and the declaration to add."""
    n, backend = call.row_length, call.backend
    tile = "" if boundaries else f"path_boundaries={{{backend!r}: (TILE,)}} in its capabilities and "
    return (f"{kernel} summed rows of {n} in pieces (its widest tl.sum of the {call.operation.name} call was "
            f"{widest} wide), but its precision model declares one tile for them ({reduction}): its bounds are "
            f"tighter than a sum in tiles allows on long rows. A tiled kernel declares {tile}"
            f"Reduction(..., block=TILE, chunks=tiles) in its precision, TILE its tile ({widest}, if its tiles are "
            f"its widest sums), as {GUIDE} show")
