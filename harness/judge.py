"""Judge a kernel's output element by element against the correctly rounded oracle."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from oracles.budget import provisional_ulp_budget
from oracles.formats import Format, format_of
from oracles.mp_softmax import correctly_rounded_rows
from oracles.ulp import fractional_ulp_error, ulp_distance


def as_rows(t: torch.Tensor, dim: int) -> torch.Tensor:
    """The slices along ``dim`` as rows of a 2-D CPU tensor (dtype kept)."""
    moved = t.detach().to("cpu").movedim(dim, -1)
    return moved.reshape(-1, moved.shape[-1]) if moved.dim() else moved.reshape(1, 1)


def describe_input(x: torch.Tensor, dim: int) -> str:
    return (f"shape={tuple(x.shape)} strides={tuple(x.stride())} offset={x.storage_offset()} "
            f"dtype={x.dtype} dim={dim} device={x.device}")


@dataclass
class Judgement:
    """Errors of one kernel output against the oracle, and the verdict."""

    kernel: str
    fmt: Format
    inputs: torch.Tensor  # rows (2-D, CPU)
    outputs: torch.Tensor  # rows (2-D, CPU)
    rounded: np.ndarray  # correctly rounded results, float64
    ulps: np.ndarray  # integer ULP distance to `rounded`
    fractional: np.ndarray  # |y - exact| / ulp(exact)
    budget: np.ndarray  # allowed integer ULP distance per element
    replay: str

    @property
    def violations(self) -> np.ndarray:
        return self.ulps > self.budget

    @property
    def ok(self) -> bool:
        return not self.violations.any()

    @property
    def max_ulp(self) -> int:
        return int(self.ulps.max(initial=0))

    def explain(self) -> str:
        bad = self.violations
        worst = np.unravel_index(int(np.argmax(np.where(bad, self.ulps, -1) if bad.any() else self.ulps)),
                                 self.ulps.shape)
        row, col = (int(i) for i in worst)
        return "\n".join([
            f"{self.kernel}: {int(bad.sum())} of {bad.size} elements beyond the budget "
            f"(max {self.max_ulp} ULP, max fractional {self.fractional.max(initial=0):.3g} ULP, {self.fmt})",
            f"worst element: row {row}, column {col}: got {float(self.outputs[row, col])!r}, "
            f"correctly rounded {self.rounded[row, col]!r}, {int(self.ulps[row, col])} ULP, "
            f"budget {int(self.budget[row, col])} ULP",
            f"that row's input (first 8 of {self.inputs.shape[1]}): {self.inputs[row, :8].tolist()}",
            f"replay: {self.replay}",
        ])


def judge_softmax(kernel: str, x: torch.Tensor, dim: int, y: torch.Tensor, *, replay: str) -> Judgement:
    """Compare ``y = kernel(x, dim)`` with the correctly rounded softmax of ``x``."""
    if y.shape != x.shape or y.dtype != x.dtype:
        raise AssertionError(f"{kernel}: output {tuple(y.shape)} {y.dtype} does not match input "
                             f"{tuple(x.shape)} {x.dtype}; replay: {replay}")
    fmt = format_of(x.dtype)
    inputs, outputs = as_rows(x, dim), as_rows(y, dim)
    rounded, exact = correctly_rounded_rows(inputs.double().numpy(), fmt)
    ulps = ulp_distance(outputs, torch.from_numpy(rounded).to(x.dtype)).numpy()
    fractional = fractional_ulp_error(outputs.double().numpy(), exact, fmt)
    budget = np.full(ulps.shape, provisional_ulp_budget(x.dtype))
    return Judgement(kernel, fmt, inputs, outputs, rounded, ulps, fractional, budget, replay)
