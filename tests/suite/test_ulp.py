"""ULP distance: exhaustive over fp16 and bf16, properties over fp32 and fp64."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from oracles.formats import FP32, FP64, format_of
from oracles.ulp import UNRELATED, fractional_ulp_error, ulp_distance

HALF_FORMATS = [torch.float16, torch.bfloat16]


def all_patterns(dtype: torch.dtype) -> torch.Tensor:
    """Every one of the 65536 values of a 16-bit float format."""
    return torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(dtype)


def rank_distance(a: torch.Tensor, b: torch.Tensor, universe: torch.Tensor) -> np.ndarray:
    """Independent definition: how many finite values of the format lie between a and b.

    Ranks come from sorting the format's finite values (-0 and +0 compare equal,
    so they share a rank), not from bit patterns.  NaN and infinities follow the
    rules documented in oracles.ulp.
    """
    values = universe.double().numpy()
    ladder = np.unique(values[np.isfinite(values)])
    av, bv = a.double().numpy(), b.double().numpy()
    with np.errstate(invalid="ignore"):
        ranks_a = np.searchsorted(ladder, np.where(np.isfinite(av), av, 0))
        ranks_b = np.searchsorted(ladder, np.where(np.isfinite(bv), bv, 0))
    expected = np.abs(ranks_a - ranks_b).astype(np.int64)
    a_nan, b_nan = np.isnan(av), np.isnan(bv)
    special = ~np.isfinite(av) | ~np.isfinite(bv)
    same_special = (av == bv) | (a_nan & b_nan)
    return np.where(special, np.where(same_special, 0, UNRELATED), expected)


@pytest.mark.parametrize("dtype", HALF_FORMATS, ids=str)
def test_exhaustive_against_value_ranks(dtype):
    universe = all_patterns(dtype)
    generator = torch.Generator().manual_seed(0)
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan")], dtype=dtype)
    extremes = torch.stack([torch.tensor(v, dtype=dtype) for v in (
        torch.finfo(dtype).max, -torch.finfo(dtype).max, torch.finfo(dtype).smallest_normal,
        torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps)])
    partners = torch.cat([special, extremes, universe[torch.randint(0, 1 << 16, (53,), generator=generator)]])
    neighbours = universe.view(torch.int16).roll(1).view(dtype)
    checked = 0
    for b in [universe, neighbours, *(p.expand(universe.shape) for p in partners)]:
        got = ulp_distance(universe, b).numpy()
        np.testing.assert_array_equal(got, rank_distance(universe, b, universe))
        np.testing.assert_array_equal(got, ulp_distance(b, universe).numpy())
        checked += universe.numel()
    assert checked == (2 + len(partners)) * 65536


@pytest.mark.parametrize("dtype", HALF_FORMATS, ids=str)
def test_every_step_is_one_ulp(dtype):
    universe = all_patterns(dtype).double()
    ladder = torch.from_numpy(np.unique(universe[universe.isfinite()].numpy())).to(dtype)
    steps = ulp_distance(ladder[:-1], ladder[1:])
    assert torch.all(steps == 1), ladder[:-1][steps != 1]


finite_fp32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
finite_fp64 = st.floats(allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize("dtype,values", [(torch.float32, finite_fp32), (torch.float64, finite_fp64)], ids=str)
def test_wide_formats_are_additive_and_symmetric(dtype, values):
    @given(st.lists(values, min_size=3, max_size=3))
    def check(triple):
        a, b, c = torch.tensor(sorted(triple), dtype=dtype)
        assert ulp_distance(a, c) == ulp_distance(a, b) + ulp_distance(b, c) or ulp_distance(a, c) == UNRELATED
        assert ulp_distance(a, b) == ulp_distance(b, a)
        nxt = torch.nextafter(b, torch.tensor(float("inf"), dtype=dtype))
        assert ulp_distance(b, nxt) == (1 if nxt.isfinite() else UNRELATED)

    check()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_wide_format_special_values(dtype):
    tiny = torch.tensor(format_of(dtype).min_subnormal, dtype=dtype)
    inf, nan = torch.tensor(float("inf"), dtype=dtype), torch.tensor(float("nan"), dtype=dtype)
    biggest = torch.tensor(torch.finfo(dtype).max, dtype=dtype)
    assert ulp_distance(torch.tensor(0.0, dtype=dtype), torch.tensor(-0.0, dtype=dtype)) == 0
    assert ulp_distance(tiny, -tiny) == 2
    assert ulp_distance(nan, nan) == 0
    assert ulp_distance(nan, tiny) == UNRELATED
    assert ulp_distance(inf, biggest) == UNRELATED
    assert ulp_distance(-inf, -inf) == 0
    assert ulp_distance(biggest, -biggest) == (UNRELATED if dtype == torch.float64 else 2 * 0x7F7FFFFF)


def test_mismatched_arguments_are_refused():
    with pytest.raises(TypeError, match="dtype"):
        ulp_distance(torch.zeros(2), torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        ulp_distance(torch.zeros(2), torch.zeros(3))
    with pytest.raises(TypeError, match="dtype"):
        ulp_distance(torch.zeros(2, dtype=torch.int32), torch.zeros(2, dtype=torch.int32))


def test_fractional_error_of_correct_rounding_is_at_most_half():
    exact = np.array([1 / 3, 2 / 3, 1e-40, 0.1])
    rounded = exact.astype(np.float32).astype(np.float64)
    errors = fractional_ulp_error(rounded, exact, FP32)
    assert np.all(errors <= 0.5) and np.all(errors > 0)
    one_off = np.nextafter(rounded.astype(np.float32), np.float32(1)).astype(np.float64)
    assert np.all(fractional_ulp_error(one_off, exact, FP32) > 0.5)
    assert fractional_ulp_error(np.array([np.nan]), np.array([0.5]), FP64)[0] == np.inf
    assert fractional_ulp_error(np.array([np.nan]), np.array([np.nan]), FP64)[0] == 0
