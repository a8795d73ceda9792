"""The seam placements (harness/inputs/seams.py) put their values where kernels break, and declarations only add coverage."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings

from harness.inputs import coverage
from harness.inputs.seams import PLACEMENTS, POWERS, Seam, tiles, variants
from harness.inputs.strategies import SIZE_CAPS, Case, Mask, Values, cases
from specs.registry import HALF_AND_SINGLE, Capabilities

T = 8  # a tile small enough to read the rows below
NEG, FIN = "-", "."  # a row written as text: "-" a -inf entry, "." a finite one

# What each placement makes of rows at tiles of 8, row by row (the rule it is there for, as data).
EXPECTED_ROWS = {
    "first tile -inf": ["-" * 8 + "."],
    "last tile -inf": ["." * 8 + "-" * 8],
    "middle tile -inf": ["." * 8 + "-" * 8 + "."],
    "all -inf but one": ["-" * 16 + ".", "-" * 8 + "." + "-" * 8],
    "-inf heads kt±1": ["-" * 7 + "." * 11, "-" * 9 + "." * 9, "-" * 15 + "." * 3, "-" * 17 + "."],
    "-inf tails kt±1": ["." * 11 + "-" * 7, "." * 9 + "-" * 9, "." * 3 + "-" * 15, "." + "-" * 17],
    "lone -inf at seams": ["." * 7 + "-" + "." * 8, "." * 12 + "-" + "." * 3],
    "causal": ["." + "-" * 16, "." * 8 + "-" * 9, "." * 16 + "-"],
    "sliding window": ["." * 8 + "-" * 9, "-" + "." * 8 + "-" * 8, "-" * 8 + "." * 8 + "-", "-" * 9 + "." * 8],
    "key padding": ["." * 8 + "-" * 9],
    "left padding": ["-" * 9 + "." * 8],
    "block-sparse": ["-" * 8 + "." * 8 + "-", "." * 8 + "-" * 8 + "."],
    "fully masked rows": ["." * 9, "-" * 9],
}
LONE = {"lone NaN at seams": (math.nan, [7, 8, 12, 15]), "lone +inf at seams": (math.inf, [8, 15])}


def drawn(seam: Seam) -> np.ndarray:
    rows = variants(PLACEMENTS[seam.placement])
    return Case((rows, seam.row_length), 1, torch.float32, Values("normal"), seam=seam).make()[0].numpy()


def test_every_placement_has_its_rule_here():
    assert set(EXPECTED_ROWS) | set(LONE) == set(PLACEMENTS)


@pytest.mark.parametrize("name", sorted(EXPECTED_ROWS))
def test_a_placement_puts_minus_inf_exactly_where_it_says(name):
    x = drawn(Seam(name, T))
    assert ["".join(NEG if v == -math.inf else FIN for v in row) for row in x] == EXPECTED_ROWS[name]
    assert np.isfinite(x[~np.isneginf(x)]).all()


@pytest.mark.parametrize("name", sorted(LONE))
def test_a_lone_special_value_sits_at_a_tiles_first_or_last_element_or_past_the_first_tile(name):
    value, columns = LONE[name]
    x = drawn(Seam(name, T))
    special = np.isnan(x) if math.isnan(value) else x == value
    assert [list(np.flatnonzero(row)) for row in special] == [[c] for c in columns]


def test_a_structure_masks_what_it_would_set_to_minus_inf_and_nothing_else_is_a_structure():
    seam = Seam("causal", T)
    keep = Mask(keep=0.05, empty_rows=0.0, structure=seam).sample((3, 17), 1, torch.Generator().manual_seed(0))
    assert torch.equal(keep, ~seam.where((3, 17), 1))
    with pytest.raises(ValueError, match="Mask.structure must be None or a Seam"):
        Mask(structure=Seam("lone NaN at seams", T))


@pytest.mark.parametrize("kwargs,message", [({"placement": "first tile", "tile": 8}, "Seam.placement must be one of"),
                                            ({"placement": "causal", "tile": 0}, "Seam.tile must be a positive int"),
                                            ({"placement": "causal", "tile": True}, "Seam.tile must be a positive int")])
def test_a_seam_names_what_is_wrong_with_it(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Seam(**kwargs)


def test_a_seam_follows_the_softmax_dim_of_any_rank():
    x = Case((5, 17, 3), 1, torch.float32, seam=Seam("first tile -inf", T)).make()[0]
    assert torch.isneginf(x[:, :T, :]).all() and torch.isfinite(x[:, T:, :]).all()


def test_tiles_are_the_declared_boundaries_and_the_powers_that_kernels_use():
    assert POWERS["cpu"] == (16, 64, 256, 1024, 4096) and POWERS["cuda"][-1] == 16384
    assert tiles((1000, 3000), "cpu") == (16, 64, 256, 1000, 1024, 3000, 4096)


BOUNDARIES = [(256,), (1024,), (4096,), (1000, 3000), (2048, 4096)]
CONTRACTS = {"2-D, last dim": Capabilities(dtypes=HALF_AND_SINGLE, ranks=frozenset({2}), last_dim_only=True),
           "torch's contract": Capabilities()}


def cells_drawn(capabilities: Capabilities, masked: bool) -> set:
    boundaries = capabilities.path_boundaries.get("cpu", ())
    return {cell for case in coverage.sweep(capabilities, "cpu", (torch.float32,), masked=masked)
            for cell in coverage.cells_of(case, case.make()[0], boundaries)}


@pytest.mark.parametrize("masked", [False, True], ids=["softmax", "masked"])
@pytest.mark.parametrize("contract", sorted(CONTRACTS))
@pytest.mark.parametrize("boundaries", BOUNDARIES, ids=str)
def test_declaring_a_boundary_only_adds_cells_and_lengths(contract, boundaries, masked):
    plain = CONTRACTS[contract]
    declared = Capabilities(**{**plain.__dict__, "path_boundaries": {"cpu": boundaries}})
    assert cells_drawn(plain, masked) <= cells_drawn(declared, masked)
    lengths = lambda capabilities: {c.row_length for c in coverage.sweep(capabilities, "cpu", (torch.float32,))}
    assert lengths(plain) <= lengths(declared)
    assert coverage.space(plain, "cpu", (torch.float32,)).cells() <= coverage.space(declared, "cpu", (torch.float32,)).cells()


@pytest.mark.parametrize("boundary", [256, 1024, 4096])
def test_a_declared_tile_gets_every_placement_past_the_row_cap(boundary):
    declared = Capabilities(dtypes=HALF_AND_SINGLE, ranks=frozenset({2}), last_dim_only=True,
                            path_boundaries={"cpu": (boundary,)})
    sweep = coverage.sweep(declared, "cpu", (torch.float32,))
    assert {Seam(name, boundary) for name in PLACEMENTS} <= {case.seam_placed for case in sweep}
    longest = max(case.row_length for case in sweep if case.seam_placed and case.seam_placed.tile == boundary)
    assert longest == max(p.length(boundary) for p in PLACEMENTS.values())  # 2 tiles + 2, past the CPU's cap at 4096


@settings(max_examples=200, deadline=None, database=None)
@given(case=cases(Capabilities(dtypes=HALF_AND_SINGLE, ranks=frozenset({2}), last_dim_only=True, max_offset=20_000,
                               path_boundaries={"cpu": (4096,)}), "cpu", masked=True))
def test_drawn_seams_stay_inside_the_capabilities_and_the_size_caps(case):
    caps = SIZE_CAPS["cpu"]
    assert math.prod(case.shape) <= caps.elements(case.dtype)
    seam = case.seam_placed
    if seam is not None:
        assert case.row_length == seam.row_length
        assert seam.tile == 4096 or seam.row_length <= caps.max_row  # only a declared tile goes past the row cap
        assert case.seam is None or case.mask in (None, Mask(keep=1.0, empty_rows=0.0))
        assert case.row_length <= 20_001  # a row the kernel's offsets reach (the rest of a shape may be refused)


def test_the_strategies_draw_seams():
    found = set()

    @settings(max_examples=300, deadline=None, database=None)
    @given(case=cases(Capabilities(), "cpu"))
    def collect(case):
        if case.seam is not None:
            found.add(case.seam.placement)

    collect()
    assert len(found) >= len(PLACEMENTS) // 2, found
