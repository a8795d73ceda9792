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
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import torch

from oracles import backward, correctly_rounded, semantics
from oracles import logits as scaled_logits
from oracles.bounds import (PrecisionProfile, log_softmax_backward_bound, log_softmax_bound, softmax_backward_bound,
                            softmax_bound)
from oracles.call import Call
from oracles.correctly_rounded import OracleResult
from oracles.formats import Format, format_of, judging_unit
from oracles.ulp import UNRELATED, fractional_ulp_error, ulp_distance
from specs import torch_softmax
from specs.registry import KernelSpec, unknown_profile

from ..device import tiling
from ..guard.calls import ContractBroken, SuiteFailure, describe_input  # noqa: F401  (the tests import describe_input here)


class BeyondBound(SuiteFailure):
    """A kernel's output broke its derived bounds (or a special value); carries the one-step replay command."""


def as_rows(t: torch.Tensor, dim: int) -> torch.Tensor:
    """The slices along ``dim`` as rows of a 2-D CPU tensor (dtype kept)."""
    moved = t.detach().to("cpu").movedim(dim, -1)
    return moved.reshape(math.prod(moved.shape[:-1]), moved.shape[-1])


@dataclass(frozen=True)
class Measurement:
    """One implementation's output against the oracle, element by element (rows layout).

    Its derived arrays and statistics are computed once: the verdict, the record and Hypothesis's
    target phase each read them, and on a 2^20-element output each pass costs milliseconds.
    """

    name: str
    profile: PrecisionProfile
    outputs: torch.Tensor  # rows, CPU, output dtype
    ulps: np.ndarray  # integer distance to the correctly rounded value
    fractional: np.ndarray  # |y - exact| / ulp(exact)
    bound: np.ndarray  # derived bound in fractional ulps; NaN where the oracle is exact by semantics

    @cached_property
    def special(self) -> np.ndarray:
        return np.isnan(self.bound)

    @cached_property
    def violations(self) -> np.ndarray:
        judged = np.where(self.special, 0.0, self.bound)
        beyond = ~(self.fractional <= judged)  # also catches NaN outputs
        return (self.ulps != 0) & np.where(self.special, True, beyond | np.isinf(judged))

    def ratio(self) -> np.ndarray:
        """Error-to-bound ratio of the elements judged by a bound."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.special, 0.0, self.fractional / self.bound)

    def summary(self) -> dict:
        """Statistics of the elements judged by a bound; a NaN or infinity where the oracle's result is
        finite (or the reverse) is counted apart, as ``non_finite``: no ULP distance means anything there.
        ``special_misses`` counts the elements the special values decide (exact by semantics) that are not
        the oracle's: violations no ULP figure shows."""
        return dict(self._statistics)

    @cached_property
    def _statistics(self) -> dict:
        judged = ~self.special
        related = judged & (self.ulps != UNRELATED)
        ulps = self.ulps[related].astype(np.float64)
        return {
            "name": self.name,
            "profile": self.profile.name,
            "elements": int(self.ulps.size),
            "violations": int(self.violations.sum()),
            "non_finite": int((judged & ~related).sum()),
            "special_misses": int((self.violations & self.special).sum()),
            "max_ulp": float(ulps.max(initial=0)),
            "mean_ulp": float(ulps.mean()) if ulps.size else 0.0,
            "p99_ulp": float(np.percentile(ulps, 99)) if ulps.size else 0.0,
            "correctly_rounded": float((self.ulps == 0).mean()) if self.ulps.size else 1.0,
            "max_fractional_ulp": float(self.fractional[judged].max(initial=0)),
            "max_bound": float(self.bound[judged].max(initial=0)),
            "worst_ratio": float(self.ratio().max(initial=0)),
        }


def measure(name: str, call: Call, y: torch.Tensor, oracle: OracleResult, profile: PrecisionProfile) -> Measurement:
    """The errors of ``y`` (an implementation's result for ``call``) against ``oracle``, and the bounds derived from
    ``profile``.

    A result equal to the correctly rounded value is never beyond its bound; where
    that value overflowed to an infinity, its fractional error counts as 0.5.
    """
    fmt = format_of(y.dtype)
    outputs = as_rows(y, call.dim)
    expected = torch.from_numpy(oracle.rounded).to(fmt.dtype)
    ulps = ulp_distance(outputs, expected).numpy()
    fractional = fractional_ulp_error(outputs.double().numpy(), oracle.exact, fmt, unit=judging_unit)  # the bound's
    bound = bounds(call, oracle, fmt, profile)
    if call.operation.backward:  # NaN for an infinity of the definition is accepted (oracles/semantics.py)
        ulps = np.where(np.isnan(bound) & semantics.nan_for_infinity(oracle.rounded, outputs.double().numpy()), 0, ulps)
    return Measurement(
        name, profile, outputs, ulps=ulps,
        fractional=np.where((ulps == 0) & np.isinf(fractional), 0.5, fractional),
        bound=bound,
    )


def oracle_of(call: Call) -> OracleResult:
    """The correctly rounded result of ``call``, by its operation."""
    return backward.softmax_backward(call) if call.operation.backward else correctly_rounded.softmax(call)


def bounds(call: Call, oracle: OracleResult, fmt: Format, profile: PrecisionProfile) -> np.ndarray:
    """The derived bound of each element of ``call``'s result (rows), by its operation (:mod:`oracles.bounds`)."""
    if call.operation.backward:
        special, _, y, grad = backward.split_special(*(as_rows(t, call.dim).double().numpy() for t in (call.x, call.grad)),
                                                     log=call.log)
        bound = (log_softmax_backward_bound if call.log else softmax_backward_bound)(
            y, grad, np.where(special, 0.0, oracle.exact), fmt, profile)
        return np.where(special, np.nan, bound)  # exact by semantics
    logits = as_rows(call.logits, call.dim).double().numpy()
    if call.operation.scaled:
        ar = profile.arithmetic
        x = as_rows(call.x, call.dim).double().numpy()
        bias = None if call.bias is None else as_rows(call.bias.expand(call.x.shape), call.dim).double().numpy()
        formed = scaled_logits.candidates(x, bias, call.scale, logits, format_of(call.x.dtype),
                                          ar.scaled_logits if ar.known_construction else None, ar.compute,
                                          ar.fused_multiply_add)
        return softmax_bound(logits, oracle.exact, fmt, profile, formed)
    bound = log_softmax_bound if call.log else softmax_bound
    return bound(logits, oracle.exact, fmt, profile)


@dataclass
class Judgement:
    call: Call  # what was judged
    kernel: Measurement
    peer: Measurement
    fmt: Format
    inputs: torch.Tensor  # rows, CPU
    logits: torch.Tensor  # the rows as the oracle saw them (masked entries -inf), CPU
    rounded: np.ndarray  # correctly rounded results
    exact: np.ndarray  # exact results (float64)
    escalated: int
    replay: str  # how to rebuild the input (and replay the call), for the explanation
    command: str | None = None  # the one-step replay command, where the input has one

    @property
    def ok(self) -> bool:
        return not self.kernel.violations.any()

    def check(self, why: str = "") -> None:
        """Raise :class:`BeyondBound` with the explanation (after ``why``) unless every element is within its bound."""
        if not self.ok:
            raise BeyondBound(f"{why}{self.explain()}", self.command)

    def summary(self) -> dict:
        return {"dtype": str(self.fmt), "kernel": self.kernel.summary(), "torch": self.peer.summary(),
                "oracle_escalated": self.escalated, "replay": self.replay}

    def worst(self) -> tuple[int, int] | None:
        """The element a failure's explanation and the run's record both name (row, column of the rows): the worst
        violation (the largest error-to-bound ratio; a wrong special result counts as infinite), else the element
        judged by a bound nearest its bound; None where there is no element."""
        k = self.kernel
        if k.ulps.size == 0:
            return None
        ratio = np.nan_to_num(k.ratio(), nan=np.inf, posinf=np.inf)
        score = np.where(k.violations, ratio + 1, np.where(k.special, -1.0, np.minimum(ratio, 1)))
        row, col = np.unravel_index(int(np.argmax(score)), score.shape)
        return int(row), int(col)

    def explain(self) -> str:
        k = self.kernel
        if self.worst() is None:
            return f"{k.name}: no element to judge: {self.replay}"
        bad = k.violations
        row, col = self.worst()
        kernel, peer = k.summary(), self.peer.summary()
        specials = int((bad & k.special).sum())
        got, expected = float(k.outputs[row, col]), float(self.rounded[row, col])
        if k.special[row, col]:
            worst = f"got {got!r}, expected exactly {expected!r}: {self.why_exact(row)}"
        else:
            worst = (f"got {got!r}, correctly rounded {expected!r}, {k.fractional[row, col]:.4g} ULP from exact, "
                     f"bound {k.bound[row, col]:.4g} ULP")
        judged = int((~k.special).sum())
        return "\n".join([
            f"{k.name}: {int(bad.sum())} of {bad.size} elements beyond the derived bound ({self.fmt}, {k.profile.name})"
            + (f"; {specials} of them special: results that are exact whatever the rounding" if specials else ""),
            f"worst element: row {row}, column {col}: {worst}",
            f"that row's {'y' if self.call.operation.backward else 'input'} (first 8 of {self.inputs.shape[1]}): "
            f"{self.inputs[row, :8].tolist()}",
            *([f"that row's grad (first 8): {as_rows(self.call.grad, self.call.dim)[row, :8].tolist()}"]
              if self.call.operation.backward else []),
            f"kernel: {figures(kernel, judged)}; torch on the same input: {figures(peer, judged)} (of the {judged} "
            "elements judged by a bound)",
            f"input: {self.replay}",
        ])

    def why_exact(self, row: int) -> str:
        """Why the oracle's result for an element of this row is exact: the special case the row is."""
        if self.call.operation.backward:
            return "the row's y or grad holds a NaN or an infinity, and IEEE arithmetic on the definition gives this"
        return semantics.rule_of(self.logits[row].double().numpy()).why


def figures(summary: dict, judged: int) -> str:
    """The largest and mean ULP over the ``judged`` results that have a distance to the oracle's, and the NaN or inf
    that have none: a failure's "inf ULP from exact" is not followed by "max 0 ULP" unqualified."""
    n = summary["non_finite"]
    said = f"max {summary['max_ulp']:.0f} ULP, mean {summary['mean_ulp']:.3f} over {judged - n} result(s)"
    return said + (f", and {n} NaN or inf where the oracle's result is finite (or the reverse)" if n else "")


def unknown_construction(kernel: KernelSpec) -> KernelSpec:
    """``kernel`` judged as of unknown construction: outside what it declares, its precision model says nothing."""
    return replace(kernel, precision=unknown_profile)


def accepted_by_torch(x: torch.Tensor, dim: int) -> bool:
    try:
        torch.softmax(x, dim)
    except Exception:  # noqa: BLE001
        return False
    return True


def judge_softmax(kernel: KernelSpec, call: Call, y: torch.Tensor, *, replay: str,
                  command: str | None = None) -> Judgement:
    """Judge ``y``, the kernel's result for ``call``, with torch as the peer; warn where the kernel summed the call's
    rows in tiles while its precision model declares one (:mod:`harness.device.tiling`)."""
    x, expected_dtype = call.x, call.result_dtype
    if y.shape != x.shape or y.dtype != expected_dtype:  # not a verdict on numbers: no element has one to judge
        raise ContractBroken(f"{kernel.name}: the kernel returned a result of shape {tuple(y.shape)} and dtype "
                             f"{y.dtype} for {call.operation.name}, whose result has x's shape {tuple(x.shape)} and "
                             f"dtype {expected_dtype}; replay: {replay}", command)
    profile = kernel.precision(call)
    tiling.check(kernel.name, call, profile.reduction, kernel.capabilities.path_boundaries.get(call.backend, ()))
    oracle = oracle_of(call)
    peer = torch_softmax.SPEC
    inputs = as_rows(x, call.dim)
    return Judgement(
        call=call,
        kernel=measure(kernel.name, call, y, oracle, profile),
        peer=measure(peer.name, call, peer.run(call), oracle, peer.precision(call)),
        fmt=format_of(expected_dtype), inputs=inputs,
        logits=inputs if call.logits is x else as_rows(call.logits, call.dim),
        rounded=oracle.rounded, exact=oracle.exact, escalated=oracle.escalated, replay=replay, command=command,
    )
