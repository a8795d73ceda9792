"""Special values at the seams of a tiled kernel's rows: where its tiles begin and end, as data.

Kernel bugs live at seams: a tile that is entirely -inf, the first or the last tile of a row, a mask that ends a
row, a lone NaN the kernel's first tile never sees.  Special values placed at random entries almost never fill a
whole tile, so each placement here puts them exactly there, relative to a tile length: every code-path boundary
the kernel declares, and the powers of two that kernels tile by when they declare none (:func:`tiles`).

A placement is one record (:data:`PLACEMENTS`): the row length it is drawn at for a tile, the columns of each row
it sets and the value it puts there, the bug it is there for.  Row-varying placements (heads of several lengths,
a causal mask's rows) cycle through their variants row by row.  The placements of -inf that are also mask
structures (causal, sliding window, key padding...) are drawn as -inf logits for softmax and log_softmax and as
keep-masks for masked softmax (:class:`Seam`'s ``as_mask``).  The strategies (``harness/inputs/strategies.py``), the
coverage matrix's seams axis and its sweep (``harness/inputs/coverage.py``) read these definitions: a new placement
touches this file only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

NEG_INF, POS_INF, NAN = -math.inf, math.inf, math.nan
SMALLEST_TILE = 16
# The largest undeclared tile, per backend: on the CPU its seams' rows stay within the row cap but for a tile of
# 4096 declared; on devices 16384 (undeclared tiles of 65536 draw rows of 131074, which double a device gate's
# time: docs/timings.md).  A kernel tiling by more declares its tile as a code-path boundary.
LARGEST_TILE = {"cpu": 4096, "cuda": 16384, "npu": 16384}


def _run(start: int, stop: int) -> np.ndarray:
    return np.arange(max(start, 0), max(stop, 0))


def _cycle(choices: Callable[[int, int], tuple[int, ...]], columns: Callable[[int, int, int], np.ndarray]):
    """Columns of row r from the ``r``-th of a row-varying placement's variants (``choices(n, tile)``)."""

    def place(r: int, n: int, t: int) -> np.ndarray:
        options = [c for c in choices(n, t) if 0 <= c < n] or [0]
        return columns(options[r % len(options)], n, t)

    return place


def _heads(n: int, t: int) -> tuple[int, ...]:
    return t - 1, t + 1, 2 * t - 1, 2 * t + 1


@dataclass(frozen=True)
class Placement:
    """One placement of special values at the seams of a row, the one place it is defined."""

    name: str
    value: float  # what it puts into the logits: -inf, NaN or +inf
    length: Callable[[int], int]  # tile -> the row length it is drawn at (past one tile, so that tiles follow)
    columns: Callable[[int, int, int], np.ndarray]  # (row r, row length n, tile t) -> the columns of row r it sets
    structure: bool = False  # a mask's structure too: drawn as a keep-mask (masking those columns) for masked softmax

    def where(self, rows: int, n: int, tile: int) -> np.ndarray:
        """The entries it sets in ``rows`` rows of ``n``, as a boolean array."""
        chosen = np.zeros((rows, n), dtype=bool)
        for r in range(rows):
            columns = self.columns(r, n, tile)
            chosen[r, columns[columns < n]] = True  # a row shorter than the placement's holds what fits
        return chosen


PLACEMENTS = {p.name: p for p in (
    # An online softmax whose running max starts at -inf: a whole first tile of -inf makes its rescale
    # exp(m_old - m_new) = exp(-inf + inf) = NaN, and the row NaN.
    Placement("first tile -inf", NEG_INF, lambda t: t + 1, lambda r, n, t: _run(0, t)),
    # A kernel that walks its tiles from the row's end (causal attention's last keys) meets this one first.
    Placement("last tile -inf", NEG_INF, lambda t: 2 * t, lambda r, n, t: _run(n - t, n)),
    # A -inf tile between finite ones: its max (-inf) must not reset the running max or sum.
    Placement("middle tile -inf", NEG_INF, lambda t: 2 * t + 1, lambda r, n, t: _run(t, 2 * t)),
    # Every tile -inf but one element: alone in the last, partial tile, or first of the second tile.
    Placement("all -inf but one", NEG_INF, lambda t: 2 * t + 1,
              _cycle(lambda n, t: (n - 1, t), lambda keep, n, t: np.delete(np.arange(n), keep))),
    # -inf heads and tails a tile plus or minus one long: off-by-one tile bookkeeping (tiles skipped as "all
    # -inf" one too early or too late).
    Placement("-inf heads kt±1", NEG_INF, lambda t: 2 * t + 2, _cycle(_heads, lambda h, n, t: _run(0, h))),
    Placement("-inf tails kt±1", NEG_INF, lambda t: 2 * t + 2, _cycle(_heads, lambda h, n, t: _run(n - h, n))),
    # A lone special value at a tile's last or first element, past the first tile, at the row's end: a kernel
    # checking for NaN (or taking its max) in the first tile only misses it.
    *(Placement(f"lone {label} at seams", value, lambda t: 2 * t, _cycle(positions, lambda c, n, t: np.array([c])))
      for label, value, positions in (("NaN", NAN, lambda n, t: (t - 1, t, t + t // 2, n - 1)),
                                      ("+inf", POS_INF, lambda n, t: (t, n - 1)),
                                      ("-inf", NEG_INF, lambda n, t: (t - 1, t + t // 2)))),
    # Masks as attention kernels build them, each masking whole tiles somewhere: causal (row r is the query at
    # one of the positions listed, keys after it masked: -inf tails of every length), a sliding window of one
    # tile (heads and tails), key padding (the last tile and one more masked for every row: a mask ending the
    # row), left padding (the first tile and one more), block-sparse (every other tile), fully masked rows.
    Placement("causal", NEG_INF, lambda t: 2 * t + 1,
              _cycle(lambda n, t: (0, t - 1, 2 * t - 1), lambda q, n, t: _run(q + 1, n)), structure=True),
    Placement("sliding window", NEG_INF, lambda t: 2 * t + 1,
              _cycle(lambda n, t: (t - 1, t, 2 * t - 1, 2 * t),
                     lambda q, n, t: np.concatenate([_run(0, q - t + 1), _run(q + 1, n)])), structure=True),
    Placement("key padding", NEG_INF, lambda t: 2 * t + 1, lambda r, n, t: _run(t, n), structure=True),
    Placement("left padding", NEG_INF, lambda t: 2 * t + 1, lambda r, n, t: _run(0, t + 1), structure=True),
    Placement("block-sparse", NEG_INF, lambda t: 2 * t + 1,
              lambda r, n, t: np.concatenate([_run(k, min(k + t, n)) for k in range((r % 2) * t, n, 2 * t)]),
              structure=True),
    Placement("fully masked rows", NEG_INF, lambda t: t + 1,
              lambda r, n, t: _run(0, n) if r % 2 else _run(0, 0), structure=True),
)}
"""Every placement, in the order the coverage matrix lists them."""


def placement(name: str) -> Placement:
    """The placement ``name``; ValueError naming it and the known ones if there is none."""
    if name not in PLACEMENTS:
        raise ValueError(f"Seam.placement must be one of {', '.join(map(repr, PLACEMENTS))}; got {name!r}")
    return PLACEMENTS[name]


def variants(p: Placement) -> int:
    """How many rows it takes to show every variant of a placement (1 for a placement the same on every row)."""
    probe = 64  # a tile where every variant's column differs
    rows = [tuple(p.columns(r, p.length(probe), probe)) for r in range(8)]
    return len(set(rows))


@dataclass(frozen=True)
class Seam:
    """Special values at the seams of every row of a case: placement ``placement`` relative to tiles of ``tile``."""

    placement: str
    tile: int

    def __post_init__(self) -> None:
        placement(self.placement)
        if isinstance(self.tile, bool) or not isinstance(self.tile, int) or self.tile < 1:
            raise ValueError(f"Seam.tile must be a positive int; got {self.tile!r}")

    @property
    def row_length(self) -> int:
        return PLACEMENTS[self.placement].length(self.tile)

    def where(self, shape: tuple[int, ...], dim: int) -> torch.Tensor:
        """The entries of a tensor of ``shape`` the placement sets, row by row along ``dim`` (a bool tensor)."""
        n = shape[dim]
        moved = (*shape[:dim], *shape[dim + 1:], n)
        rows = math.prod(moved[:-1])
        chosen = torch.from_numpy(PLACEMENTS[self.placement].where(rows, n, self.tile)).reshape(moved)
        return chosen.movedim(-1, dim)

    def apply(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        """``x`` with the placement's value at its entries."""
        if not x.numel():
            return x
        return x.masked_fill(self.where(tuple(x.shape), dim), PLACEMENTS[self.placement].value)

    def keep(self, shape: tuple[int, ...], dim: int) -> torch.Tensor:
        """A keep-mask masking the placement's entries (a structure's: causal, padding...)."""
        if not PLACEMENTS[self.placement].structure:
            raise ValueError(f"Seam.placement {self.placement!r} is no mask structure; structures: "
                             f"{', '.join(name for name, p in PLACEMENTS.items() if p.structure)}")
        return ~self.where(shape, dim)


def tiles(declared: tuple[int, ...], backend: str) -> tuple[int, ...]:
    """The tile lengths seams are placed at: every declared code-path boundary, and the powers of four from
    SMALLEST_TILE to the backend's LARGEST_TILE for kernels that tile by a power of two and declare none (the
    seams of tiles of 2t are seams of tiles of t: a first tile of 2t -inf is two whole tiles of t)."""
    return tuple(sorted({*declared, *POWERS[backend]}))


POWERS = {backend: tuple(1 << k for k in range(SMALLEST_TILE.bit_length() - 1, largest.bit_length(), 2))
          for backend, largest in LARGEST_TILE.items()}
