"""The derived bounds are honest both ways: torch stays inside, they are tight, and they catch."""

import numpy as np
import pytest
import torch
from hypothesis import given

from harness.judge import measure
from harness.strategies import TESTED_DTYPES, cases
from kernels.registry import Capabilities
from oracles import correctly_rounded
from oracles.bounds import Reduction
from oracles.formats import format_of, ulp
from oracles.profiles import torch_profile, unknown_profile

TIGHTNESS = 4  # the bound may exceed the largest observed error by at most this factor


@given(case=cases(Capabilities(), "cpu"))
def test_torch_on_the_cpu_stays_within_the_bound(case):
    x, _ = case.make("cpu")
    errors = measure("torch", x, case.dim, torch.softmax(x, case.dim), correctly_rounded.softmax(x, case.dim),
                     torch_profile("cpu", x, case.dim))
    assert not errors.violations.any(), f"{case!r}: {errors.summary()}"


def fixed_rows(dtype: torch.dtype) -> torch.Tensor:
    """A fixed input set: random rows, and short rows whose gap x_i - max rounds in fp32."""
    generator = torch.Generator().manual_seed(3)
    random_rows = torch.randn(32, 64, generator=generator, dtype=torch.float64) * 30
    # x_i in [-21, -20) are multiples of 2^-19; the maximum 40.0625 puts the gaps near -60,
    # where fp32 spacing is 2^-18: half the gaps round, by half an ulp.
    gaps = -20 - torch.rand(32, 3, generator=generator, dtype=torch.float64)
    short_rows = torch.cat([torch.full((32, 1), 40.0625, dtype=torch.float64), gaps], dim=1)
    short_rows = torch.nn.functional.pad(short_rows, (0, 60), value=-torch.inf)
    return torch.cat([random_rows, short_rows]).to(dtype)


@pytest.mark.parametrize("dtype", TESTED_DTYPES, ids=str)
def test_bound_is_tight_on_a_fixed_input_set(kernel, backend, dtype, note):
    """Tight for torch.softmax (the bound's model of a plain fp32 softmax); a figure for other kernels.

    A kernel that removes the dominant error terms (full_softmax recovers the gap's
    rounding) sits further below worst-case sum bounds; its ratio is reported.
    """
    if kernel.precision is unknown_profile:
        pytest.skip(f"{kernel.name} declares no precision profile: it is judged with the loosest one")
    if dtype not in kernel.capabilities.dtypes:
        pytest.skip(f"{kernel.name} does not declare {dtype}")
    x = fixed_rows(dtype).to(backend.device)
    errors = measure(kernel.name, x, -1, kernel.softmax(x, -1), correctly_rounded.softmax(x, -1),
                     kernel.precision(backend.name, x, -1))
    ratio = errors.ratio().max()
    note(f"{dtype}: largest error-to-bound ratio {ratio:.3f} ({errors.profile.name})")
    assert not errors.violations.any()
    if kernel.name == "torch":
        assert ratio * TIGHTNESS >= 1, f"bound looser than {TIGHTNESS}x the largest error: ratio {ratio:.3f}"


def perturbed(value: float, exact: float, steps: float, dtype: torch.dtype) -> float:
    """The value of dtype at least ``steps`` ulps of ``exact`` away from ``exact``, above it."""
    target = exact + steps * float(ulp(np.array(exact), format_of(dtype)))
    candidate = torch.tensor(target, dtype=torch.float64).to(dtype)
    if float(candidate) < target:
        candidate = torch.nextafter(candidate, torch.tensor(np.inf, dtype=dtype))
    return float(candidate)


@pytest.mark.parametrize("dtype", TESTED_DTYPES, ids=str)
def test_an_output_off_by_twice_the_bound_is_caught(dtype):
    x = (torch.randn(8, 300, generator=torch.Generator().manual_seed(4)) * 4).to(dtype)
    y = torch.softmax(x, -1)
    oracle = correctly_rounded.softmax(x, -1)
    profile = torch_profile("cpu", x, -1)
    clean = measure("torch", x, -1, y, oracle, profile)
    assert not clean.violations.any()
    row, col = np.unravel_index(int(np.argmax(clean.bound)), clean.bound.shape)
    bad = y.clone()
    bad[row, col] = perturbed(float(y[row, col]), oracle.exact[row, col], 2 * clean.bound[row, col], dtype)
    caught = measure("torch", x, -1, bad, oracle, profile).violations
    assert caught[row, col] and caught.sum() == 1


@pytest.mark.parametrize("reduction", [Reduction("sequential"), Reduction("numpy-pairwise-block"),
                                       Reduction("triton-block", num_warps=4), Reduction("triton-block", 16)],
                         ids=lambda r: f"{r.kind}-{r.num_warps}")
def test_reduction_depths_never_exceed_the_order_free_bound(reduction):
    for n in [1, 2, 3, 7, 8, 9, 100, 128, 129, 781, 4096, 65537]:
        block = 1 << (n - 1).bit_length()
        assert 0 <= reduction.depth(n) <= block - 1
    assert Reduction("numpy-pairwise-block").depth(4096) < 30  # pairwise: logarithmic, not linear
    assert Reduction("triton-block", num_warps=4).depth(4096) == 4096 // 128 - 1 + 7
