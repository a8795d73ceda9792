"""Hypothesis strategies for softmax inputs, composable in the manner of ``hypothesis.extra.numpy``.

Each strategy draws a *recipe*: a small frozen dataclass that says how to build
a tensor, not the tensor itself.  Hypothesis chooses the structure (shape, the
softmax dim, the memory layout, the value class, where special values go, a
seed); torch regenerates the bulk values from the seed.  Large tensors stay
cheap to draw, and every failure replays from the recipe Hypothesis prints:
``Case(...).make(device)`` rebuilds the exact tensor.

The building blocks:

* :func:`row_lengths`: 1, primes, 2^k - 1, 2^k, 2^k + 1, lengths around a
  kernel's code-path boundaries, and anything else up to a cap;
* :func:`shapes`: rank, softmax dim and sizes (zero-size dims included);
* :func:`layouts`: contiguous, padded rows, transposed and permuted dims,
  slices with a step, a storage offset, expanded (stride 0) dims.  Storage the
  view does not use is filled with NaN, so a kernel that reads the wrong
  addresses poisons its own output;
* :func:`value_classes`: normal values from 1e-3 to 1e4, uniform, equal rows,
  one dominant logit, gaps that underflow exp, values near the dtype's maximum,
  subnormal inputs, signed zeros, rows shifted far below or far above zero by a
  common offset, values equal to the sentinels kernels use for masking;
* :func:`special_values`: -inf entries, all -inf rows, a leading block of -inf,
  +inf, NaN;
* :func:`masks`: keep-masks with partially and fully masked rows, and structured ones (causal, sliding window,
  padding, block-sparse: :mod:`harness.inputs.seams`);
* :func:`fitting_seams`: special values at the seams of tiled kernels' rows (whole tiles of -inf, heads and tails a
  tile plus or minus one long, lone NaN / inf at a tile's first and last element): :mod:`harness.inputs.seams`;
* :func:`scales` and :func:`biases`: attention's scales (1/sqrt(d), fp32) and additive biases (small floats,
  ALiBi's slopes, paddings of -10000 and -inf, broadcast over rows or not);
* :func:`cases`: all of the above within one kernel's declared capabilities; for a backward, a gradient of
  any value class too (its input is the forward's output: :meth:`Case.call`); for a scaled softmax, a scale and
  (biased) a bias.

Each value class, layout and class of special values is defined once
(:data:`VALUE_CLASSES`, :data:`FEATURES` and :data:`LAYOUT_CLASSES`,
:data:`SPECIAL_CLASSES`), and the strategies and the coverage matrix read those
definitions: adding one touches one place (docs/extending.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import numpy as np
import torch
from hypothesis import strategies as st

from oracles import correctly_rounded, semantics
from oracles.call import Call, Operation
from specs.operations import TESTED_DTYPES
from specs.registry import Capabilities

from .seams import PLACEMENTS, Seam, tiles

# The forwards whose outputs a backward case takes: the softmax's (safe: a row of -inf gives zeros), the log_softmax's.
SAFE_SOFTMAX = Operation(name="masked_softmax", masked=True)
LOG_SOFTMAX_FORWARD = Operation(name="log_softmax", log=True)
GRAD_SEED = 0x9E3779B9  # mixed into a case's seed for its gradient's values, drawn apart from its logits'
BIAS_SEED = 0x85EBCA6B  # the same for a bias's values

PRIMES = (2, 3, 5, 7, 13, 31, 61, 127, 251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521)


@dataclass(frozen=True)
class SizeCaps:
    """How large one example may be on a backend."""

    max_elements: int
    max_row: int

    def elements(self, dtype: torch.dtype) -> int:
        """The most elements of one example: fp64 results are decided by the mpmath tier (~20 us each)."""
        return self.max_elements if dtype != torch.float64 else self.max_elements // 64


SIZE_CAPS = {
    "cpu": SizeCaps(max_elements=1 << 15, max_row=4096),  # the interpreter runs ~1 M elements/s
    # On devices the CPU-side oracle and bounds (~3 M elements/s together) set the pace.
    # Rows reach one past every declared code-path boundary (full_softmax splits fp32 rows past 131072).
    "cuda": SizeCaps(max_elements=1 << 20, max_row=1 << 18),
    "npu": SizeCaps(max_elements=1 << 20, max_row=1 << 15),
}


# ---------------------------------------------------------------------------- shapes


def interesting_lengths(limit: int, boundaries: tuple[int, ...] = ()) -> list[int]:
    """Row lengths where kernels break: 1, primes, around powers of two and code-path boundaries."""
    around_powers = [n for k in range(1, 31) for n in ((1 << k) - 1, 1 << k, (1 << k) + 1)]
    around_boundaries = [n for b in boundaries for n in (b - 1, b, b + 1)]
    return sorted({n for n in [1, *PRIMES, *around_powers, *around_boundaries] if 1 <= n <= limit})


def row_lengths(limit: int, boundaries: tuple[int, ...] = ()) -> st.SearchStrategy[int]:
    """Lengths of the softmax dim: mostly the interesting ones, sometimes anything up to ``limit``."""
    return st.one_of(st.sampled_from(interesting_lengths(limit, boundaries)), st.integers(1, limit))


@st.composite
def shapes(draw, *, ranks=(1, 2, 3, 4), last_dim_only=False, max_elements=1 << 15, max_row=4096,
           boundaries: tuple[int, ...] = (), row_length: int | None = None) -> tuple[tuple[int, ...], int]:
    """(shape, dim): the softmax dim's length from :func:`row_lengths` (or ``row_length``), other dims small,
    some zero."""
    rank = draw(st.sampled_from(sorted(ranks)))
    dim = rank - 1 if last_dim_only else draw(st.integers(0, rank - 1))
    n = row_length or draw(row_lengths(min(max_row, max_elements), boundaries))
    room = max(max_elements // n, 1)
    others = []
    for _ in range(rank - 1):
        # 300: more rows than a narrow row index (mod 256) reaches; 513 and 1030: than a persistent grid of 512 or
        # 1024 programs, a row each, covers.
        size = draw(st.integers(0, max(min(room, 64), 1)) | st.sampled_from([1, 3, 17, 300, 513, 1030]))
        size = min(size, room)
        others.append(size)
        room = max(room // max(size, 1), 1)
    others.insert(dim, n)
    return tuple(others), dim


# ---------------------------------------------------------------------------- layouts


@dataclass(frozen=True)
class Layout:
    """How a logical tensor sits in its storage.

    ``order`` lists the logical dims from outermost to innermost in memory (a
    transposed or permuted view when not ascending); ``steps`` takes every k-th
    element along each logical dim (a slice with a step); ``pad`` leaves unused
    elements after each innermost run; ``offset`` starts the view inside the
    storage; ``expanded`` dims have stride 0 (one value broadcast along them).
    """

    order: tuple[int, ...]
    steps: tuple[int, ...]
    pad: int = 0
    offset: int = 0
    expanded: tuple[int, ...] = ()

    @property
    def kind(self) -> str:
        """One label per layout (:data:`LAYOUT_CLASSES`), named by its most unusual feature (for reports)."""
        for feature in FEATURES.values():
            if feature.present(getattr(self, feature.field)):
                return next(c.name for c in LAYOUT_CLASSES.values()
                            if c.feature == feature.field and c.ranks(len(self.order)))
        return CONTIGUOUS

    def strides(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
        """Strides of the view before expansion, and the storage size it needs (in elements)."""
        strides = [0] * len(shape)
        span = 1
        for position, d in enumerate(reversed(self.order)):
            extent = max(shape[d], 1) * self.steps[d] + (self.pad if position == 0 else 0)
            strides[d] = span * self.steps[d]
            span *= extent
        return tuple(strides), self.offset + span

    def view(self, values: torch.Tensor, device) -> torch.Tensor:
        """Place ``values`` in NaN-filled storage on ``device`` with this layout."""
        shape = tuple(values.shape)
        broadcast = [d in self.expanded and n > 0 for d, n in enumerate(shape)]
        base_shape = tuple(1 if b else n for b, n in zip(broadcast, shape))
        strides, size = replace(self, expanded=()).strides(base_shape)
        storage = torch.full((size,), math.nan, dtype=values.dtype, device=device)
        base = storage.as_strided(base_shape, strides, self.offset)
        base.copy_(values[tuple(slice(0, 1) if b else slice(None) for b in broadcast)].to(device))
        return base.expand(shape)


@dataclass(frozen=True)
class LayoutFeature:
    """One way a view departs from dense storage: the :class:`Layout` field that holds it, whether a layout has
    it, how :func:`layouts` draws it, and the value the coverage matrix's representative layout takes."""

    field: str
    present: Callable[[object], bool]  # the field's value -> the layout has the feature
    draw: Callable[..., object]  # (draw, rank, dim, unit_row_stride) -> a value of the field
    example: Callable[[int, int, bool], object]  # (rank, dim, unit_row_stride) -> a value; None where the rank has none
    mixed: bool = True  # drawn with the other mixed features in a "mixed" layout


def _draw_order(draw, rank, dim, unit_row_stride):
    order = list(range(rank))
    if rank > 1:
        order = draw(st.permutations(order))
        if unit_row_stride:
            order = [d for d in order if d != dim] + [dim]
    return tuple(order)


def _example_order(rank, dim, unit_row_stride):
    movable = [d for d in range(rank) if d != dim] if unit_row_stride else list(range(rank))
    return tuple(movable[::-1] + ([dim] if unit_row_stride else [])) if len(movable) >= 2 else None


def _draw_steps(draw, rank, dim, unit_row_stride):
    steps = [draw(st.sampled_from([1, 2, 3])) for _ in range(rank)]
    if unit_row_stride:
        steps[dim] = 1
    return tuple(steps)


def _example_steps(rank, dim, unit_row_stride):
    others = [d for d in range(rank) if d != dim]
    if unit_row_stride and not others:
        return None
    steps = [1] * rank
    steps[others[0] if unit_row_stride else dim] = 2
    return tuple(steps)


def _draw_expanded(draw, rank, dim, unit_row_stride):
    candidates = [d for d in range(rank) if not (unit_row_stride and d == dim)]
    return (draw(st.sampled_from(candidates)),) if rank > 1 else ()


def _example_expanded(rank, dim, unit_row_stride):
    others = [d for d in range(rank) if d != dim]
    return (others[0],) if others else None


FEATURES = {f.field: f for f in (
    LayoutFeature("expanded", bool, _draw_expanded, _example_expanded, mixed=False),
    LayoutFeature("order", lambda order: list(order) != sorted(order), _draw_order, _example_order),
    LayoutFeature("steps", lambda steps: any(step > 1 for step in steps), _draw_steps, _example_steps),
    LayoutFeature("pad", bool, lambda draw, *_: draw(st.integers(1, 17)), lambda *_: 3),
    LayoutFeature("offset", bool, lambda draw, *_: draw(st.integers(1, 33)), lambda *_: 5),
)}
"""The features a layout may have, the most unusual first: a layout's class is named by the first it has."""


@dataclass(frozen=True)
class LayoutClass:
    """One class of layouts, the one place it is defined: the feature that makes it, read by :attr:`Layout.kind`,
    :func:`layouts` (one choice per feature) and the coverage matrix (:func:`layout_of_kind`)."""

    name: str
    feature: str | None  # the field of its feature in FEATURES; None: the dense layout
    ranks: Callable[[int], bool] = lambda rank: True  # the ranks whose layouts with the feature are of this class

    def __post_init__(self) -> None:
        if self.feature is not None and self.feature not in FEATURES:
            raise ValueError(f"layout class {self.name!r}: feature must be one of {', '.join(FEATURES)}; "
                             f"got {self.feature!r}")


CONTIGUOUS = "contiguous"
MIXED = "mixed"  # a drawn layout with every mixed feature at once
LAYOUT_CLASSES = {c.name: c for c in (
    LayoutClass(CONTIGUOUS, None),
    LayoutClass("padded", "pad"),
    LayoutClass("transposed", "order", ranks=lambda rank: rank == 2),
    LayoutClass("permuted", "order", ranks=lambda rank: rank != 2),
    LayoutClass("sliced", "steps"),
    LayoutClass("offset", "offset"),
    LayoutClass("expanded", "expanded"),
)}
"""Every layout class, in the order the coverage matrix lists them (and :func:`layouts` draws their features)."""


def layout_class(kind: str) -> LayoutClass:
    """The layout class ``kind``; ValueError naming it and the known ones if there is none."""
    if kind not in LAYOUT_CLASSES:
        raise ValueError(f"layout kind must be one of {', '.join(map(repr, LAYOUT_CLASSES))}; got {kind!r}")
    return LAYOUT_CLASSES[kind]


def layout_of_kind(kind: str, rank: int, dim: int, *, unit_row_stride: bool = False) -> Layout | None:
    """One layout of ``kind`` (:data:`LAYOUT_CLASSES`) for a rank-``rank`` tensor, or None where the rank
    cannot have it (transposed is rank 2, permuted rank 3 or more; ``unit_row_stride`` keeps ``dim`` dense)."""
    feature = layout_class(kind).feature
    layout = Layout(tuple(range(rank)), (1,) * rank)
    if feature is not None:
        value = FEATURES[feature].example(rank, dim, unit_row_stride)
        if value is None:
            return None
        layout = replace(layout, **{feature: value})
    return layout if layout.kind == kind else None


@st.composite
def layouts(draw, rank: int, dim: int, *, unit_row_stride: bool = False, expandable: bool = True) -> Layout:
    """Layouts of a rank-``rank`` tensor: dense, one feature, or every mixed feature at once; ``unit_row_stride``
    keeps the softmax dim innermost and dense; ``expandable``: stride-0 dims may be drawn (not for a kernel that
    writes its result into its input)."""
    by_feature = {}
    for c in LAYOUT_CLASSES.values():
        by_feature.setdefault(c.feature, c.name)  # a feature's first class names its choice
    kinds = [kind for feature, kind in by_feature.items() if expandable or feature != "expanded"] + [MIXED]
    kind = draw(st.sampled_from(kinds))
    chosen = {feature for feature, name in by_feature.items() if name == kind}
    if kind == MIXED:
        chosen = {field for field, feature in FEATURES.items() if feature.mixed}
    drawn = {f.name: FEATURES[f.name].draw(draw, rank, dim, unit_row_stride)
             for f in fields(Layout) if f.name in chosen}  # in the order of Layout's fields
    return replace(Layout(tuple(range(rank)), (1,) * rank), **drawn)


# ---------------------------------------------------------------------------- values

F64 = torch.float64
HALF_MAX = math.inf
"""The offset of shifted rows that stands for half the dtype's maximum.  Every offset is capped there (the
shifted values stay finite), so an infinite one always takes the cap, whatever the dtype.  It stays ``inf``
because the scale is printed in a case's repr, its replay line."""
MOST_NEGATIVE = -math.inf
"""The sentinel that stands for the dtype's most negative finite value (``finfo.min``, what masking code fills
with).  Every sentinel is floored there, so ``-inf`` always takes the floor; printed as ``-inf`` in the replay line."""
SCALES = (1e-3, 1e-2, 0.1, 1.0, 4.0, 30.0, 1e2, 1e3, 1e4)
OFFSETS = (1e2, 1e4, 1e6, 1e30, HALF_MAX)  # |offset| of shifted rows
SENTINELS = (-1e4, -65504.0, -1e30, MOST_NEGATIVE)


@dataclass(frozen=True)
class ScaleDomain:
    """The scales a value class accepts."""

    description: str
    accepts: Callable[[float], bool]


POSITIVE = ScaleDomain("a positive finite number", lambda scale: 0 < scale < math.inf)
OFFSET = ScaleDomain("a positive number (HALF_MAX, inf: half the dtype's maximum)", lambda scale: scale > 0)
FILL = ScaleDomain("a negative number (MOST_NEGATIVE, -inf: the dtype's most negative finite value)",
                   lambda scale: scale < 0)
UNSCALED = ScaleDomain("1.0, the default: the class takes no scale", lambda scale: scale == 1.0)

# (scale, shape, dtype, dim, generator) -> float64 values of the class, before rounding to the dtype
Maker = Callable[[float, tuple[int, ...], torch.dtype, int, torch.Generator], torch.Tensor]


@dataclass(frozen=True)
class ValueClass:
    """One class of logit values, the one place it is defined: the strategies draw it (:func:`value_classes`),
    :class:`Values` makes its values, the coverage matrix counts it and its sweep draws it."""

    name: str
    make: Maker
    domain: ScaleDomain  # the scales it accepts
    scales: tuple[float, ...] = ()  # the scales Hypothesis draws; none for an unscaled class
    sweep: tuple[float, ...] = ()  # the scales the coverage sweep cycles through, its representative first
    branch: str | None = None  # drawn in one Hypothesis choice with that class (and its scales), not on its own

    def __post_init__(self) -> None:
        for scale in self.scales + self.sweep:
            self.check(scale)

    def check(self, scale: float) -> None:
        """ValueError naming the class and the scale, unless the class accepts ``scale``."""
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not self.domain.accepts(scale):
            raise ValueError(f"Values.scale must be {self.domain.description} for value class {self.name!r}; "
                             f"got {scale!r}")

    def variants(self) -> tuple[Values, ...]:
        """The cases of this class the coverage sweep cycles through (the first is the representative)."""
        return tuple(Values(self.name, scale) for scale in self.sweep) or (Values(self.name),)


def _chance(shape, p: float, g: torch.Generator) -> torch.Tensor:
    """True with probability p, each entry of ``shape``: uniform draws in fp32 by name, so that a default dtype a
    kernel sets changes no input."""
    return torch.rand(shape, generator=g, dtype=torch.float32) < p


def _normal(scale, shape, dtype, dim, g):
    return torch.randn(shape, generator=g, dtype=F64) * scale


def _uniform(scale, shape, dtype, dim, g):
    return (torch.rand(shape, generator=g, dtype=F64) * 2 - 1) * scale


def _equal(scale, shape, dtype, dim, g):  # each row constant: the softmax is exactly 1/n
    return (torch.randn(shape, generator=g, dtype=F64) * scale).amax(dim=dim, keepdim=True).expand(shape)


def _dominant(scale, shape, dtype, dim, g):  # one logit far above the rest of its row
    x = torch.randn(shape, generator=g, dtype=F64)
    top = torch.randint(0, shape[dim], (*shape[:dim], 1, *shape[dim + 1:]), generator=g)
    return x.scatter(dim, top, scale)


def _tied_max(scale, shape, dtype, dim, g):
    """Each row's maximum tied over k of its n entries, k in [n/2, n] and distinct from row to row while n allows,
    the rest ``scale`` below: exact outputs 1/k (to within e^-scale), one distinct quotient per row."""
    n = shape[dim]
    others = list(shape)
    del others[dim]
    rows, low = math.prod(others), (n + 1) // 2
    ties = low + torch.randperm(n - low + 1, generator=g).repeat(-(-rows // (n - low + 1)))[:rows]
    ranks = torch.rand((rows, n), generator=g, dtype=torch.float32).argsort(-1).argsort(-1)
    top = torch.randn((rows, 1), generator=g, dtype=F64)
    return torch.where(ranks < ties[:, None], top, top - scale).reshape(*others, n).movedim(-1, dim)


def _underflow(scale, shape, dtype, dim, g):  # gaps so wide that exp underflows to subnormals and zero
    reach = {torch.float16: 24.0}.get(dtype, 110.0) * scale
    return -torch.rand(shape, generator=g, dtype=F64) * reach


def _near_max(scale, shape, dtype, dim, g):
    signs = torch.randint(0, 2, shape, generator=g).to(F64) * 2 - 1
    return signs * torch.finfo(dtype).max * (1 - torch.rand(shape, generator=g, dtype=F64) * scale)


def _subnormal(scale, shape, dtype, dim, g):
    return (torch.rand(shape, generator=g, dtype=F64) * 2 - 1) * torch.finfo(dtype).smallest_normal


def _zeros(scale, shape, dtype, dim, g):  # +0 and -0 mixed
    return torch.where(_chance(shape, 0.5, g), 0.0, -0.0).to(F64)


def _shifted(sign: int) -> Maker:
    """Ordinary gaps (where the format's spacing allows) far from 0: an offset capped at half the dtype's maximum."""

    def make(scale, shape, dtype, dim, g):
        offset = min(scale, torch.finfo(dtype).max / 2) * sign
        return offset + torch.randn(shape, generator=g, dtype=F64) * 4

    return make


def _sentinel(scale, shape, dtype, dim, g):  # the finite fill values of masking code: some entries, some whole rows
    fill = max(scale, torch.finfo(dtype).min)
    x = torch.randn(shape, generator=g, dtype=F64)
    rows = _chance((*shape[:dim], 1, *shape[dim + 1:]), 0.25, g)
    return torch.where(_chance(shape, 0.5, g) | rows, fill, x)


VALUE_CLASSES = {c.name: c for c in (
    ValueClass("normal", _normal, POSITIVE, SCALES, sweep=(4.0, 1e-3, 30.0)),
    ValueClass("uniform", _uniform, POSITIVE, SCALES, sweep=(30.0, 1.0)),
    ValueClass("equal", _equal, POSITIVE, (1.0, 1e3), sweep=(1.0, 1e3)),
    ValueClass("tied-max", _tied_max, POSITIVE, (30.0, 1e4), sweep=(1e4, 30.0)),
    ValueClass("dominant", _dominant, POSITIVE, (10.0, 50.0, 200.0), sweep=(50.0, 200.0)),
    ValueClass("underflow", _underflow, POSITIVE, (0.5, 1.0, 2.0), sweep=(1.0, 2.0)),
    ValueClass("near-max", _near_max, POSITIVE, (0.5, 1e-3), sweep=(0.5, 1e-3)),
    ValueClass("subnormal", _subnormal, UNSCALED),
    ValueClass("zeros", _zeros, UNSCALED),
    ValueClass("far-below", _shifted(-1), OFFSET, OFFSETS, sweep=(1e6, HALF_MAX, 1e4, 1e30, 1e2)),
    ValueClass("far-above", _shifted(1), OFFSET, OFFSETS, sweep=(1e6, HALF_MAX, 1e2), branch="far-below"),
    ValueClass("sentinel", _sentinel, FILL, SENTINELS, sweep=(-1e4, -65504.0, MOST_NEGATIVE, -1e30)),
)}
"""Every value class, in the order the strategies draw them and the coverage matrix lists them."""


def value_class(name: str) -> ValueClass:
    """The value class ``name``; ValueError naming it and the known ones if there is none."""
    if name not in VALUE_CLASSES:
        raise ValueError(f"Values.kind must be one of {', '.join(map(repr, VALUE_CLASSES))}; got {name!r}")
    return VALUE_CLASSES[name]


@dataclass(frozen=True)
class Values:
    """A class of logit values (:data:`VALUE_CLASSES`), sampled from a seeded generator in float64 then rounded
    to the dtype."""

    kind: str
    scale: float = 1.0

    def __post_init__(self) -> None:
        value_class(self.kind).check(self.scale)

    def sample(self, shape: tuple[int, ...], dtype: torch.dtype, dim: int, g: torch.Generator) -> torch.Tensor:
        if math.prod(shape) == 0:
            return torch.empty(shape, dtype=dtype)
        return VALUE_CLASSES[self.kind].make(self.scale, shape, dtype, dim, g).to(dtype)


def value_classes() -> st.SearchStrategy[Values]:
    """Value classes, with the scales that matter for each: one Hypothesis choice per class (or per branch)."""
    return _value_classes(tuple(VALUE_CLASSES.values()))


@functools.cache  # one strategy per table of classes: a strategy built anew at every draw costs Hypothesis its analysis
def _value_classes(classes: tuple[ValueClass, ...]) -> st.SearchStrategy[Values]:
    branches: dict[str, list[ValueClass]] = {}
    for c in classes:
        branches.setdefault(c.branch or c.name, []).append(c)
    return st.one_of(*(_drawn(group) for group in branches.values()))


def _drawn(group: list[ValueClass]) -> st.SearchStrategy[Values]:
    first = group[0]
    if any(c.scales != first.scales for c in group):
        raise ValueError(f"value classes {[c.name for c in group]} are drawn together but differ in scales")
    if not first.scales:
        return st.sampled_from([Values(c.name) for c in group])
    return st.builds(Values, kind=st.sampled_from([c.name for c in group]), scale=st.sampled_from(first.scales))


@dataclass(frozen=True)
class Specials:
    """Where special values go: fractions of entries (or of rows, for all -inf rows)."""

    neg_inf: float = 0.0
    neg_inf_rows: float = 0.0
    pos_inf: float = 0.0
    nan: float = 0.0
    neg_inf_head: float = 0.0  # the first share of every row is -inf (an online softmax's first tiles)

    @property
    def classes(self) -> tuple[str, ...]:
        """The special-value classes placed (:data:`SPECIAL_CLASSES`; "finite" when none)."""
        return tuple(c.name for c in SPECIAL_CLASSES if getattr(self, c.field)) or (FINITE,)

    @property
    def kind(self) -> str:
        return "+".join(self.classes)

    def apply(self, x: torch.Tensor, dim: int, g: torch.Generator) -> torch.Tensor:
        x = x.clone()
        for value, share in ((-math.inf, self.neg_inf), (math.inf, self.pos_inf), (math.nan, self.nan)):
            if share:
                x[_chance(x.shape, share, g)] = value
        if self.neg_inf_rows and x.numel():
            rows_shape = (*x.shape[:dim], 1, *x.shape[dim + 1:])
            x = x.masked_fill(_chance(rows_shape, self.neg_inf_rows, g), -math.inf)
        if self.neg_inf_head and x.numel():
            head = math.ceil(self.neg_inf_head * x.shape[dim])
            x.narrow(dim, 0, head).fill_(-math.inf)
        return x


NO_SPECIALS = Specials()
FINITE = "finite"  # the class of an input without special values


@dataclass(frozen=True)
class SpecialClass:
    """A class of special values: the share of :class:`Specials` that places it, and how an input shows it."""

    name: str
    field: str  # the Specials share that places it
    share: float  # the share the coverage sweep places
    found: Callable[[np.ndarray, Specials], bool]  # (rows as float64, last axis; the recipe) -> the input holds it

    def __post_init__(self) -> None:
        if self.field not in {f.name for f in fields(Specials)}:
            raise ValueError(f"SpecialClass {self.name!r}: field {self.field!r} is no share of Specials")

    @classmethod
    def of_rule(cls, name: str, field: str, share: float) -> SpecialClass:
        """The class of the special case ``name`` of :data:`oracles.semantics.RULES`: found where a row is one."""
        rule = semantics.BY_NAME[name]
        return cls(rule.name, field, share, lambda rows, specials: bool(rule.holds(rows).any()))


SPECIAL_CLASSES = (
    SpecialClass.of_rule("-inf", "neg_inf", 0.3),
    SpecialClass.of_rule("-inf rows", "neg_inf_rows", 0.5),
    # An online softmax's first tiles all -inf: a placement, not a case of its own (its rows are "-inf" rows).
    SpecialClass("-inf head", "neg_inf_head", 0.5,
                 lambda rows, specials: specials.neg_inf_head > 0 and bool(np.isneginf(rows[:, 0]).all())),
    SpecialClass.of_rule("+inf", "pos_inf", 0.3),
    SpecialClass.of_rule("nan", "nan", 0.3),
)
"""The special-value classes, in the order a recipe's kind names them; each placed alone by the coverage sweep."""


@functools.cache  # built once: see _value_classes
def special_values() -> st.SearchStrategy[Specials]:
    """Mostly finite rows; otherwise some mix of -inf entries, all -inf rows, +inf and NaN."""
    share = st.sampled_from([0.0, 0.0, 0.01, 0.3])
    # Keyword arguments, so that Hypothesis prints a shrunk example with the field names.
    return st.one_of(st.just(NO_SPECIALS),
                     st.builds(Specials, neg_inf=share, neg_inf_rows=share, pos_inf=share, nan=share,
                               neg_inf_head=st.sampled_from([0.0, 0.0, 0.0, 0.5])))


@dataclass(frozen=True)
class Mask:
    """A keep-mask (True = keep) with a share of entries kept and a share of fully masked rows; or, given a
    ``structure`` (a :class:`Seam` whose placement is a mask structure: causal, sliding window, padding...), that
    structure's keep-mask, with the share of fully masked rows."""

    keep: float = 0.7
    empty_rows: float = 0.1
    structure: Seam | None = None

    def __post_init__(self) -> None:
        if self.structure is not None and not (isinstance(self.structure, Seam)
                                               and PLACEMENTS[self.structure.placement].structure):
            structures = ", ".join(repr(name) for name, p in PLACEMENTS.items() if p.structure)
            raise ValueError(f"Mask.structure must be None or a Seam(...) of a mask structure ({structures}); "
                             f"got {self.structure!r}")

    def sample(self, shape: tuple[int, ...], dim: int, g: torch.Generator) -> torch.Tensor:
        keep = _chance(shape, self.keep, g)
        if self.structure is not None:
            keep = self.structure.keep(shape, dim)
        rows_shape = (*shape[:dim], 1, *shape[dim + 1:])
        return keep & ~_chance(rows_shape, self.empty_rows, g)


ALL_KEPT = Mask(keep=1.0, empty_rows=0.0)  # the mask of a seam placed in the logits of a masked softmax


@functools.cache  # built once: see _value_classes
def masks() -> st.SearchStrategy[Mask]:
    return st.builds(Mask, keep=st.sampled_from([0.05, 0.5, 0.95, 1.0]), empty_rows=st.sampled_from([0.0, 0.2, 1.0]))


# ---------------------------------------------------------------------------- scales and biases

# Attention's scales 1/sqrt(d) for head sizes d people use, as fp32 (a kernel receives an fp32 scale), and 1.
ATTENTION_SCALES = tuple(float(np.float32(1 / math.sqrt(d))) for d in (1, 2, 16, 40, 64, 80, 96, 128, 256))


@functools.cache  # built once: see _value_classes
def scales() -> st.SearchStrategy[float]:
    """Scales of a scaled softmax: attention's 1/sqrt(d), or any fp32 number in [2^-12, 1]; shrinks toward 1."""
    return st.one_of(st.sampled_from(ATTENTION_SCALES), st.floats(2.0**-12, 1.0, width=32))


BIAS_LIMIT = 2.0**14  # no bias value beyond it in magnitude but -inf: Case.call keeps scale * x + bias finite


def _normal_bias(shape, n, g):  # relative-position biases: small floats of either sign
    return torch.randn(shape, generator=g, dtype=torch.float64) * 4


def _alibi_bias(shape, n, g):  # ALiBi: slope * j along the row (its -slope * i part is constant in a row)
    slope = 2.0 ** -int(torch.randint(1, 9, (), generator=g))
    return torch.arange(n, dtype=torch.float64).expand(shape) * slope


def _padding(fill: float):
    def make(shape, n, g):  # the trailing columns of some rows, and some whole rows, at ``fill``
        pad = torch.randint(0, n + 1, (*shape[:-1], 1), generator=g)
        whole = torch.rand((*shape[:-1], 1), generator=g) < 0.25
        padded = (torch.arange(n).expand(shape) >= n - pad) | whole
        return torch.zeros(shape, dtype=torch.float64).masked_fill(padded, fill)
    return make


def _left_padding_to_a_tile(shape, n, g):
    """-inf over a row's first columns up to the largest power of two below its length: a left-padded row whose
    first tiles, at every power-of-two tile up to there, are all -inf (an online softmax's rescale by exp(-inf + inf):
    docs/findings/scaled-softmax.md 1)."""
    pad = 1 << ((n - 1).bit_length() - 1) if n > 1 else 0
    return torch.zeros(shape, dtype=torch.float64).masked_fill(torch.arange(n).expand(shape) < pad, -math.inf)


BIAS_KINDS: dict[str, Callable] = {
    "normal": _normal_bias,
    "alibi": _alibi_bias,
    "padding": _padding(-10000.0),  # Megatron's and BERT's additive mask
    "neg_inf_padding": _padding(-math.inf),  # scaled_dot_product_attention's float mask
    "neg_inf_left_padding": _left_padding_to_a_tile,  # left padding ending at a tile seam
}
# Which dims of x a bias spans (the others broadcast): one row for every row, every row its own, or all but the
# first (a batch dim broadcast over, as an attention bias over heads and queries is).
BIAS_SPANS = ("row", "full", "all_but_first")
# How a bias sits in its storage: dense; its rows in a wider buffer (a slice of a padded mask); its last two dims
# swapped in storage (a mask built column-major); already expanded to x's shape, stride 0 where it broadcasts (an
# attention key-padding mask handed over as mask[:, None, None, :].expand(...)).  A kernel that reads a bias as
# dense passed every test while biases were drawn dense alone.
BIAS_LAYOUTS = ("contiguous", "padded", "transposed", "expanded")


@dataclass(frozen=True)
class Bias:
    """An additive bias: ``kind`` of values (:data:`BIAS_KINDS`) over the dims ``spans`` names (:data:`BIAS_SPANS`),
    laid out as ``layout`` says (:data:`BIAS_LAYOUTS`), in x's dtype, broadcast to x's shape by the kernel."""

    kind: str = "normal"
    spans: str = "row"
    layout: str = "contiguous"

    def __post_init__(self) -> None:
        if self.kind not in BIAS_KINDS:
            raise ValueError(f"Bias.kind must be one of {', '.join(BIAS_KINDS)}; got {self.kind!r}")
        if self.spans not in BIAS_SPANS:
            raise ValueError(f"Bias.spans must be one of {', '.join(BIAS_SPANS)}; got {self.spans!r}")
        if self.layout not in BIAS_LAYOUTS:
            raise ValueError(f"Bias.layout must be one of {', '.join(BIAS_LAYOUTS)}; got {self.layout!r}")

    def shape(self, shape: tuple[int, ...], dim: int) -> tuple[int, ...]:
        if self.spans == "full":
            return shape
        if self.spans == "all_but_first":
            return (1, *shape[1:]) if len(shape) > 1 else shape
        return tuple(n if d == dim % len(shape) else 1 for d, n in enumerate(shape))

    def sample(self, shape: tuple[int, ...], dim: int, dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
        own = self.shape(shape, dim)
        dim = dim % len(own)
        moved = (*own[:dim], *own[dim + 1:], own[dim])  # the row along the last axis
        values = BIAS_KINDS[self.kind](moved, own[dim], g)
        values = torch.where(values.isinf(), values, values.clamp(-BIAS_LIMIT, BIAS_LIMIT))  # -inf paddings stay
        return laid_out(values.movedim(-1, dim).to(dtype).contiguous(), self.layout, shape)


def realized_layout(bias: Bias, shape: tuple[int, ...], dim: int) -> str:
    """The layout class ``bias`` takes for an input of ``shape`` (a bias of one row laid "padded" is dense)."""
    return bias_layout(laid_out(torch.zeros(bias.shape(shape, dim)), bias.layout, shape))


def laid_out(values: torch.Tensor, layout: str, shape: tuple[int, ...]) -> torch.Tensor:
    """``values`` (dense) as ``layout`` lays them (:data:`BIAS_LAYOUTS`); a layout the shape cannot take (a
    transposed rank-1 bias takes every other element of a buffer instead) as near as it comes."""
    if layout == "padded" and values.dim():
        wide = torch.zeros(*values.shape[:-1], values.shape[-1] + 3, dtype=values.dtype)
        wide[..., :values.shape[-1]] = values
        return wide[..., :values.shape[-1]]
    if layout == "transposed":
        if values.dim() >= 2:
            return values.transpose(-1, -2).contiguous().transpose(-1, -2)
        spread = torch.zeros(2 * values.numel(), dtype=values.dtype)
        spread[::2] = values
        return spread[::2]
    if layout == "expanded":
        return values.expand(shape)
    return values


def bias_layout(bias: torch.Tensor) -> str:
    """The layout class a bias tensor has (:data:`BIAS_LAYOUTS`), read from its strides, not its recipe."""
    if any(stride == 0 and size > 1 for stride, size in zip(bias.stride(), bias.shape)):
        return "expanded"
    if bias.is_contiguous():
        return "contiguous"
    return "transposed" if bias.dim() and bias.shape[-1] > 1 and bias.stride(-1) != 1 else "padded"


@functools.cache  # built once: see _value_classes
def biases() -> st.SearchStrategy[Bias]:
    """Biases of every kind over every span, in every layout; shrinks toward small normal values over one row,
    dense."""
    return st.builds(Bias, kind=st.sampled_from(tuple(BIAS_KINDS)), spans=st.sampled_from(BIAS_SPANS),
                     layout=st.sampled_from(BIAS_LAYOUTS))


def for_operation(capabilities: Capabilities, op: Operation) -> Capabilities:
    """The inputs of ``op`` within ``capabilities``: a causal softmax's have two dims or more and normalise over
    the last."""
    if not op.causal:
        return capabilities
    return replace(capabilities, ranks=frozenset(capabilities.ranks or {1, 2, 3, 4}) - {1}, last_dim_only=True)


def operation_cases(capabilities: Capabilities, backend: str, op: Operation, *, dtypes=None,
                    size: SizeCaps | None = None) -> st.SearchStrategy[Case]:
    """:func:`cases` of the operation ``op`` (with the mask, gradient, scale and bias it takes) within ``capabilities``
    as :func:`for_operation` narrows them, in ``dtypes`` (the operation's where None)."""
    return cases(for_operation(capabilities, op), backend, dtypes=op.dtypes if dtypes is None else dtypes,
                 masked=op.masked, backward=op.backward, scaled=op.scaled, biased=op.biased, size=size)


def fitting_seams(longest: dict[int, int]) -> list[Seam]:
    """Every placement at every tile whose row fits (``longest``: tile -> the longest row a seam there may take),
    the first placement (a first tile of -inf) at the smallest tile first."""
    return [Seam(name, t) for name, p in PLACEMENTS.items() for t, most in sorted(longest.items())
            if p.length(t) <= most]




# ---------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """Everything needed to rebuild one input: ``x, mask = case.make(device)``, or the call of an operation on it:
    ``case.call(op, backend, device)``."""

    shape: tuple[int, ...]
    dim: int
    dtype: torch.dtype
    values: Values = Values("normal")
    layout: Layout | None = None
    specials: Specials = NO_SPECIALS
    mask: Mask | None = None
    seed: int = 0
    seam: Seam | None = None  # special values at tile seams, placed after the specials
    grad: Values | None = None  # a backward's gradient with respect to the softmax's output
    grad_layout: Layout | None = None  # the gradient's own layout (autograd hands kernels any); None: x's
    grad_specials: Specials = NO_SPECIALS  # special values in the gradient (one that overflowed under loss scaling)
    scale: float | None = None  # a scaled softmax's scale
    bias: Bias | None = None  # a biased softmax's bias

    def make(self, device="cpu") -> tuple[torch.Tensor, torch.Tensor | None]:
        logits, g = self.logits()
        x = self.place(logits, device)
        keep = None if self.mask is None else self.mask.sample(self.shape, self.dim, g).to(device)
        return x, keep

    def logits(self) -> tuple[torch.Tensor, torch.Generator]:
        """The input's values (contiguous, on the CPU), and the generator that drew them, to draw the mask next."""
        g = torch.Generator().manual_seed(self.seed)
        logits = self.specials.apply(self.values.sample(self.shape, self.dtype, self.dim, g), self.dim, g)
        if self.seam is not None:
            logits = self.seam.apply(logits, self.dim)
        return logits, g

    def call(self, op: Operation, backend: str, device="cpu") -> Call:
        """The call of ``op`` on this case's input on ``backend``.  A backward's input is the forward's output: the
        correctly rounded softmax (safe: a row of -inf gives zeros) or log_softmax of the logits, in their layout,
        with the values of ``grad``, scaled down so that nothing overflows, in ``grad_layout`` (or the same)."""
        if op.scaled:
            return self.scaled_call(op, backend, device)
        x, keep = self.make(device)
        if not op.backward:
            return Call(x, self.dim, op, backend, keep)
        if self.grad is None:
            raise ValueError(f"Case.grad: {op.name} takes a gradient; the case has none")
        forward_call = (Call(x.cpu(), self.dim, LOG_SOFTMAX_FORWARD, backend) if op.log else
                        Call(x.cpu(), self.dim, SAFE_SOFTMAX, backend, torch.ones(x.shape, dtype=torch.bool)))
        forward = correctly_rounded.softmax(forward_call).rounded
        moved = torch.from_numpy(forward).reshape(x.cpu().movedim(self.dim, -1).shape).movedim(-1, self.dim)
        g = torch.Generator().manual_seed(self.seed ^ GRAD_SEED)
        # Scaled down by a power of two (before rounding to the dtype), so that nothing a backward computes overflows:
        # halved for the softmax's, whose g_j - sum g y is at most twice the largest |g|; for the log_softmax's, whose
        # sum g counts every entry, by the next power of two at least twice the row's length.
        scale = 2 * (1 << max(self.row_length - 1, 0).bit_length()) if op.log else 2
        grad = (VALUE_CLASSES[self.grad.kind].make(self.grad.scale, self.shape, self.dtype, self.dim, g) / scale).to(
            self.dtype)
        grad = self.grad_specials.apply(grad, self.dim, g)
        grad_layout = self.grad_layout or self.layout or self.packed
        return Call(self.place(moved.to(self.dtype), device), self.dim, op, backend, grad=grad_layout.view(grad, device))

    def scaled_call(self, op: Operation, backend: str, device="cpu") -> Call:
        """The call of the scaled softmax ``op`` on this case's input with its scale (and bias, its values seeded apart).
        A biased call's finite logits beyond (max - 2^15) / scale in magnitude are brought to it, so that
        scale * x + bias, with the bias within BIAS_LIMIT, stays finite in the input dtype: past its range the softmax
        of an input-dtype expression (torch's eager one) is of infinities, and no construction is wrong to give them."""
        if self.scale is None or (op.biased and self.bias is None):
            raise ValueError(f"Case.scale{' and Case.bias' if op.biased else ''}: {op.name} takes them; the case has "
                             f"scale={self.scale!r}, bias={self.bias!r}")
        values, _ = self.logits()
        if not op.biased:
            return Call(self.place(values, device), self.dim, op, backend, scale=self.scale)
        limit = (torch.finfo(self.dtype).max - 2.0**15) / self.scale
        values = torch.where(values.isfinite() & (values.abs() > limit), values.sign() * limit, values).to(self.dtype)
        bias = self.bias.sample(self.shape, self.dim, self.dtype, torch.Generator().manual_seed(self.seed ^ BIAS_SEED))
        return Call(self.place(values, device), self.dim, op, backend, scale=self.scale, bias=bias.to(device))

    def place(self, values: torch.Tensor, device="cpu") -> torch.Tensor:
        """``values`` (of this case's shape) in this case's layout on ``device``: same strides and offset, so
        that a kernel compiled for one sees the other alike (Triton specialises on alignment)."""
        return (self.layout or self.packed).view(values, device)

    @property
    def packed(self) -> Layout:
        """The layout of a case without one: contiguous, no padding or offset."""
        return Layout(tuple(range(len(self.shape))), (1,) * len(self.shape))

    @property
    def layout_kind(self) -> str:
        return self.layout.kind if self.layout else CONTIGUOUS

    @property
    def grad_layout_kind(self) -> str:
        """A backward's gradient's layout class (its own, else x's)."""
        return self.grad_layout.kind if self.grad_layout else self.layout_kind

    @property
    def row_length(self) -> int:
        return self.shape[self.dim]

    @property
    def seam_placed(self) -> Seam | None:
        """The seam this case places, in its logits or as its mask's structure."""
        return self.seam or (self.mask.structure if self.mask is not None else None)


def matrix(rows: int, cols: int, dtype=torch.float32, values: Values = Values("normal"), seed: int = 0,
           **kw) -> Case:
    """A contiguous rows x cols case (softmax over the last dim): the documents' kind of input."""
    return Case((rows, cols), 1, dtype, values, seed=seed, **kw)


def usable_dtypes(capabilities: Capabilities, dtypes=None) -> list[torch.dtype]:
    """The dtypes drawn for a kernel: those asked for (by default every tested one and fp64) that it declares."""
    return sorted(set(dtypes or TESTED_DTYPES + (torch.float64,)) & set(capabilities.dtypes), key=str)


def longest_row(capabilities: Capabilities, backend: str, dtype: torch.dtype, caps: SizeCaps) -> int:
    """The longest row drawn for a kernel: the backend's size caps, and the kernel's own row limit."""
    limit = capabilities.row_limit(backend)
    return min(caps.max_row, caps.elements(dtype), limit or caps.max_row)


def longest_seam_row(capabilities: Capabilities, backend: str, dtype: torch.dtype, caps: SizeCaps) -> int:
    """The longest row a seam is placed in: past the backend's row cap, up to the elements of one example (two
    tiles and more of the largest tile a kernel uses), within the kernel's row limit and offsets."""
    longest = min(caps.elements(dtype), capabilities.row_limit(backend) or caps.elements(dtype))
    return min(longest, capabilities.max_offset + 1) if capabilities.max_offset is not None else longest


def seam_rows(capabilities: Capabilities, backend: str, dtype: torch.dtype, caps: SizeCaps) -> dict[int, int]:
    """The tiles seams are placed at for a kernel, each with the longest row a seam there takes: at a declared
    code-path boundary past the row cap (:func:`longest_seam_row`), at the powers of two that kernels tile by
    when they declare none within it (:func:`longest_row`)."""
    declared = tuple(capabilities.path_boundaries.get(backend, ()))
    within, past = longest_row(capabilities, backend, dtype, caps), longest_seam_row(capabilities, backend, dtype, caps)
    return {t: past if t in declared else within for t in tiles(declared, backend)}


@st.composite
def cases(draw, capabilities: Capabilities, backend: str, *, dtypes=None, masked: bool = False,
          specials: bool = True, backward: bool = False, scaled: bool = False, biased: bool = False,
          size: SizeCaps | None = None) -> Case:
    """Inputs inside ``capabilities`` on ``backend``, of every shape, layout and value class (``backward``: with a
    gradient of any value class; ``scaled``: with a scale; ``biased``: and a bias).  A causal softmax's inputs are
    those of :func:`for_operation`'s capabilities."""
    caps = size or SIZE_CAPS[backend]
    dtype = draw(st.sampled_from(usable_dtypes(capabilities, dtypes)))
    boundaries = tuple(capabilities.path_boundaries.get(backend, ()))
    seam = None
    fitting = fitting_seams(seam_rows(capabilities, backend, dtype, caps))
    if specials and fitting and draw(st.integers(0, 3)) == 3:  # one draw in four: specials at seams
        seam = draw(st.sampled_from(fitting))  # shrinks toward the first
    shape, dim = draw(shapes(ranks=capabilities.ranks or {1, 2, 3, 4}, last_dim_only=capabilities.last_dim_only,
                             max_elements=caps.elements(dtype), max_row=longest_row(capabilities, backend, dtype, caps),
                             boundaries=boundaries, row_length=seam and seam.row_length))
    mask = draw(masks()) if masked else None
    if masked and seam is not None:  # a structure masks its columns; another placement goes into kept logits
        structured = PLACEMENTS[seam.placement].structure
        mask, seam = (replace(mask, keep=1.0, structure=seam), None) if structured else (ALL_KEPT, seam)
    return Case(
        shape=shape,
        dim=dim,
        dtype=dtype,
        values=draw(value_classes()),
        layout=draw(layouts(len(shape), dim, unit_row_stride=capabilities.unit_row_stride,
                            expandable=not capabilities.in_place)),
        specials=draw(special_values()) if specials else NO_SPECIALS,
        mask=mask,
        seed=draw(st.integers(0, 2**32 - 1)),
        seam=seam,
        grad=draw(value_classes()) if backward else None,
        grad_layout=draw(layouts(len(shape), dim, unit_row_stride=capabilities.unit_row_stride,
                                 expandable=not capabilities.in_place)) if backward else None,
        grad_specials=draw(special_values()) if backward and specials else NO_SPECIALS,
        scale=draw(scales()) if scaled else None,
        bias=draw(biases()) if biased else None,
    )
