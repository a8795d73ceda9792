"""The coverage matrix of the accuracy tests: which cells of the input space a test drew, and a sweep that draws all.

The axes: dtype; row length, in bands (1, 2-16, 17-256, 257-1024, 1025-4096,
longer) and on each side of every code-path boundary the kernel declares on the
backend (b - 1 and b + 1); value class; layout class; special-value class.  A
*cell* joins a dtype and a row-length cell with one class of one of the three
other axes: every value class, layout and special class is drawn at every dtype
and row length.  (The five-way product, some 10^4 cells per kernel and test,
would cost more than the whole gate; these faces hold every combination of a
class with dtype and row length, where kernels change code path.)

The placement axis (:mod:`harness.inputs.seams`) has its own rows: a seam cell joins a
dtype, a tile (every declared code-path boundary, where rows go past the row cap,
and the powers of two kernels tile by, within it) and a placement of special
values at that tile's seams, wherever the placement's row fits.  The sweep
draws each placement with ordinary logits or with logits far below zero (exp
underflows beside the -inf runs), in turn from tile to tile.  Declaring a
boundary only adds cells.

A cell is *allowed* when the kernel's capabilities and the backend's size caps
admit an input in it.  :func:`sweep` gives, per dtype and row-length cell, one
case per class of the longest class axis, each also taking a class of the two
others, so a test that runs it as explicit examples draws every allowed cell
before Hypothesis spends its budget on random draws.  Cells are read from the
generated input, not from the recipe: a -inf class counts only if the tensor
holds a -inf.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
import torch

from oracles.formats import format_of
from specs.registry import Capabilities

from ..internals import payload
from .seams import PLACEMENTS, Seam, variants
from .strategies import (ALL_KEPT, ATTENTION_SCALES, BIAS_KINDS, BIAS_LAYOUTS, BIAS_SPANS, FINITE, LAYOUT_CLASSES,
                         NO_SPECIALS, SIZE_CAPS, SPECIAL_CLASSES, VALUE_CLASSES, Bias, Case, Mask, SizeCaps, Specials,
                         Values, interesting_lengths, layout_of_kind, longest_row, longest_seam_row, realized_layout,
                         seam_rows, usable_dtypes)

BANDS = ((1, 1), (2, 16), (17, 256), (257, 1024), (1025, 4096), (4097, math.inf))
# Every kind of bias in every layout in turn, each layout over the spans it shows on (a bias of one row is dense
# however it is laid, and a full one cannot be expanded): the layouts cycle fastest, so that every row length draws
# each.
LAYOUT_SPANS = {"contiguous": BIAS_SPANS, "padded": ("full",), "transposed": ("full",),
                "expanded": ("row", "all_but_first")}
BIAS_CHOICES = tuple(Bias(kind, LAYOUT_SPANS[layout][k % len(LAYOUT_SPANS[layout])], layout)
                     for k, kind in enumerate(BIAS_KINDS) for layout in BIAS_LAYOUTS)
BIAS_LAYOUT_AXIS = "bias layouts"  # a biased softmax's axis: its bias's layout class (harness.inputs.strategies)
# (row-length cell, axis, class) that no input can hold: a bias over rows of one element is dense however its last
# two dims are swapped, so no transposed one exists there.
NO_SUCH_CELLS = {("1", BIAS_LAYOUT_AXIS, "transposed")}
# Each special-value class with the recipe that places it alone.
SPECIAL_RECIPES = {FINITE: NO_SPECIALS, **{c.name: Specials(**{c.field: c.share}) for c in SPECIAL_CLASSES}}
COVERAGE = "coverage"  # the payload kind
SWEEP_ELEMENTS = 2048  # a sweep case's size, past two rows: cells, not bulk, are what it is for
SEAMS = "seams"  # the placement axis
GRADIENT_LAYOUTS = "gradient layouts"  # a backward's axis: its gradient's own layout (autograd hands kernels any)
# The logits a seam is drawn with: ordinary ones, and ones far below zero whose exp underflows (a running max
# clamped to 0 after a -inf tile then sums zeros: flash-attention issue 2082).
SEAM_VALUES = (Values("normal", 4.0), Values("far-below", 1e4))


def tile_label(tile: int) -> str:
    return f"tile {tile}"


def band_label(lo: int, hi: float) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}" if hi != math.inf else f">{lo - 1}"


def beside(boundaries) -> list[tuple[str, int]]:
    """The cells on each side of each code-path boundary, with their row length: ("1024-1", 1023), ("1024+1", 1025)."""
    return [(f"{b}{side}", b + step) for b in boundaries for side, step in (("-1", -1), ("+1", 1))]


def length_cells(n: int, boundaries) -> list[str]:
    """The row-length cells of a row of ``n``: its band, and the side of a boundary it sits just beside."""
    return [band_label(lo, hi) for lo, hi in BANDS if lo <= n <= hi] + [c for c, m in beside(boundaries) if n == m]


def special_classes(x: torch.Tensor, dim: int, specials: Specials) -> set[str]:
    """The special-value classes the input really holds."""
    x = x.detach().to("cpu", torch.float64)
    rows = (x.movedim(dim, -1).reshape(-1, x.shape[dim]) if x.dim() else x.reshape(1, 1)).numpy()
    if not rows.size:
        return set()
    found = {c.name for c in SPECIAL_CLASSES if c.found(rows, specials)}
    return found | {FINITE} if np.isfinite(rows).all() else found


def cells_of(case: Case, x: torch.Tensor, boundaries) -> set[tuple[str, str, str, str]]:
    """The cells (dtype, row-length cell, axis, class) an input drew; a seam's as (dtype, tile, "seams", placement)."""
    dtype = str(format_of(case.dtype))
    classes = {("values", case.values.kind), ("layouts", case.layout_kind)}
    if case.grad is not None:
        classes.add((GRADIENT_LAYOUTS, case.grad_layout_kind))
    if case.bias is not None:
        classes.add((BIAS_LAYOUT_AXIS, realized_layout(case.bias, case.shape, case.dim)))
    classes |= {("specials", name) for name in special_classes(x, case.dim, case.specials)}
    cells = {(dtype, length, axis, name) for length in length_cells(case.row_length, boundaries)
             for axis, name in classes}
    seam = case.seam_placed
    if seam is not None and case.row_length >= seam.row_length:
        cells.add((dtype, tile_label(seam.tile), SEAMS, seam.placement))
    return cells


@dataclass(frozen=True)
class Space:
    """The cells one kernel's accuracy test may draw for one operation on one backend."""

    lengths: dict  # dtype label -> its allowed row-length cells
    classes: dict  # axis -> its allowed classes
    seams: dict = field(default_factory=dict)  # dtype label -> its allowed [tile label, placement] pairs

    def cells(self) -> set[tuple[str, str, str, str]]:
        cells = {(dtype, length, axis, name) for dtype, lengths in self.lengths.items() for length in lengths
                 for axis, names in self.classes.items() for name in names}
        cells = {cell for cell in cells if cell[1:] not in NO_SUCH_CELLS}
        return cells | {(dtype, tile, SEAMS, name) for dtype, pairs in self.seams.items() for tile, name in pairs}


class Drawn:
    """The cells one accuracy test drew, counted, against the cells it may draw."""

    def __init__(self, kernel, backend: str, op: str, allowed: Space) -> None:
        self.kernel, self.backend, self.op, self.allowed = kernel, backend, op, allowed
        self.boundaries = kernel.capabilities.path_boundaries.get(backend, ())
        self.counts: Counter = Counter()

    def add(self, case: Case, x: torch.Tensor) -> None:
        self.counts.update(cells_of(case, x, self.boundaries))

    def missing(self) -> list[tuple[str, str, str, str]]:
        return sorted(self.allowed.cells() - set(self.counts))

    def report(self, item: pytest.Item) -> None:
        """Send the counts to the end of the run (they ride on the test's report, across xdist)."""
        payload.add(item, COVERAGE, {
            "kernel": self.kernel.name, "backend": self.backend, "op": self.op,
            "declared": self.kernel.capabilities.said(self.backend),
            "lengths": self.allowed.lengths, "classes": self.allowed.classes, "seams": self.allowed.seams,
            "counts": [[*cell, n] for cell, n in sorted(self.counts.items())]})


def ranks_and_dims(capabilities: Capabilities) -> list[tuple[int, int]]:
    ranks = sorted(capabilities.ranks or {1, 2, 3, 4})
    return [(r, d) for r in ranks for d in ([r - 1] if capabilities.last_dim_only else range(r))]


def space(capabilities: Capabilities, backend: str, dtypes, *, size: SizeCaps | None = None,
          backward: bool = False, biased: bool = False) -> Space:
    caps = size or SIZE_CAPS[backend]
    boundaries = capabilities.path_boundaries.get(backend, ())
    lengths = {}
    for dtype in usable_dtypes(capabilities, dtypes):
        top = longest_row(capabilities, backend, dtype, caps)
        # Each side of a boundary is drawn past the row cap, as far as a seam's row (:func:`longest_seam_row`).
        beyond = longest_seam_row(capabilities, backend, dtype, caps)
        cells = [band_label(lo, hi) for lo, hi in BANDS if lo <= top] + [c for c, m in beside(boundaries) if m <= beyond]
        lengths[str(format_of(dtype))] = tuple(cells)
    unit = capabilities.unit_row_stride
    layouts = tuple(k for k in LAYOUT_CLASSES if not (k == "expanded" and capabilities.in_place)  # nowhere to write
                    and any(layout_of_kind(k, r, d, unit_row_stride=unit) for r, d in ranks_and_dims(capabilities)))
    bias_layouts = BIAS_LAYOUTS if any(rank > 1 for rank, _ in ranks_and_dims(capabilities)) else (
        "contiguous", "transposed")  # a rank-1 bias is one row: dense, or strided in a buffer
    classes = {"values": tuple(VALUE_CLASSES), "layouts": layouts,
               "specials": tuple(SPECIAL_RECIPES), **({GRADIENT_LAYOUTS: layouts} if backward else {}),
               **({BIAS_LAYOUT_AXIS: bias_layouts} if biased else {})}
    seams = {str(format_of(dtype)): [[tile_label(seam.tile), seam.placement] for seam, _, _ in seam_cases]
             for dtype in usable_dtypes(capabilities, dtypes)
             if (seam_cases := seam_shapes(capabilities, backend, dtype, caps))}
    return Space(lengths, classes, seams)


def gradient_step(layouts: tuple[str, ...], options: dict, unit: bool) -> int:
    """How far along the layout classes a backward sweep case's gradient layout is from its input's: the first step
    (1 up) at which every pair of classes exists at some rank and dim the kernel takes, so that every gradient layout
    class is drawn beside every row length (a transposed input, rank 2 only, has no permuted gradient)."""
    def fits(step: int) -> bool:
        return all(any(layout_of_kind(layouts[(k + step) % len(layouts)], r, d, unit_row_stride=unit)
                       for r, d, _ in options[layouts[k]]) for k in range(len(layouts)))

    return next((step for step in range(1, len(layouts)) if fits(step)), 0)


def seam_shapes(capabilities: Capabilities, backend: str, dtype, caps: SizeCaps) -> list[tuple[Seam, tuple, int]]:
    """Every seam the kernel's rows can hold in ``dtype`` (:func:`seam_rows`), with the shape and dim the sweep
    draws it in: rows of the placement's length, as many as show its variants and the size caps allow, at rank 2
    over the last dim where the kernel takes it."""
    pairs = ranks_and_dims(capabilities)
    rank, dim = (2, 1) if (2, 1) in pairs else pairs[0]
    found = []
    for tile, longest in seam_rows(capabilities, backend, dtype, caps).items():
        for name, p in PLACEMENTS.items():
            n = p.length(tile)
            if n > longest:
                continue
            room = caps.elements(dtype) if capabilities.max_offset is None else min(caps.elements(dtype),
                                                                                   capabilities.max_offset + 1)
            rows = max(min(variants(p), room // n), 1)
            shape = [1] * rank
            shape[dim] = n
            if rank > 1:
                shape[0 if dim else 1] = rows
            found.append((Seam(name, tile), tuple(shape), dim))
    return found


def boundaries_beyond_caps(capabilities: Capabilities, backend: str, caps: SizeCaps | None = None) -> list[int]:
    """Declared path boundaries whose far side (b + 1) the backend's size caps never draw (past the elements of one
    fp32 example: :func:`longest_seam_row`), within the row limit."""
    caps = caps or SIZE_CAPS[backend]
    limit = capabilities.row_limit(backend)
    longest = longest_seam_row(capabilities, backend, torch.float32, caps)
    return [b for b in capabilities.path_boundaries.get(backend, ())
            if b + 1 > longest and (limit is None or b + 1 <= limit)]


def length_groups(cells, top: int, boundaries) -> list:
    """Row-length choosers ``k -> n`` whose rows cover ``cells``: one beside each boundary, then one per band,
    cycling through the band's interesting lengths (a declared boundary adds its group and takes none away)."""
    groups, uncovered = [], set(cells)
    for cell, m in beside(boundaries):
        if cell in uncovered:
            groups.append(lambda k, m=m: m)
            uncovered.discard(cell)
    for lo, hi in BANDS:
        if band_label(lo, hi) in uncovered:
            choices = [n for n in interesting_lengths(int(min(hi, top)), tuple(boundaries)) if n >= lo]
            groups.append(lambda k, choices=choices: choices[k % len(choices)])
    return groups


def _shape(rank: int, dim: int, n: int, room: int) -> tuple[int, ...]:
    """Rows of ``n`` with other dims of 2, 3, 2 while ``room`` (rows) allows; the first other dim is always 2."""
    sizes = []
    for position, size in enumerate((2, 3, 2)[:rank - 1]):
        size = size if size <= room or position == 0 else 1
        sizes.append(size)
        room //= size
    sizes.insert(dim, n)
    return tuple(sizes)


def _showing(case: Case, special: str) -> Case:
    """``case`` with the first seed whose input holds the special class it stands for."""
    for seed in range(case.seed, case.seed + 64):
        candidate = replace(case, seed=seed)
        x, _ = candidate.make()
        if special in special_classes(x, candidate.dim, candidate.specials):
            return candidate
    raise AssertionError(f"no seed near {case.seed} puts {special!r} into {case!r}")


def sweep(capabilities: Capabilities, backend: str, dtypes, *, masked: bool = False, backward: bool = False,
          scaled: bool = False, biased: bool = False, size: SizeCaps | None = None) -> list[Case]:
    """Cases that draw every allowed cell of :func:`space` (a case takes one class of each axis; ``backward``: with
    gradients of every value class and special class in turn, beside other classes of logits; ``scaled``:
    attention's scales in turn; ``biased``: and every kind of bias over every span)."""
    caps = size or SIZE_CAPS[backend]
    boundaries = capabilities.path_boundaries.get(backend, ())
    allowed = space(capabilities, backend, dtypes, size=caps)
    unit = capabilities.unit_row_stride
    layout_options = {k: [(r, d, layout) for r, d in ranks_and_dims(capabilities)
                          if (layout := layout_of_kind(k, r, d, unit_row_stride=unit))]
                      for k in allowed.classes["layouts"]}
    values, layouts, special_names = (allowed.classes[a] for a in ("values", "layouts", "specials"))
    step = gradient_step(layouts, layout_options, unit) if backward else 0
    cases = []
    for i, dtype in enumerate(usable_dtypes(capabilities, dtypes)):
        top = longest_row(capabilities, backend, dtype, caps)
        for j, length in enumerate(length_groups(allowed.lengths[str(format_of(dtype))], top, boundaries)):
            for k in range(max(len(values), len(layouts), len(special_names))):
                n = length(k)
                options = layout_options[layouts[k % len(layouts)]]
                grad_kind = layouts[(k + step) % len(layouts)]
                if backward:  # a rank and dim where both the input's and the gradient's layout classes exist
                    options = [o for o in options if layout_of_kind(grad_kind, o[0], o[1], unit_row_stride=unit)]
                rank, dim, layout = options[(i + j + k) % len(options)]
                variants = VALUE_CLASSES[values[k % len(values)]].variants()
                special = special_names[k % len(special_names)]
                case = Case(_shape(rank, dim, n, min(caps.elements(dtype), SWEEP_ELEMENTS) // n), dim, dtype,
                            variants[(i + j) % len(variants)], layout, SPECIAL_RECIPES[special],
                            Mask() if masked else None, seed=10_000 + 1_000 * i + 100 * j + k,
                            grad=VALUE_CLASSES[values[(k + j + 1) % len(values)]].variants()[0] if backward else None,
                            grad_layout=layout_of_kind(grad_kind, rank, dim, unit_row_stride=unit) if backward else None,
                            grad_specials=SPECIAL_RECIPES[special_names[(k + j + 1) % len(special_names)]]
                            if backward else NO_SPECIALS)
                cases.append(_showing(case, special))
    cases = cases + seam_sweep(capabilities, backend, dtypes, masked=masked, size=caps)
    if backward:  # the seams' cases, with gradients of ordinary values
        cases = [case if case.grad else replace(case, grad=Values("normal")) for case in cases]
    if scaled:  # the scales and the biases in turn, over every case
        cases = [replace(case, scale=ATTENTION_SCALES[k % len(ATTENTION_SCALES)],
                         bias=BIAS_CHOICES[k % len(BIAS_CHOICES)] if biased else None) for k, case in enumerate(cases)]
    return cases


def seam_sweep(capabilities: Capabilities, backend: str, dtypes, *, masked: bool = False,
               size: SizeCaps | None = None) -> list[Case]:
    """Cases that draw every allowed seam cell: each placement at each tile, contiguous, in the logits (for masked
    softmax, a structure as the mask and the others in logits all kept), with SEAM_VALUES in turn (a placement
    takes the other at the next tile)."""
    caps = size or SIZE_CAPS[backend]
    cases = []
    for i, dtype in enumerate(usable_dtypes(capabilities, dtypes)):
        for k, (seam, shape, dim) in enumerate(seam_shapes(capabilities, backend, dtype, caps)):
            value = SEAM_VALUES[(i + k + seam.tile.bit_length()) % len(SEAM_VALUES)]
            case = Case(shape, dim, dtype, value, seed=20_000 + 1_000 * i + k, seam=seam)
            if masked:
                structured = PLACEMENTS[seam.placement].structure
                mask = replace(ALL_KEPT, structure=seam) if structured else ALL_KEPT
                case = replace(case, mask=mask, seam=None if structured else seam)
            cases.append(case)
    return cases


def render(title: str, allowed: Space, counts: dict) -> list[str]:
    """The matrix as text: a row per dtype and row-length cell, a column per class; '.' an empty allowed cell."""
    columns = [(axis, name) for axis, names in allowed.classes.items() for name in names]
    head = ["dtype", "row length"] + [name for _, name in columns]
    rows = []
    for dtype, lengths in allowed.lengths.items():
        for length in lengths:
            rows.append([dtype, length] + [str(counts.get((dtype, length, axis, name), ".")) for axis, name in columns])
    widths = [max(len(r[c]) for r in [head] + rows) for c in range(len(head))]
    line = lambda cells: "  ".join(cell.rjust(w) if c > 1 else cell.ljust(w) for c, (cell, w) in enumerate(zip(cells, widths)))
    groups = "  ".join(f"{axis}: {len(names)}" for axis, names in allowed.classes.items())
    return [f"{title} ({groups} classes)", line(head)] + [line(r) for r in rows] + render_seams(allowed, counts)


def render_seams(allowed: Space, counts: dict) -> list[str]:
    """The placement axis as text: a row per dtype and tile, a column per placement (numbered, named below); '.'
    an empty allowed cell, ' ' a placement whose row does not fit the kernel at that tile."""
    names = list(dict.fromkeys(name for pairs in allowed.seams.values() for _, name in pairs))
    if not names:
        return []
    head = ["dtype", "tile"] + [str(i + 1) for i in range(len(names))]
    rows = []
    for dtype, pairs in allowed.seams.items():
        cells = {tuple(pair) for pair in pairs}
        for tile in dict.fromkeys(tile for tile, _ in pairs):
            rows.append([dtype, tile.removeprefix("tile ")] + [
                str(counts.get((dtype, tile, SEAMS, name), ".")) if (tile, name) in cells else "" for name in names])
    widths = [max(len(r[c]) for r in [head] + rows) for c in range(len(head))]
    line = lambda cells: "  ".join(cell.rjust(w) if c > 1 else cell.ljust(w) for c, (cell, w) in enumerate(zip(cells, widths)))
    legend = "; ".join(f"{i + 1} {name}" for i, name in enumerate(names))
    return [f"seams ({len(names)} placements: {legend})", line(head)] + [line(r) for r in rows]


def merged(entries: list[dict]) -> list[dict]:
    """One entry per kernel, backend and operation, joining its tests (one per dtype): the allowed row lengths of
    each dtype, the classes, and the counts per cell as a dict."""
    joined: dict = {}
    for e in entries:
        into = joined.setdefault((e["kernel"], e["backend"], e["op"]),
                                 {**e, "lengths": {}, "classes": {axis: [] for axis in e["classes"]}, "seams": {},
                                  "counts": Counter()})
        into["lengths"].update(e["lengths"])
        into["seams"].update(e.get("seams", {}))
        for axis, names in e["classes"].items():
            into["classes"][axis] += [name for name in names if name not in into["classes"][axis]]
        for *cell, n in e["counts"]:
            into["counts"][tuple(cell)] += n
    return [{**e, "lengths": dict(sorted(e["lengths"].items())), "seams": dict(sorted(e["seams"].items()))}
            for _, e in sorted(joined.items())]


def write_matrices(terminalreporter) -> None:
    """The coverage of every accuracy test that ran: a line per kernel and operation, and its matrix (counts per
    cell, '.' for an allowed cell left empty) where a cell stayed empty or with ``-v``."""
    entries = [e for reports in terminalreporter.stats.values() for report in reports
               for e in payload.of(report, COVERAGE)]
    if not entries:
        return
    terminalreporter.write_sep("-", "coverage of the accuracy tests (drawn inputs per cell of the input space)")
    for e in merged(entries):
        allowed, counts = Space(e["lengths"], e["classes"], e["seams"]), e["counts"]
        cells = allowed.cells()
        declared = f" (within what it declares: {e['declared']})" if e.get("declared") else ""
        title = (f"{e['kernel']} {e['op']} on {e['backend']}: {len(cells & set(counts))} of "
                 f"{len(cells)} allowed cells drawn{declared}")
        if cells <= set(counts) and terminalreporter.verbosity <= 0:
            terminalreporter.write_line(title)
            continue
        for line in render(title, allowed, counts):
            terminalreporter.write_line(line)
