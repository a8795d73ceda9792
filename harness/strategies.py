"""Hypothesis strategies for kernel inputs.

Large tensors are not drawn element by element: Hypothesis draws what shapes
the test (dimensions, dtype, scale, a seed) and torch regenerates the values
from the seed, so every example is replayed from its printed description.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

TESTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
SCALES = (1e-2, 1.0, 4.0)


@dataclass(frozen=True)
class NormalMatrix:
    """rows x cols values drawn from N(0, scale^2) with torch's generator seeded by ``seed``."""

    rows: int
    cols: int
    dtype: torch.dtype
    scale: float
    seed: int

    def make(self, device: torch.device | str = "cpu") -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed)
        values = torch.randn(self.rows, self.cols, generator=generator, dtype=torch.float64) * self.scale
        return values.to(self.dtype).to(device)


def normal_matrices(
    *, max_rows: int = 64, max_cols: int = 2048, dtypes=TESTED_DTYPES, scales=SCALES
) -> st.SearchStrategy[NormalMatrix]:
    """Matrices of irregular shape (rows 1..max_rows, cols 1..max_cols) and normal values."""
    return st.builds(
        NormalMatrix,
        rows=st.integers(1, max_rows),
        cols=st.integers(1, max_cols),
        dtype=st.sampled_from(dtypes),
        scale=st.sampled_from(scales),
        seed=st.integers(0, 2**32 - 1),
    )
