"""Judge a kernel's output element by element: oracle, derived bound, and torch as a peer.

Every element is compared with the correctly rounded result (integer ULP
distance, for the statistics) and with the exact result (fractional ULP error,
for the verdict): an element fails when its fractional error exceeds the
derived bound of :mod:`oracles.bounds` for the kernel's precision profile.
Elements decided by special values (NaN rows, zeros at -inf) must equal the
oracle exactly.  torch.softmax runs on the same input and device and is
measured the same way, so every verdict can say "kernel vs torch".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from kernels import torch_softmax
from kernels.registry import KernelSpec
from oracles import correctly_rounded
from oracles.bounds import PrecisionProfile, log_softmax_bound, softmax_bound
from oracles.correctly_rounded import OracleResult
from oracles.formats import Format, format_of
from oracles.ulp import fractional_ulp_error, ulp_distance


def as_rows(t: torch.Tensor, dim: int) -> torch.Tensor:
    """The slices along ``dim`` as rows of a 2-D CPU tensor (dtype kept)."""
    moved = t.detach().to("cpu").movedim(dim, -1)
    return moved.reshape(math.prod(moved.shape[:-1]), moved.shape[-1])


def describe_input(x: torch.Tensor, dim: int) -> str:
    return (f"shape={tuple(x.shape)} strides={tuple(x.stride())} offset={x.storage_offset()} "
            f"dtype={x.dtype} dim={dim} device={x.device}")


@dataclass
class Errors:
    """One implementation's output against the oracle, element by element (rows layout)."""

    name: str
    profile: PrecisionProfile
    outputs: torch.Tensor  # rows, CPU, output dtype
    ulps: np.ndarray  # integer distance to the correctly rounded value
    fractional: np.ndarray  # |y - exact| / ulp(exact)
    bound: np.ndarray  # derived bound in fractional ulps; NaN where the oracle is exact by semantics

    @property
    def special(self) -> np.ndarray:
        return np.isnan(self.bound)

    @property
    def violations(self) -> np.ndarray:
        judged = np.where(self.special, 0.0, self.bound)
        beyond = ~(self.fractional <= judged)  # also catches NaN outputs
        return (self.ulps != 0) & np.where(self.special, True, beyond | np.isinf(judged))

    def ratio(self) -> np.ndarray:
        """Error-to-bound ratio of the elements judged by a bound."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.special, 0.0, self.fractional / self.bound)

    def summary(self) -> dict:
        judged = ~self.special
        ulps = self.ulps[judged].astype(np.float64)
        return {
            "name": self.name,
            "profile": self.profile.name,
            "elements": int(self.ulps.size),
            "violations": int(self.violations.sum()),
            "max_ulp": float(ulps.max(initial=0)),
            "mean_ulp": float(ulps.mean()) if ulps.size else 0.0,
            "p99_ulp": float(np.percentile(ulps, 99)) if ulps.size else 0.0,
            "correctly_rounded": float((self.ulps == 0).mean()) if self.ulps.size else 1.0,
            "max_fractional_ulp": float(self.fractional[judged].max(initial=0)),
            "max_bound": float(self.bound[judged].max(initial=0)),
            "worst_ratio": float(self.ratio().max(initial=0)),
        }


def measure(name: str, x: torch.Tensor, dim: int, y: torch.Tensor, oracle: OracleResult,
            profile: PrecisionProfile, *, log: bool = False) -> Errors:
    """Errors of ``y`` (an implementation's softmax, or log_softmax, of ``x`` along ``dim``) against ``oracle``.

    A result equal to the correctly rounded value is never beyond its bound; where
    that value overflowed to an infinity, its fractional error counts as 0.5.
    """
    fmt = format_of(y.dtype)
    outputs = as_rows(y, dim)
    expected = torch.from_numpy(oracle.rounded).to(fmt.dtype)
    ulps = ulp_distance(outputs, expected).numpy()
    fractional = fractional_ulp_error(outputs.double().numpy(), oracle.exact, fmt)
    bound = log_softmax_bound if log else softmax_bound
    return Errors(
        name, profile, outputs, ulps=ulps,
        fractional=np.where((ulps == 0) & np.isinf(fractional), 0.5, fractional),
        bound=bound(as_rows(x, dim).double().numpy(), oracle.exact, fmt, profile),
    )


@dataclass
class Judgement:
    kernel: Errors
    peer: Errors
    fmt: Format
    inputs: torch.Tensor  # rows, CPU
    rounded: np.ndarray  # correctly rounded results
    exact: np.ndarray  # exact results (float64)
    escalated: int
    replay: str

    @property
    def ok(self) -> bool:
        return not self.kernel.violations.any()

    def summary(self) -> dict:
        return {"dtype": str(self.fmt), "kernel": self.kernel.summary(), "torch": self.peer.summary(),
                "oracle_escalated": self.escalated, "replay": self.replay}

    def explain(self) -> str:
        k = self.kernel
        bad = k.violations
        score = np.where(bad, np.nan_to_num(k.ratio(), nan=np.inf, posinf=np.inf) + 1, 0)
        row, col = (int(i) for i in np.unravel_index(int(np.argmax(score)), score.shape))
        kernel, peer = k.summary(), self.peer.summary()
        return "\n".join([
            f"{k.name}: {int(bad.sum())} of {bad.size} elements beyond the derived bound ({self.fmt}, {k.profile.name})",
            f"worst element: row {row}, column {col}: got {float(k.outputs[row, col])!r}, correctly rounded "
            f"{self.rounded[row, col]!r}, {k.fractional[row, col]:.4g} ULP from exact, bound {k.bound[row, col]:.4g} ULP",
            f"that row's input (first 8 of {self.inputs.shape[1]}): {self.inputs[row, :8].tolist()}",
            f"kernel: max {kernel['max_ulp']:.0f} ULP, mean {kernel['mean_ulp']:.3f}; "
            f"torch on the same input: max {peer['max_ulp']:.0f} ULP, mean {peer['mean_ulp']:.3f}",
            f"replay: {self.replay}",
        ])


def run_kernel(kernel: KernelSpec, x: torch.Tensor, dim: int, mask: torch.Tensor | None = None, *,
               log: bool = False, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """The kernel's softmax, log_softmax or masked softmax, in ``out_dtype`` when one is asked for."""
    extra = {} if out_dtype is None else {"out_dtype": out_dtype}
    if mask is not None:
        return kernel.masked_softmax(x, mask, dim, **extra)
    return (kernel.log_softmax if log else kernel.softmax)(x, dim, **extra)


def judge_softmax(kernel: KernelSpec, backend: str, x: torch.Tensor, dim: int, y: torch.Tensor, *,
                  mask: torch.Tensor | None = None, log: bool = False, out_dtype: torch.dtype | None = None,
                  replay: str) -> Judgement:
    """Judge ``y``, the kernel's (masked, log) softmax of ``x`` on ``backend``, with torch as the peer."""
    expected_dtype = out_dtype or x.dtype
    if y.shape != x.shape or y.dtype != expected_dtype:
        raise AssertionError(f"{kernel.name}: output {tuple(y.shape)} {y.dtype}, expected {tuple(x.shape)} "
                             f"{expected_dtype}; replay: {replay}")
    oracle = correctly_rounded.softmax(x, dim, log=log, mask=mask, out_dtype=out_dtype)
    logits = x if mask is None else x.masked_fill(~mask, -torch.inf)  # what the bound sees
    peer = torch_softmax.SPEC
    peer_y = run_kernel(peer, x, dim, mask, log=log, out_dtype=out_dtype)
    return Judgement(
        kernel=measure(kernel.name, logits, dim, y, oracle, kernel.precision(backend, x, dim, log), log=log),
        peer=measure(peer.name, logits, dim, peer_y, oracle, peer.precision(backend, x, dim, log), log=log),
        fmt=format_of(expected_dtype), inputs=as_rows(x, dim), rounded=oracle.rounded, exact=oracle.exact,
        escalated=oracle.escalated, replay=replay,
    )
