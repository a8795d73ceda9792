"""From a case to a verdict, one path: the call it makes, the kernel run under the guard, its refusal or its output
judged.  Every test that runs a kernel on an input of its own and the replay (``python -m harness.replay``) take it.

:func:`run_and_judge` runs a call and keeps what happened (:class:`Ran`); a test asks :meth:`Ran.check` for its
verdict, the replay reads the same record and says it.  Inside the kernel's declared capabilities its output is
judged by its own precision model; outside them this project's kernels must raise the clear error the capabilities
name, and a user's may refuse as torch does (any exception) or return numbers torch would, judged with the loosest
known arithmetic.  A broken call contract or a hang (:mod:`harness.guard.calls`) is never taken for a refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

from oracles.call import Call
from specs.registry import KernelSpec

from ..guard import replay_command
from ..guard.calls import ContractBroken, SuiteFailure, describe_input
from .judge import Judgement, accepted_by_torch, judge_softmax, unknown_construction

LOOSEST = "judged with the loosest known arithmetic"


@dataclass(frozen=True)
class Ran:
    """A call of a kernel run and, where it returned, judged."""

    # The kernel, as declared.
    kernel: KernelSpec
    # The call it ran.
    call: Call
    # Why its declared capabilities exclude the call (the error this project's kernels raise); None: they include it.
    refusal: Exception | None
    # What the kernel raised instead of returning; None where it returned.
    raised: Exception | None
    # Its output judged: by its precision model inside its capabilities, with the loosest known arithmetic outside;
    # None where it raised, or returned numbers outside them that torch refuses or that hold nothing to judge.
    verdict: Judgement | None
    # Outside its capabilities, where a kernel that may refuse as torch does returned numbers: whether torch takes
    # the input (asked once: on an input past 2^31 elements a second ask could run out of memory where the first
    # did not); None where nobody asked.
    torch_accepts: bool | None = None

    @property
    def returned_outside(self) -> str:
        return f"{self.kernel.name} returned numbers for an input outside its declared capabilities ({self.refusal})"

    def check(self) -> None:
        """A test's verdict: raise what the kernel did wrong (the kernel's own error where it raised one it must not)."""
        if isinstance(self.raised, SuiteFailure) or self.refusal is None and self.raised is not None:
            raise self.raised
        if self.refusal is None:
            self.verdict.check()
        elif self.kernel.clear_refusals:
            if not isinstance(self.raised, type(self.refusal)):
                if self.raised is not None:
                    raise self.raised
                pytest.fail(f"DID NOT RAISE {type(self.refusal)}: {self.returned_outside}")
        elif self.raised is None:
            assert self.torch_accepts, self.returned_outside
            if self.verdict is not None:
                self.verdict.check(f"{self.returned_outside}, {LOOSEST}:\n")


def run_and_judge(kernel: KernelSpec, call: Call, *, replay: str, command: str | None = None,
                  judged: Callable[[torch.Tensor], tuple[Call, torch.Tensor]] | None = None) -> Ran:
    """Run ``kernel`` on ``call`` (under the guard its callables carry) and judge what it returned.  ``replay``: what
    a verdict says to replay it; ``command``: the one-step replay a failure carries; ``judged``: the call and output
    to judge, of the output (a test of large inputs judges their first and last rows)."""
    refusal = kernel.capabilities.call_refusal(call)
    try:
        y = kernel.run(call, replay=command)
    except Exception as error:  # noqa: BLE001  (a refusal, the guard's failures, a kernel's crash: check() sorts them)
        return Ran(kernel, call, refusal, error, None)
    judged_call, judged_y = judged(y) if judged else (call, y)
    try:
        if refusal is None:
            return Ran(kernel, call, None, None, judge_softmax(kernel, judged_call, judged_y, replay=replay,
                                                               command=command))
        if kernel.clear_refusals:  # it must have raised: check() fails it whatever torch makes of the input
            return Ran(kernel, call, refusal, None, None)
        accepts = accepted_by_torch(call.x, call.dim)
        judgeable = accepts and call.x.is_floating_point() and call.x.numel()
        verdict = judge_softmax(unknown_construction(kernel), judged_call, judged_y, replay=replay,
                                command=command) if judgeable else None
        return Ran(kernel, call, refusal, None, verdict, accepts)
    except ContractBroken as error:  # a result of another shape or dtype than the operation's: nothing to judge
        return Ran(kernel, call, refusal, error, None)


def judge_case(kernel: KernelSpec, backend, op, case) -> tuple[Ran, str]:
    """A drawn case of the operation ``op`` on ``backend``, run and judged; with what a failure says to replay it
    (the case, its input, and the command that replays it in one step)."""
    call = case.call(op, backend.name, backend.device)
    command = replay_command.command(kernel, backend.name, op.name, case)
    described = describe_input(call.x, case.dim, call.grad, call.bias)
    replay = f"{case!r} -> {described}\n{replay_command.PREFIX}{command}"
    return run_and_judge(kernel, call, replay=replay, command=command), replay
