"""A launch plan of full_softmax: which path a call takes, its tile, warps and programs."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Plan:
    """How one call runs: which path, the tile, the warps, and how many programs share a row."""

    path: str  # "single", "chunked", "split" or "cluster"
    block: int  # columns of a tile
    rows: int  # rows of a tile
    num_warps: int  # of the kernel that sums the rows (for a split row, its statistics kernel)
    splits: int = 1  # a split row: the width of the tree over its spans' sums, a power of two (the cluster
    # path: the blocks of a row's cluster, a span each, a program a cluster)
    programs: int = 1  # the grid
    write_warps: int | None = None  # a split row's write kernel, where not num_warps
    held: int = 0  # the cluster path: a span's first columns held in registers, not staged
    registers: int | None = None  # the cluster path: the most registers a thread may take (None: no limit)

    def chunks(self, n: int) -> int:
        """Tiles a program takes of a row of n, one after another (of its span, for a split row; for the cluster
        path, of a block's span of the row padded to a power of two, padding included, and its ``held`` columns
        one more, as wide as they are: specs/full_softmax.py's reduction)."""
        if self.path == "cluster":
            return (self.span(n) - self.held) // self.block + (self.held > 0)
        return max(1, math.ceil(n / (self.block * self.splits)))

    def span(self, n: int) -> int:
        """A split row's columns per program (a cluster's block's: the row padded to a power of two, over its
        blocks): whole tiles, so that no tile is cut at a span's end."""
        if self.path == "cluster":
            return (1 << (n - 1).bit_length()) // self.splits
        return self.block * self.chunks(n)

    def spans(self, n: int) -> int:
        """A split row's spans that hold columns: splits at most, fewer where the row falls short
        (a span of one whole tile rather than more spans of half-empty tiles: docs/speed.md)."""
        return math.ceil(n / self.span(n))


def split_plan(split: Plan, n: int, row_programs: int) -> Plan:
    """A split plan's programs: a task for each span holding columns, of row_programs rows at once."""
    return replace(split, programs=row_programs * split.spans(n))
