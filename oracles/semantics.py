"""What softmax, log_softmax and masked softmax return for special values: the one table that defines it.

A row is one slice along the softmax dimension.  :data:`RULES` lists the special
cases, each a row predicate and the exact result it fixes for each operation;
a row follows the first rule that holds for it.  The oracles, the judge, the
strategies, the coverage matrix and the metamorphic tests all read this table,
and each rule is its own test id (``tests/kernel/test_special_cases.py`` judges
kernels by it, ``tests/suite/test_semantics.py`` checks it against torch).

The rules follow ``torch.softmax`` / ``torch.log_softmax``, which follow IEEE
propagation through ``exp(x - max(x)) / sum``.  Everything they leave open is
ordinary arithmetic on the finite entries, which the oracles compute to correct
rounding.  Signs of zero in the input do not matter (``exp(-0) == exp(+0)``).
A row with no entries (an empty row) has no result to decide: its result is
empty.

The backwards (``softmax_backward(grad, y, dim)``: ``y (g - sum g y)``;
``log_softmax_backward``: ``g - exp(y) sum g``) take a forward's output ``y``
and a gradient ``g``.  Their finite inputs are arithmetic, and so is a
log_softmax output of -inf (an entry the forward's exp lost: exp(-inf) = 0, the
result is ``g`` exactly).  Where an input is NaN or infinite (a NaN row of the
forward, a gradient that overflowed under loss scaling), :func:`decide_backward`
fixes the results as IEEE arithmetic evaluates the definition: every result
that evaluation leaves non-finite is decided, NaN or its signed infinity, and
the row's finite results (the log_softmax backward's entries beside a lone
NaN of y) stay arithmetic.  A non-finite product or sum reaches every result of
its row: an infinite ``g_k y_k`` or ``sum g`` makes each ``y_j (g_j - S)``
and each ``g_j - exp(y_j) G`` an infinity of the opposite sign, or NaN where it
meets its own infinity or a zero (``0 * inf``), in ``y g - y S`` as in
``y (g - S)``, in any format, FMA or not.  Where the definition gives an
infinity, NaN is accepted too (:func:`nan_for_infinity`): a kernel's
arithmetic may see a zero that the definition does not, and meet the infinite
sum as ``0 * inf``: in the log_softmax backward an ``exp(y_j)`` that underflows
in the kernel's precision (fp32's below 1e-45, float64's not), in the softmax
backward a subnormal ``y_j`` read as 0 (the Triton interpreter's bf16 upcast,
``oracles.bounds.unreliable_input_below``; a nightly draw on the CPU).  A kernel
that gives finite numbers there hides an overflow from the loss scaler that
looks for it (one that returns ``g_j`` for a ``y_j`` of -inf without the
product does, where ``G`` is infinite: ``g_j - 0 * inf`` is NaN).

Masked softmax (``masked_softmax(x, mask, dim)``, ``mask`` True = keep): masked
entries act as -inf (whatever they held, NaN included), and the rules then
apply to the row so masked.  A row left with nothing but -inf (fully masked,
or whose kept entries are all -inf) gives all zeros rather than NaN.  This is
the "safe softmax" convention of PyTorch's ``_safe_softmax`` and of attention
kernels: a query with nothing to attend to contributes nothing, instead of
poisoning later sums with NaN.  A NaN or +inf among the kept entries still
makes the row NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Rows = np.ndarray  # float values, rows along the last axis


def _every_entry(rows: Rows) -> np.ndarray:
    return np.ones(rows.shape, dtype=bool)


@dataclass(frozen=True)
class Rule:
    """One special case: which rows it holds for, which of their entries it decides, and their exact results."""

    name: str  # its test id, and its class of special values in the coverage matrix
    holds: Callable[[Rows], np.ndarray]  # rows -> one bool per row: the row is a case of this rule
    decides: Callable[[Rows], np.ndarray]  # rows -> one bool per entry: the entries whose result it fixes
    softmax: float
    log_softmax: float
    masked_softmax: float  # on the row with its masked entries made -inf
    why: str  # the reason, as a failure's explanation names it
    example: tuple[float, ...]  # a row it holds for, that no earlier rule holds for (the tests start from it)

    def result(self, *, log: bool = False, masked: bool = False) -> float:
        """The exact result at each entry it decides, for softmax, log_softmax (``log``) or masked softmax."""
        if log and masked:
            raise ValueError("masked is defined for softmax only, not log_softmax")
        return self.log_softmax if log else self.masked_softmax if masked else self.softmax


RULES = (
    # NaN propagates through max, exp and the sum: every result of the row is NaN.
    Rule("nan", holds=lambda rows: np.isnan(rows).any(-1), decides=_every_entry,
         softmax=math.nan, log_softmax=math.nan, masked_softmax=math.nan,
         why="the row holds a NaN", example=(0.0, math.nan, 1.0)),
    # The maximum is +inf and +inf - +inf is NaN: every result of the row is NaN, as torch gives.
    Rule("+inf", holds=lambda rows: np.isposinf(rows).any(-1), decides=_every_entry,
         softmax=math.nan, log_softmax=math.nan, masked_softmax=math.nan,
         why="the row holds +inf (inf - inf is undefined)", example=(math.inf, 0.0, 1.0)),
    # No finite maximum: -inf - -inf is NaN.  Masked softmax gives zeros instead ("safe softmax"): a query
    # with nothing to attend to contributes nothing.
    Rule("-inf rows", holds=lambda rows: np.isneginf(rows).all(-1) & (rows.shape[-1] > 0), decides=_every_entry,
         softmax=math.nan, log_softmax=math.nan, masked_softmax=0.0,
         why="every entry of the row is -inf (or masked): it has no finite maximum",
         example=(-math.inf, -math.inf, -math.inf)),
    # Beside a finite maximum, exp(-inf - max) = 0 exactly: softmax 0, log_softmax -inf.  The row's finite
    # entries are left to arithmetic.
    Rule("-inf", holds=lambda rows: np.isneginf(rows).any(-1), decides=np.isneginf,
         softmax=0.0, log_softmax=-math.inf, masked_softmax=0.0,
         why="its logit is -inf (or masked): exp(-inf) = 0", example=(-math.inf, 2.0, 2.0)),
)
"""The special cases, in the order they are tried: a row follows the first that holds for it."""

BY_NAME = {rule.name: rule for rule in RULES}


def decide(rows: Rows, *, log: bool = False, masked: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The entries of ``rows`` (last axis) the table decides, and their exact results (NaN elsewhere).

    ``masked``: the results of masked softmax, on rows whose masked entries are already -inf.
    """
    rows = np.asarray(rows)
    decided = np.zeros(rows.shape, dtype=bool)
    results = np.full(rows.shape, np.nan)
    undecided_rows = np.ones(rows.shape[:-1], dtype=bool)
    for rule in RULES:
        holds = rule.holds(rows) & undecided_rows
        entries = holds[..., None] & rule.decides(rows)
        results[entries] = rule.result(log=log, masked=masked)
        decided |= entries
        undecided_rows &= ~holds
    return decided, results


def decided_rows(rows: Rows) -> np.ndarray:
    """The rows whose every result the table decides (empty rows included): they need no arithmetic."""
    return decide(rows)[0].all(-1)


def rule_of(row: Rows) -> Rule | None:
    """The rule one row follows, or None where none holds (every entry is finite)."""
    return next((rule for rule in RULES if rule.holds(np.asarray(row))), None)


def nan_for_infinity(expected: np.ndarray, got: np.ndarray) -> np.ndarray:
    """The decided results of a backward where ``got`` is NaN for the definition's infinity (module docstring), which
    is accepted; a NaN of the definition is never an infinity, and a finite number neither."""
    return np.isinf(expected) & np.isnan(got)


def decide_backward(y: Rows, g: Rows, *, log: bool) -> tuple[np.ndarray, np.ndarray]:
    """The results of a backward that its special inputs decide (module docstring): the entries of ``y`` and ``g``
    (rows along the last axis, float64) whose IEEE evaluation of the definition is NaN or infinite where an input
    of their row is not finite (a log_softmax's -inf in ``y`` aside), and those results (NaN elsewhere)."""
    y, g = np.asarray(y, dtype=np.float64), np.asarray(g, dtype=np.float64)
    with np.errstate(all="ignore"):
        if log:
            # G: IEEE's sum (its inf - inf is NaN, where fsum raises); correctly rounded (fsum) in the rows whose
            # gradient is finite and whose y holds a NaN or +inf, where its sign, and whether it is 0, decide
            # exp(+inf) * G (the only rows where a finite G reaches a decided result).
            total = g.sum(-1, keepdims=True)
            for index in zip(*np.nonzero(np.isfinite(g).all(-1) & (np.isnan(y) | np.isposinf(y)).any(-1))):
                total[index] = math.fsum(g[index].tolist())
            results = g - np.exp(y) * total
            inputs_special = ~np.isfinite(g).all(-1, keepdims=True) | np.isnan(y) | np.isposinf(y)
        else:
            results = y * (g - (g * y).sum(-1, keepdims=True))
            inputs_special = ~(np.isfinite(g) & np.isfinite(y)).all(-1, keepdims=True)
    decided = inputs_special & ~np.isfinite(results)
    return decided, np.where(decided, results, np.nan)
